"""``fuyao_task_stage_seconds`` kept as plain counts exposes what the ``prometheus_client``
histogram it replaced did: the same text on ``/metrics`` for the same observations, and the
text it writes itself for a scrape is what ``generate_latest`` makes of its samples."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from hub.metrics import Metrics
from hub.stages import BUCKETS, STAGES, StageClock, StageHistogram, go_count

SPAN = st.one_of(st.sampled_from((0.0, *BUCKETS)),
                 st.floats(min_value=0.0, max_value=1e6, allow_nan=False),
                 st.just(float("inf")))


def _exposed(registry: CollectorRegistry) -> list[str]:
    """The registry's text, ``_created`` stamps aside (each object takes its own time)."""
    return [line for line in generate_latest(registry).decode().splitlines()
            if not line.startswith("fuyao_task_stage_seconds_created{")]


@given(st.lists(st.lists(SPAN, min_size=len(STAGES), max_size=len(STAGES)), max_size=30))
def test_the_same_exposition_as_a_prometheus_histogram(journeys: list[list[float]]) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    kept = StageHistogram(STAGES, BUCKETS, ours)
    histogram = Histogram(StageHistogram.NAME, StageHistogram.DOC, ["stage"], buckets=BUCKETS,
                          registry=theirs)
    children = [histogram.labels(stage=stage) for stage in STAGES]
    for spans in journeys:
        kept.observe_all(spans)
        for child, span in zip(children, spans, strict=True):
            child.observe(span)
    assert _exposed(ours) == _exposed(theirs)
    created = [line for line in generate_latest(ours).decode().splitlines()
               if line.startswith("fuyao_task_stage_seconds_created{")]
    assert len(created) == len(STAGES)


def test_a_running_task_is_observed_per_stage_and_negative_spans_count_as_zero() -> None:
    registry = CollectorRegistry()
    clock = StageClock(registry)
    clock.placed([("t1", 100.0, 100.75)], cycle=101.0, decided=100.5, committed=102.0)
    clock.sent("t1", at=102.5)
    clock.running("t1", member_ms=103_000, received=103.25, applied=103.5)

    def value(name: str, stage: str) -> float | None:
        return registry.get_sample_value(f"fuyao_task_stage_seconds_{name}", {"stage": stage})

    assert [value("sum", stage) for stage in STAGES] == [0.75, 0.25, 0.0, 1.5, 0.5, 0.5, 0.25, 0.25]
    assert [value("count", stage) for stage in STAGES] == [1.0] * len(STAGES)
    assert registry.get_sample_value("fuyao_task_stage_seconds_bucket",
                                     {"stage": "commit", "le": "1.0"}) == 0.0
    assert registry.get_sample_value("fuyao_task_stage_seconds_bucket",
                                     {"stage": "commit", "le": "2.5"}) == 1.0
    assert len(clock) == 0


class _Only:
    """One collector as a registry (what ``generate_latest`` walks)."""

    def __init__(self, collector: StageHistogram) -> None:
        self.collector = collector

    def collect(self) -> Iterator[Metric]:
        return self.collector.collect()


ANY_SPAN = st.one_of(SPAN, st.floats(), st.floats(min_value=-1e-3, max_value=1e-3))


@given(st.lists(st.tuples(st.lists(ANY_SPAN, min_size=len(STAGES), max_size=len(STAGES)),
                          st.booleans()), max_size=30))
def test_the_written_exposition_is_generate_latest_of_the_samples(
        steps: list[tuple[list[float], bool]]) -> None:
    """``exposition`` (lines written once, numbers per scrape, the text kept until the next
    observation) equals ``generate_latest`` of ``collect``'s samples after every step,
    ``_created`` lines, infinite, NaN and negative sums included."""
    kept = StageHistogram(STAGES, BUCKETS, None)
    assert kept.exposition() == generate_latest(_Only(kept))
    for spans, scrape_twice in steps:
        kept.observe_all(spans)
        assert kept.exposition() == generate_latest(_Only(kept))
        if scrape_twice:
            assert kept.exposition() == generate_latest(_Only(kept))


@given(st.one_of(st.integers(min_value=0, max_value=2_000_000),
                 st.integers(min_value=0, max_value=2**70)))
def test_a_count_is_written_as_float_to_go_string_writes_it(n: int) -> None:
    assert go_count(n) == floatToGoString(float(n))


@given(st.lists(st.lists(SPAN, min_size=len(STAGES), max_size=len(STAGES)), max_size=10),
       st.integers(min_value=0, max_value=3))
def test_metrics_render_is_generate_latest_of_the_registry(journeys: list[list[float]],
                                                           extra: int) -> None:
    """The hub's ``/metrics`` body is ``generate_latest`` of its whole registry, with
    collectors registered after the stage histogram (HA, Redis events) and one unregistered."""
    metrics = Metrics()
    later = [Gauge(f"extra_{i}", "registered after the stages", ["k"], registry=metrics.registry)
             for i in range(extra)]
    for i, gauge in enumerate(later):
        gauge.labels(k=str(i)).set(i)
    if later:
        metrics.registry.unregister(later[0])
    metrics.observe_cycle(3, 2, 0.004)
    metrics.agent_message("inventory")
    for spans in journeys:
        metrics.stages.histogram.observe_all(spans)
        assert metrics.render() == generate_latest(metrics.registry)
    assert metrics.render() == generate_latest(metrics.registry)


def test_the_hub_registry_refuses_target_info_it_would_not_render() -> None:
    with pytest.raises(NotImplementedError):
        Metrics().registry.set_target_info({"version": "1"})
