"""Task endings of one agent stream whose commits are in flight.

A Succeeded or Failed report ends its task only once the store write is durable (then the
task is dropped, so it never runs again). Awaited in turn, one commit wait per ending held
every later message of the stream behind it: at 150 tasks/s through 10 members the Running
reports waited 0.3-1.5 s. ``AgentService`` now starts each ending as a task of its own that
has already done everything that orders it (the report checked, the task marked ended in
memory, its write queued: the writer keeps the order of writes), and goes on with the
stream's next messages; a message that could depend on an ending in flight (a report of the
same task, an inventory, anything but a heartbeat, a node delta or another task's report)
waits for all of them first, and so does the end of the stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


async def started(work: Coroutine[Any, Any, None]) -> asyncio.Future[None]:
    """``work`` as a task that has run up to its first wait (its synchronous part done in
    the caller's order: a new task's first step runs before the caller resumes)."""
    task = asyncio.ensure_future(work)
    task.add_done_callback(_retrieved)
    await asyncio.sleep(0)
    return task


def _retrieved(task: asyncio.Future[None]) -> None:
    """Mark a failure as seen (``Endings`` raises it; no "never retrieved" warning if the
    stream was cancelled first)."""
    if not task.cancelled():
        task.exception()


class Endings:
    """The endings in flight of one stream, by task id."""

    def __init__(self) -> None:
        self._inflight: dict[str, asyncio.Future[None]] = {}

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._inflight

    def __len__(self) -> int:
        return len(self._inflight)

    def add(self, task_id: str, ending: asyncio.Future[None]) -> None:
        """Track an ending started with ``started``."""
        self._inflight[task_id] = ending

    def reap(self) -> None:
        """Forget the endings that are done; raise the first that failed."""
        done = [(k, f) for k, f in self._inflight.items() if f.done()]
        for task_id, _ in done:
            del self._inflight[task_id]
        for _, ending in done:
            if not ending.cancelled() and ending.exception() is not None:
                raise ending.exception()  # type: ignore[misc]

    async def drain(self) -> None:
        """Wait for every ending in flight; raise the first that failed, in order."""
        endings, self._inflight = list(self._inflight.values()), {}
        outcomes = await asyncio.gather(*endings, return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
