"""The hub stops even when a cancel meets a wake-up: Python 3.11's ``asyncio.wait_for``
returned the woken result and dropped the cancel, so the placement loop ran on and
``Hub.stop()`` waited for it forever (seen as a 300 s teardown hang on a loaded machine).
Also: a cancel of whoever waits in ``Hub.stop()`` is not swallowed with the loops' own."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fuyao.aio import cancel_and_wait
from tests.hub.conftest import HubHarness, start_harness

BOUND = 30.0     # seconds; stopping takes well under one


async def _parked(event: asyncio.Event) -> None:
    """Until some task waits on ``event`` (bounded: a loop that never parks fails here)."""
    async with asyncio.timeout(BOUND):
        while not event._waiters:     # the asyncio.Event's parked waiters
            await asyncio.sleep(0.01)


async def _started(tmp_path: Path) -> HubHarness:
    h = await start_harness(tmp_path / "hub")
    await h.api.aclose()
    await h.listeners.stop(grace=0.1)
    await _parked(h.hub.placement.wake)
    return h


async def test_hub_stops_when_the_placement_loop_is_woken_as_it_is_cancelled(
        tmp_path: Path) -> None:
    h = await _started(tmp_path)
    h.hub.placement.poke()
    stopping = asyncio.create_task(h.hub.stop())    # its cancel lands in the same turn
    done, _ = await asyncio.wait({stopping}, timeout=BOUND)
    if not done:
        await cancel_and_wait([stopping])
        pytest.fail("Hub.stop() did not return: the placement loop lost its cancel")
    stopping.result()


async def test_cancel_and_wait_passes_on_a_cancel_of_its_caller() -> None:
    stubborn = asyncio.Event()

    async def child() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await stubborn.wait()      # a child slow to end, as a loop finishing a write

    kid = asyncio.create_task(child())
    await asyncio.sleep(0)
    waiter = asyncio.create_task(cancel_and_wait([kid]))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    stubborn.set()
    await asyncio.wait({kid}, timeout=BOUND)
    assert kid.cancelled()


async def test_cancel_and_wait_logs_a_task_that_failed(caplog: pytest.LogCaptureFixture) -> None:
    async def broken() -> None:
        raise RuntimeError("boom")

    task = asyncio.create_task(broken())
    await asyncio.sleep(0)
    await cancel_and_wait([task, None])
    assert "boom" in caplog.text
