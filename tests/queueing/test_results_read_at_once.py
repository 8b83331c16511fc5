"""A placement cycle reads each decision's statuses and score table right after making it
(``PlacementResult.read_now``), so the engine keeps no journal for the decisions of a slice
waiting to be staged. What is staged is the same as when the results were read at staging,
through their journals (hypothesis, failover included: tasks placed on two clusters, one
lost, its tasks re-placed): every decision - task, cluster, nodes, model - in order, with
the score records and reasons stored for it."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuyao.spec import ClusterState
from hub import loops
from hub.activetask import ActiveTask
from hub.placement.result import PlacementResult
from hub.scorerows import score_records
from tests.hub.conftest import HubHarness
from tests.queueing.conftest import add_cluster, quiet_harness, submit


def record(h: HubHarness) -> list[tuple[Any, ...]]:
    """Every decision the hub's cycles stage from now on, as staged, in order."""
    seen: list[tuple[Any, ...]] = []
    stage = h.hub.placement._stage

    def staged(placed: list[tuple[ActiveTask, PlacementResult]],
               waiting: list[tuple[ActiveTask, PlacementResult]],
               held: list[tuple[ActiveTask, str]]) -> loops._Slice:
        seen.extend((t.name, r.cluster, r.nodes, r.model, score_records(r), r.reasons)
                    for t, r in [*placed, *waiting])
        return stage(placed, waiting, held)

    h.hub.placement._stage = staged   # type: ignore[method-assign]
    return seen


async def decisions(tasks: list[tuple[int, int]], nodes: tuple[int, int, int],
                    at_once: bool) -> list[tuple[Any, ...]]:
    """What the cycles stage placing ``tasks`` (gpus, priority) on c0, c1 and c2, then
    re-placing c0's tasks once c0 is lost."""
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        patch.setattr(loops, "SLICE_SECONDS", 60.0)   # one slice: its results kept across
        if not at_once:
            patch.setattr(PlacementResult, "read_now", lambda self: None)
        async with quiet_harness(Path(tmp) / "hub") as h:
            for i, count in enumerate(nodes):
                add_cluster(h, f"c{i}", nodes=count, gpus=4)
            await submit(h, *({"name": f"t{i}", "gpu": g, "priority": p}
                              for i, (g, p) in enumerate(tasks)))
            seen = record(h)
            await h.hub.placement.cycle()
            h.hub.fleet.upsert_cluster("c0", labels={}, weight=1, headroom=0.0,
                                       state=ClusterState.NOT_READY)
            await h.hub.tasks.requeue_cluster("c0", "c0 lost (test)")
            await h.hub.placement.cycle()
            return seen


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tasks=st.lists(st.tuples(st.integers(1, 4), st.integers(-1, 1)), min_size=1,
                      max_size=24),
       nodes=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(0, 2)))
def test_what_is_staged_is_what_reading_at_staging_gave(
        tasks: list[tuple[int, int]], nodes: tuple[int, int, int]) -> None:
    at_once = asyncio.run(decisions(tasks, nodes, at_once=True))
    late = asyncio.run(decisions(tasks, nodes, at_once=False))
    assert at_once == late
    assert at_once     # something was decided
