"""What a placement stores as its per-cluster scores: the scheduler's verdicts, bounded,
written compact (``hub.scorerows``) and read back as the verdicts were."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from hub.fleet import FleetView
from hub.placement import Scheduler
from hub.placement.result import PlacementResult
from hub.scorerows import expand, frozen, placed_scores, score_records
from hub.store.jsontext import dumps

from .builders import fleet_of, node, place

MODELS = ["T4", "V100", "A100", "H100"]


def _fleet(frees: list[int]) -> FleetView:
    """One cluster per entry, with that many free GPUs of one model (0: rejected)."""
    return fleet_of({f"c{i:03d}": [node(f"n{i}", MODELS[i % 4], 8,
                                         free_milli=[1000] * free + [0] * (8 - free))]
                     for i, free in enumerate(frees)})


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=1, max_size=20), st.integers(1, 4))
def test_up_to_twenty_clusters_every_verdict_is_stored_as_the_scheduler_gave_it(
        frees: list[int], gpus: int) -> None:
    result = Scheduler(_fleet(frees)).schedule(place(gpu_milli=gpus * 1000))
    assert expand(score_records(result)) == [s.model_dump(mode="json") for s in result.scores]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=1, max_size=40), st.integers(1, 4))
def test_a_placement_stores_the_same_rows_and_shows_its_clusters_total(
        frees: list[int], gpus: int) -> None:
    """``placed_scores``: the rows ``score_records`` stores, and the chosen cluster's total
    as its verdict gives it (None when nothing fit)."""
    result = Scheduler(_fleet(frees)).schedule(place(gpu_milli=gpus * 1000))
    rows, best = placed_scores(result)
    assert rows == score_records(result)
    chosen = [v.score for v in result.verdicts if v.cluster == result.cluster]
    assert best == (chosen[0] if chosen else None)
    assert (best is None) == (result.cluster is None)


def test_beyond_the_limit_the_best_fitting_clusters_are_kept_best_first() -> None:
    frees = [i % 9 for i in range(100)]
    result = Scheduler(_fleet(frees)).schedule(place(gpu_milli=2000))
    stored = expand(score_records(result))
    assert len(stored) == 20
    assert all(s["feasible"] for s in stored)
    assert stored[0]["cluster"] == result.cluster
    totals = [s["score"] for s in stored]
    assert totals == sorted(totals, reverse=True)
    everything = {s.cluster: s.model_dump(mode="json") for s in result.scores}
    best = sorted((s for s in everything.values() if s["feasible"]),
                  key=lambda s: -s["score"])[:20]
    assert [s["score"] for s in best] == totals
    assert all(everything[s["cluster"]] == s for s in stored)


def test_beyond_the_limit_a_task_that_fits_nowhere_keeps_twenty_rejections() -> None:
    result = Scheduler(_fleet([0] * 30)).schedule(place(gpu_milli=1000))
    stored = expand(score_records(result))
    assert result.cluster is None
    assert [s["cluster"] for s in stored] == [f"c{i:03d}" for i in range(20)]
    assert all(not s["feasible"] and s["reason"] for s in stored)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=21, max_size=60), st.integers(1, 4))
def test_beyond_the_limit_the_kept_rows_are_the_scheduler_verdicts_best_first_ties_in_order(
        frees: list[int], gpus: int) -> None:
    """Many equal totals (clusters alike): the stored rows are exactly the best feasible
    verdicts by score, equal scores in the clusters' order, then rejections, 20 in all."""
    result = Scheduler(_fleet(frees)).schedule(place(gpu_milli=gpus * 1000))
    everything = [s.model_dump(mode="json") for s in result.scores]
    feasible = sorted((s for s in everything if s["feasible"]), key=lambda s: -s["score"])
    expected = (feasible + [s for s in everything if not s["feasible"]])[:20]
    assert expand(score_records(result)) == expected


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=1, max_size=40), st.integers(1, 4))
def test_the_stored_text_reads_back_to_the_same_verdicts_and_names_each_plugin_once(
        frees: list[int], gpus: int) -> None:
    """What the store writes (the JSON text) and reads back expands to the same rows, and
    the plugin names are written once, not once per cluster."""
    result = Scheduler(_fleet(frees)).schedule(place(gpu_milli=gpus * 1000))
    stored = score_records(result)
    text = dumps(stored)
    assert expand(json.loads(text)) == expand(stored)
    assert frozen(json.loads(text)) == stored   # a task loaded at start keeps the same form
    for plugin in result.table.plugins:
        assert text.count(f'"{plugin}"') == 1


def test_rows_stored_before_the_compact_form_are_read_as_they_are() -> None:
    old = [{"cluster": "east", "feasible": True, "score": 12.5, "reason": None,
            "plugin_scores": {"Headroom": 12.5}},
           {"cluster": "west", "feasible": False, "score": None, "reason": "cordoned",
            "plugin_scores": {}}]
    assert expand(json.loads(json.dumps(old))) == old
    assert expand([]) == []


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=21, max_size=60),
       st.lists(st.integers(1, 4), min_size=2, max_size=8))
def test_rows_read_after_later_decisions_are_the_rows_the_decision_made(
        frees: list[int], gpus: list[int]) -> None:
    """The same decisions on two like fleets, each reserved before the next is made: read
    at once on one, read only after all of them on the other (through the journals of the
    rows the later decisions changed). Each stores the same rows, and its chosen cluster's
    total, either way."""
    def decide(read_at_once: bool) -> list[tuple[tuple[object, ...], float | None]]:
        scheduler = Scheduler(_fleet(frees))
        made: list[PlacementResult] = []
        out: list[tuple[tuple[object, ...], float | None]] = []
        for k, count in enumerate(gpus):
            request = place(f"t{k}", gpu_milli=count * 1000)
            result = scheduler.schedule(request)
            made.append(result)
            if read_at_once:
                out.append(placed_scores(result))
            if result.cluster is not None:
                assert scheduler.reserve(request, result).ok
        return out if read_at_once else [placed_scores(r) for r in made]

    at_once, later = decide(True), decide(False)
    assert later == at_once


def _containers(rows: tuple[object, ...]) -> Iterator[object]:
    yield rows
    for part in rows:
        if isinstance(part, tuple):
            yield from _containers(part)


def test_rows_kept_in_memory_leave_the_collectors_view() -> None:
    """An active task keeps its rows for its whole life: a collection lets go of a tuple
    whose parts it let go of before, so after as many collections as the form is deep
    (three: the scores, the rows, the whole) no collection walks them again, whether a
    decision made them or they were read back from the store at start. (Lists it never
    lets go of.)"""
    frees = [i % 9 for i in range(30)]
    result = Scheduler(_fleet(frees)).schedule(place(gpu_milli=1000))
    made = score_records(result)
    loaded = frozen(json.loads(dumps(made)))
    rejected = score_records(Scheduler(_fleet([0, 0])).schedule(place(gpu_milli=1000)))
    for _ in range(3):
        gc.collect()
    for rows in (made, loaded, rejected):
        assert len(rows) > 1
        assert not any(gc.is_tracked(part) for part in _containers(rows))
