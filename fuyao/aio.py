"""Stopping asyncio tasks without losing a cancel.

``task.cancel(); with suppress(CancelledError): await task`` also swallows a cancel aimed at
the *caller* while it waits, so a bounded shutdown (``asyncio.timeout`` around it) silently
ran on. ``cancel_and_wait`` waits with ``asyncio.wait``, which never raises for the tasks it
waits on and always raises for a cancel of its caller.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any] | None]) -> None:
    """Cancel ``tasks`` (None entries skipped) and wait until each has ended; an exception a
    task ended with (other than its cancel) is logged, not raised. A cancel of the caller
    propagates; the tasks stay cancelled."""
    pending = [t for t in tasks if t is not None]
    for task in pending:
        task.cancel()
    if not pending:
        return
    await asyncio.wait(pending)
    for task in pending:
        if not task.cancelled() and task.exception() is not None:
            log.error("%s ended with an error while stopping", task,
                      exc_info=task.exception())
