"""A backend event sink for agent tests: records events and waits for conditions."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from member_agent.backends.base import BackendEvent, Phase, TaskChanged


class Recorder:
    """Collects backend events; waits for task phases or any condition."""

    def __init__(self) -> None:
        self.events: list[BackendEvent] = []
        self.changed = asyncio.Event()

    def __call__(self, event: BackendEvent) -> None:
        self.events.append(event)
        self.changed.set()

    def phases(self, task_id: str = "t-1", gen: int = 1) -> list[Phase]:
        """The phases reported for one task copy, in order."""
        return [e.status.phase for e in self.events if isinstance(e, TaskChanged)
                and (e.status.task_id, e.status.generation) == (task_id, gen)]

    async def until(self, check: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait for ``check()``; it may also depend on outside state, so poll too."""
        async with asyncio.timeout(timeout):
            while not check():
                self.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), 0.05)

    async def wait_for(self, task_id: str, phase: Phase, gen: int = 1) -> None:
        """Wait until the task copy reports ``phase``."""
        await self.until(lambda: phase in self.phases(task_id, gen), timeout=3.0)
