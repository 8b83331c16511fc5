"""Preemption on a real in-process hub, for generated workloads (hypothesis): it never evicts
a task of a rank at least the preemptor's or one marked ``preemptible: false``, every evicted
task is Queued again exactly once (one ``Preempted`` event), no task is lost, and it evicts
exactly when a simple reference model (free GPUs plus evictable GPUs on the one node) says
room can be made, with no victim to spare."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.queueing.conftest import add_cluster, placed, quiet_harness, submit

NODE_GPUS = 4
running = st.lists(st.tuples(st.integers(-2, 2), st.booleans(), st.sampled_from([1, 2])),
                   min_size=2, max_size=6)


async def scenario(tasks: list[tuple[int, bool, int]], priority: int, gpus: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with quiet_harness(Path(tmp) / "hub") as h:
            add_cluster(h, "east", nodes=1, gpus=NODE_GPUS)
            await submit(h, *({"name": f"t{i}", "gpu": g, "priority": p, "preemptible": ok}
                              for i, (p, ok, g) in enumerate(tasks)))
            await h.hub.placement.cycle()
            before = set(placed(h))
            await submit(h, {"name": "boss", "gpu": gpus, "priority": priority})
            await h.hub.placement.cycle()
            await h.hub.placement.cycle()
            views = {t["name"]: t for t in (await h.api.get("/api/v1/tasks")).json()}
            assert set(views) == {f"t{i}" for i in range(len(tasks))} | {"boss"}   # none lost
            victims: list[int] = []
            for i, (p, ok, g) in enumerate(tasks):
                name = f"t{i}"
                events = (await h.api.get(f"/api/v1/tasks/{name}")).json()["events"]
                preempted = [e for e in events if e["kind"] == "Preempted"]
                assert len(preempted) <= 1
                if preempted:
                    event("preempted")
                    victims.append(g)
                    assert name in before and ok and p < priority
                    assert views[name]["state"] in ("Queued", "Placed")   # back in its queue
                    assert preempted[0]["message"].startswith("Preempted by boss")
                elif name in before:
                    assert views[name]["state"] == "Placed"
            expect_preemption(tasks, before, priority, gpus, victims)


def expect_preemption(tasks: list[tuple[int, bool, int]], before: set[str], priority: int,
                      gpus: int, victims: list[int]) -> None:
    """The reference model, one 4-GPU node: boss (tried once no older task of a priority at
    least its own waits ahead of it) takes free room without evicting; otherwise it evicts
    iff free room plus the evictable tasks' GPUs cover it, enough of them and none spare."""
    used = {f"t{i}": g for i, (_, _, g) in enumerate(tasks) if f"t{i}" in before}
    free = NODE_GPUS - sum(used.values())
    ahead = any(p >= priority for i, (p, _, _) in enumerate(tasks) if f"t{i}" not in before)
    evictable = sum(g for i, (p, ok, g) in enumerate(tasks)
                    if f"t{i}" in before and ok and p < priority)
    if ahead or gpus <= free or free + evictable < gpus:
        assert victims == [], (ahead, free, evictable, victims)
        return
    assert free + sum(victims) >= gpus, victims                  # enough room made
    assert all(free + sum(victims) - g < gpus for g in victims), victims   # none spare


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tasks=running, priority=st.integers(-1, 3), gpus=st.integers(1, 4))
def test_preemption_rules_hold_for_any_workload(tasks: list[tuple[int, bool, int]],
                                                priority: int, gpus: int) -> None:
    asyncio.run(scenario(tasks, priority, gpus))
