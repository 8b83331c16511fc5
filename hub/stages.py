"""Where each task's time went between its submit and its Running report.

``Metrics`` owns one ``StageClock``. The placement loop stamps the tasks a cycle placed
(``placed``: when each was submitted and when its submit was durable, when the cycle
started, when its decisions were done, when its commit was durable), the agent channel
stamps the moment a PlaceTask was written on the cluster's stream (``sent``) and the moment
a Running report was read and applied (``running``, with the member's own stamp from the
report). Each finished journey is observed, stage by stage, in
the ``fuyao_task_stage_seconds`` histogram (label ``stage``):

=========  ====================================================================
store      submit -> its tasks stored (the submit's commit, the store writer's queue)
queue      stored -> the placement cycle that placed it started
decide     the cycle's start -> its slice of decisions done (~5 ms slices)
commit     decisions done -> its slice's store commit is durable
send       commit durable -> PlaceTask written on the cluster's gRPC stream
member     written -> the member reports it Running (wire, agent, member bind)
report     the member's Running stamp -> the hub read the report off the stream
apply      read -> applied in the hub's memory (its store write is queued)
=========  ====================================================================

All stamps are wall-clock seconds (the member's stamp is wall-clock too); a skewed member
clock shifts time between ``member`` and ``report`` only, and negative spans count as 0.
Journeys are kept for at most ``MAX_OPEN`` tasks (oldest forgotten first), so a task that
never runs costs nothing for long. ``bench/e2e_bench.py`` reads the histogram.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

STAGES = ("store", "queue", "decide", "commit", "send", "member", "report", "apply")
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
           10.0, 30.0, 60.0)
MAX_OPEN = 200_000


@dataclass(slots=True)
class _Journey:
    submitted: float
    stored: float
    cycle: float
    decided: float
    committed: float
    sent: float | None = None


class StageHistogram(Collector):
    """``fuyao_task_stage_seconds``: one histogram child per stage, all observed at once.

    What ``prometheus_client.Histogram("fuyao_task_stage_seconds", ..., ["stage"])`` with a
    child per stage exposes (the same samples, labels, buckets, sums added in the same
    order, a ``_created`` stamp per child), kept as plain counts: a Running report observes
    seven spans, and seven ``Histogram.observe`` calls (a lock, a counter object and a
    linear bucket scan each) were ~2% of the hub's CPU in the e2e bench.

    ``exposition`` writes the same text ``generate_latest`` makes of ``collect``'s samples
    without building them: each line's name and labels were written once, by
    ``generate_latest`` itself, and a scrape formats only the numbers (140 of the ~160
    samples on ``/metrics`` are this histogram's; formatting them was ~1 ms a scrape).
    """

    NAME = "fuyao_task_stage_seconds"
    DOC = "Where a task's time went from submit to Running, by stage"

    def __init__(self, stages: Sequence[str], buckets: Sequence[float],
                 registry: CollectorRegistry | None) -> None:
        self.stages = tuple(stages)
        self.bounds = (*buckets, float("inf"))
        self._le = tuple(floatToGoString(b) for b in self.bounds)  # type: ignore[no-untyped-call]
        self._counts = [[0] * len(self.bounds) for _ in self.stages]   # per bucket, not summed
        self._sums = [0.0] * len(self.stages)
        self._created = time.time()
        self._lock = threading.Lock()   # a scrape reads whole observations
        self._observed = 0              # observations so far: the cached text's age
        self._text: tuple[int, bytes] | None = None     # (observations, text) last written
        self._head, self._prefixes, self._tail = self._template()
        if registry is not None:
            registry.register(self)

    def _template(self) -> tuple[str, tuple[str, ...], str]:
        """``generate_latest``'s text cut into what never changes: the HELP and TYPE lines,
        each bucket / count / sum line up to its value, and the ``_created`` gauge it moves
        to the end (its stamps are fixed)."""
        lines = generate_latest(self).decode().splitlines(keepends=True)
        valued = len(self.stages) * (len(self.bounds) + 2)    # buckets, _count, _sum
        prefixes = tuple(line.rsplit(" ", 1)[0] + " " for line in lines[2:2 + valued])
        return "".join(lines[:2]), prefixes, "".join(lines[2 + valued:])

    def observe_all(self, spans: Sequence[float]) -> None:
        """One observation per stage, in ``stages`` order (``Histogram.observe`` each)."""
        bounds, counts, sums = self.bounds, self._counts, self._sums
        with self._lock:
            for i, span in enumerate(spans):
                counts[i][bisect_left(bounds, span)] += 1   # the first bound >= span
                sums[i] += span
            self._observed += 1

    def describe(self) -> Iterator[Metric]:
        """The family without samples (the registry checks names on register)."""
        yield Metric(self.NAME, self.DOC, "histogram")

    def collect(self) -> Iterator[Metric]:
        """The histogram's samples, as ``prometheus_client.Histogram`` writes them."""
        with self._lock:
            counts = [list(c) for c in self._counts]
            sums = list(self._sums)
        metric = Metric(self.NAME, self.DOC, "histogram")
        for stage, stage_counts, total in zip(self.stages, counts, sums, strict=True):
            cumulative = 0
            for le, count in zip(self._le, stage_counts, strict=True):
                cumulative += count
                metric.add_sample(f"{self.NAME}_bucket", {"stage": stage, "le": le},
                                  float(cumulative))
            metric.add_sample(f"{self.NAME}_count", {"stage": stage}, float(cumulative))
            metric.add_sample(f"{self.NAME}_sum", {"stage": stage}, total)
            metric.add_sample(f"{self.NAME}_created", {"stage": stage}, self._created)
        yield metric

    def exposition(self) -> bytes:
        """``generate_latest`` of this collector alone, byte for byte (kept until the next
        observation)."""
        with self._lock:
            if self._text is not None and self._text[0] == self._observed:
                return self._text[1]
            observed = self._observed
            counts = [list(c) for c in self._counts]
            sums = list(self._sums)
        values: list[str] = []
        for stage_counts, total in zip(counts, sums, strict=True):
            cumulative = 0
            for count in stage_counts:
                cumulative += count
                values.append(go_count(cumulative))
            values += (go_count(cumulative), floatToGoString(total))  # type: ignore[no-untyped-call]
        body = "".join([f"{prefix}{value}\n"
                        for prefix, value in zip(self._prefixes, values, strict=True)])
        text = f"{self._head}{body}{self._tail}".encode()
        with self._lock:
            if self._observed == observed:
                self._text = (observed, text)
        return text


def go_count(n: int) -> str:
    """``floatToGoString(float(n))`` for a count ``n >= 0``: ``repr`` of the float, which for
    fewer than seven digits is the digits and ``.0`` (Go's exponent form starts at 1e6)."""
    return f"{n}.0" if n < 1_000_000 else floatToGoString(float(n))  # type: ignore[no-untyped-call]


class StageClock:
    """Per-task stamps from submit to Running, observed per stage when it runs."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.histogram = StageHistogram(STAGES, BUCKETS, registry)
        self._open: dict[str, _Journey] = {}

    def placed(self, tasks: Iterable[tuple[str, float, float | None]], cycle: float,
               decided: float, committed: float) -> None:
        """Tasks (id, submit wall time, wall time the submit was durable or None if not
        known - a task loaded from the store: its ``store`` span counts as 0) one cycle
        placed, with the cycle's stamps."""
        for task_id, submitted, stored in tasks:
            self._open.pop(task_id, None)       # a re-placement starts a new journey
            self._open[task_id] = _Journey(submitted, submitted if stored is None else stored,
                                           cycle, decided, committed)
        while len(self._open) > MAX_OPEN:
            del self._open[next(iter(self._open))]

    def sent(self, task_id: str, at: float | None = None) -> None:
        """The task's PlaceTask was written on its cluster's stream."""
        journey = self._open.get(task_id)
        if journey is not None and journey.sent is None:
            journey.sent = time.time() if at is None else at

    def running(self, task_id: str, member_ms: int, received: float,
                applied: float | None = None) -> None:
        """The member reported the task Running (its stamp ``member_ms``); the hub read the
        report at ``received`` and applied it at ``applied``."""
        journey = self._open.pop(task_id, None)
        if journey is None or journey.sent is None:
            return
        applied = time.time() if applied is None else applied
        member = member_ms / 1000 if member_ms > 0 else received
        spans = (journey.stored - journey.submitted, journey.cycle - journey.stored,
                 journey.decided - journey.cycle,
                 journey.committed - journey.decided, journey.sent - journey.committed,
                 member - journey.sent, received - member, applied - received)
        self.histogram.observe_all([span if span > 0.0 else 0.0 for span in spans])

    def forget(self, task_id: str) -> None:
        """Drop a task's journey (it ended or moved before running)."""
        self._open.pop(task_id, None)

    def __len__(self) -> int:
        return len(self._open)
