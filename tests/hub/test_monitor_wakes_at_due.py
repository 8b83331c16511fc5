"""The monitor wakes for a NotReady cluster's failover deadline (``next_eviction``): at that
time ``tick`` finds the cluster due, and at no earlier time does it find any cluster due
that was not due already, so waking there re-queues no sooner than a tick would."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hub.clusters
from hub.clusters import ClusterEntry, ClusterManager
from hub.config import HubConfig, Timings
from hub.loops import DUE_SLACK
from tests.store.make import cluster

NOW = 1000.0
offsets = st.floats(min_value=-60.0, max_value=0.0, allow_nan=False)


def manager(timings: Timings, silent: list[tuple[float, float]]) -> ClusterManager:
    """NotReady clusters ``c<i>``, last seen and NotReady since ``NOW`` plus the offsets."""
    clusters = ClusterManager(HubConfig(home=Path("unused"), timings=timings),
                              writer=None, fleet=None)  # type: ignore[arg-type]
    for i, (seen, since) in enumerate(silent):
        clusters.entries[f"c{i}"] = ClusterEntry(cluster(f"c{i}", state="NotReady"),
                                                 last_seen=NOW + seen,
                                                 not_ready_since=NOW + max(seen, since))
    return clusters


def due_at(clusters: ClusterManager, at: float, monkeypatch: Any) -> set[str]:
    """The clusters ``tick`` finds due at monotonic time ``at``."""
    monkeypatch.setattr(hub.clusters.time, "monotonic", lambda: at)
    return set(asyncio.run(clusters.tick()))


@settings(max_examples=60, deadline=None)
@given(eviction=st.floats(0.0, 40.0), lease=st.floats(1.0, 40.0), margin=st.floats(0.0, 10.0),
       silent=st.lists(st.tuples(offsets, offsets), min_size=1, max_size=4),
       before=st.floats(0.0, 0.99))
def test_due_at_next_eviction_and_not_before(eviction: float, lease: float, margin: float,
                                             silent: list[tuple[float, float]],
                                             before: float) -> None:
    timings = Timings(eviction_timeout=eviction, member_lease=lease, failover_margin=margin)
    clusters = manager(timings, silent)
    with pytest.MonkeyPatch.context() as monkeypatch:
        already = due_at(clusters, NOW, monkeypatch)
        wake = clusters.next_eviction(NOW)
        if wake is None:       # every cluster due already: the monitor keeps its interval
            assert already == set(clusters.entries)
            return
        assert wake >= NOW
        earlier = NOW + before * (wake - NOW)
        assert due_at(clusters, earlier, monkeypatch) == already
        assert due_at(clusters, wake + DUE_SLACK, monkeypatch) > already


@pytest.mark.parametrize(("silent_for", "expected"), [
    (32.5, 0.5 + DUE_SLACK),   # due in 0.5 s: sooner than the 1 s interval
    (20.0, 1.0),               # due in 13 s: the interval
    (40.0, 1.0),               # due already (its tasks moving): the interval, no busy loop
])
def test_the_monitor_sleeps_to_the_deadline_when_it_is_sooner(
        silent_for: float, expected: float, monkeypatch: Any) -> None:
    import hub.loops
    from hub.loops import Monitor

    timings = Timings(eviction_timeout=0.0, member_lease=30.0, failover_margin=3.0,
                      monitor_interval=1.0)
    monitor = Monitor.__new__(Monitor)
    monitor.clusters = manager(timings, [(-silent_for, -silent_for)])
    monitor.timings = timings
    monkeypatch.setattr(hub.loops.time, "monotonic", lambda: NOW)
    assert monitor.wait() == pytest.approx(expected)
