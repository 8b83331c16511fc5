"""Prometheus metrics of the hub, served on the health port (8851) at ``/metrics``.

Each hub process owns one ``Metrics`` (its own registry, so tests can run several hubs in
one process). The placement loop and the agent channel record into it (``stages``: where
each task's time went from submit to Running, ``hub.stages``); gauges of cluster
and task counts are read when scraped.

The exposition is ``generate_latest`` of the registry, byte for byte, written collector by
collector in the order they were registered so that the stage histogram (most of the text)
can write its own lines (``StageHistogram.exposition``).
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.registry import Collector

from hub.stages import StageClock, StageHistogram


class _Registry(CollectorRegistry):
    """A ``CollectorRegistry`` that also keeps its collectors in the order they were
    registered (the order ``collect`` walks them in; no target info is set)."""

    def __init__(self) -> None:
        super().__init__()
        self.collectors: list[Collector] = []

    def register(self, collector: Collector) -> None:
        super().register(collector)
        self.collectors.append(collector)

    def unregister(self, collector: Collector) -> None:
        super().unregister(collector)
        self.collectors.remove(collector)

    def set_target_info(self, labels: dict[str, str] | None) -> None:
        """Refused: ``Metrics.render`` writes the collectors only, so a target info line
        would be missing from ``/metrics`` (``None``, as ``CollectorRegistry`` sets it, is
        fine)."""
        if labels:
            raise NotImplementedError("the hub's registry does not carry target info")
        super().set_target_info(labels)


class Metrics:
    """The hub's counters, gauges and histograms."""

    def __init__(self) -> None:
        self.registry = _Registry()
        self.placements = Counter("fuyao_placements", "Tasks placed on a cluster",
                                  registry=self.registry)
        self.decisions = Counter("fuyao_placement_decisions", "Scheduler decisions made",
                                 registry=self.registry)
        self.cycle_seconds = Histogram(
            "fuyao_placement_cycle_decide_seconds",
            "Time to decide one placement cycle (in memory, before the commit)",
            buckets=(0.0001, 0.001, 0.01, 0.05, 0.1, 0.5, 1, 5), registry=self.registry)
        self.agent_messages = Counter("fuyao_agent_messages", "Messages from agents",
                                      ["kind"], registry=self.registry)
        self.unsendable_tasks = Counter(
            "fuyao_agent_unsendable_tasks",
            "Tasks failed because their PlaceTask exceeds agent_message_limit",
            registry=self.registry)
        self.agent_auth = Counter(
            "fuyao_agent_auth", "Agent authentications by method (certificate, or the "
            "deprecated bearer credential) and result", ["method", "result"],
            registry=self.registry)
        self.tasks = Gauge("fuyao_tasks", "Active tasks by state", ["state"],
                           registry=self.registry)
        self.clusters = Gauge("fuyao_clusters", "Clusters by state", ["state"],
                              registry=self.registry)
        self.parked = Gauge("fuyao_tasks_parked", "Queued tasks no cluster could take even "
                            "empty, left out of placement cycles until the fleet changes",
                            registry=self.registry)
        self.stages = StageClock(self.registry)   # where each task's time went
        self._collectors: list[Callable[[], None]] = []
        self._message_kinds: dict[str, Counter] = {}

    def agent_message(self, kind: str) -> None:
        """Count one agent message of ``kind`` (its child of ``agent_messages`` is looked up
        once: ``labels()`` per message is a lock and a label check each time)."""
        child = self._message_kinds.get(kind)
        if child is None:
            child = self._message_kinds[kind] = self.agent_messages.labels(kind=kind)
        child.inc()

    def observe_cycle(self, decisions: int, placed: int, seconds: float) -> None:
        """Record one placement cycle."""
        self.decisions.inc(decisions)
        self.placements.inc(placed)
        if decisions:
            self.cycle_seconds.observe(seconds)

    def on_scrape(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` before each scrape (to refresh gauges)."""
        self._collectors.append(fn)

    def render(self) -> bytes:
        """The Prometheus text exposition: ``generate_latest(self.registry)``."""
        for fn in self._collectors:
            fn()
        return b"".join([c.exposition() if isinstance(c, StageHistogram) else generate_latest(c)
                         for c in tuple(self.registry.collectors)])
