"""Preemption on a real in-process hub, for generated workloads (hypothesis): it never evicts
a task of a rank at least the preemptor's or one marked ``preemptible: false``, every evicted
task is Queued again exactly once (one ``Preempted`` event), and no task is lost."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.hub.conftest import start_harness, stop_harness
from tests.queueing.conftest import add_cluster, placed, submit

running = st.lists(st.tuples(st.integers(-2, 2), st.booleans(), st.sampled_from([1, 2])),
                   min_size=1, max_size=6)


async def scenario(tasks: list[tuple[int, bool, int]], priority: int, gpus: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        h = await start_harness(Path(tmp) / "hub")
        try:
            for loop in h.hub._loops:
                loop.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await loop
            add_cluster(h, "east", nodes=1, gpus=4)
            await submit(h, *({"name": f"t{i}", "gpu": g, "priority": p, "preemptible": ok}
                              for i, (p, ok, g) in enumerate(tasks)))
            await h.hub.placement.cycle()
            before = set(placed(h))
            await submit(h, {"name": "boss", "gpu": gpus, "priority": priority})
            await h.hub.placement.cycle()
            await h.hub.placement.cycle()
            views = {t["name"]: t for t in (await h.api.get("/api/v1/tasks")).json()}
            assert set(views) == {f"t{i}" for i in range(len(tasks))} | {"boss"}   # none lost
            for i, (p, ok, _) in enumerate(tasks):
                name = f"t{i}"
                events = (await h.api.get(f"/api/v1/tasks/{name}")).json()["events"]
                preempted = [e for e in events if e["kind"] == "Preempted"]
                assert len(preempted) <= 1
                if preempted:
                    event("preempted")
                    assert name in before and ok and p < priority
                    assert views[name]["state"] in ("Queued", "Placed")   # back in its queue
                    assert preempted[0]["message"].startswith("Preempted by boss")
                elif name in before:
                    assert views[name]["state"] == "Placed"
        finally:
            await stop_harness(h)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tasks=running, priority=st.integers(-2, 3), gpus=st.integers(1, 4))
def test_preemption_rules_hold_for_any_workload(tasks: list[tuple[int, bool, int]],
                                                priority: int, gpus: int) -> None:
    asyncio.run(scenario(tasks, priority, gpus))
