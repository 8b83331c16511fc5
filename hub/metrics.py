"""Prometheus metrics of the hub, served on the health port (8851) at ``/metrics``.

Each hub process owns one ``Metrics`` (its own registry, so tests can run several hubs in
one process). The placement loop and the agent channel record into it (``stages``: where
each task's time went from submit to Running, ``hub.stages``); gauges of cluster
and task counts are read when scraped.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from hub.stages import StageClock


class Metrics:
    """The hub's counters, gauges and histograms."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
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
        """The Prometheus text exposition."""
        for fn in self._collectors:
            fn()
        return generate_latest(self.registry)
