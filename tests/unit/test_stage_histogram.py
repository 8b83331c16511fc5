"""``fuyao_task_stage_seconds`` kept as plain counts exposes what the ``prometheus_client``
histogram it replaced did: the same text on ``/metrics`` for the same observations."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from hub.stages import BUCKETS, STAGES, StageClock, StageHistogram

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
    clock.placed([("t1", 100.0)], cycle=101.0, decided=100.5, committed=102.0)
    clock.sent("t1", at=102.5)
    clock.running("t1", member_ms=103_000, received=103.25, applied=103.5)

    def value(name: str, stage: str) -> float | None:
        return registry.get_sample_value(f"fuyao_task_stage_seconds_{name}", {"stage": stage})

    assert [value("sum", stage) for stage in STAGES] == [1.0, 0.0, 1.5, 0.5, 0.5, 0.25, 0.25]
    assert [value("count", stage) for stage in STAGES] == [1.0] * len(STAGES)
    assert registry.get_sample_value("fuyao_task_stage_seconds_bucket",
                                     {"stage": "commit", "le": "1.0"}) == 0.0
    assert registry.get_sample_value("fuyao_task_stage_seconds_bucket",
                                     {"stage": "commit", "le": "2.5"}) == 1.0
    assert len(clock) == 0
