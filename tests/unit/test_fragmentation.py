"""FGD's fragmentation measure and gradient on nodes small enough to check by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fuyao.errors import InvalidInput
from fuyao.fragmentation import BALANCE_FACTOR, Shape, ShapeMix, pinned_shares
from fuyao.inventory import NodeInfo
from fuyao.nodebuild import build_node
from fuyao.nodescheduler import LocalScheduler, Policy
from fuyao.selector import parse_selector
from fuyao.spec import TaskRequests

HALF = ShapeMix([Shape(1000, 1024, 500)])            # every task: half a card
CARD = ShapeMix([Shape(1000, 1024, 1000)])           # every task: one whole card
PAIR = ShapeMix([Shape(1000, 1024, 1000, cards=2)])  # every task: two whole cards


@pytest.mark.parametrize(("mix", "cpu", "frees", "want"), [
    (HALF, 8000, (1000, 300), 300),      # the 300 left on a card cannot take a half
    (HALF, 8000, (1000, 600), 0),        # both cards can
    (CARD, 8000, (1000, 300), 300),      # a whole-card task uses the free card only
    (PAIR, 8000, (1000, 300), 1300),     # a two-card task fits nowhere: all of it is stranded
    (HALF, 500, (1000, 1000), 2000),     # not enough cpu for the shape: every free GPU stranded
    (HALF, 8000, (), 0),                 # no GPUs, nothing to strand
], ids=["share-leftover", "share-fits", "card-partial", "pair-short", "cpu-starved", "cpu-node"])
def test_fragment_is_the_free_gpu_the_shapes_cannot_use(
        mix: ShapeMix, cpu: int, frees: tuple[int, ...], want: int) -> None:
    assert mix.fragment(cpu, 1 << 20, frees) == want


def test_mix_weights_shapes_by_popularity() -> None:
    mix = ShapeMix([Shape(1000, 1024, 500, weight=3), Shape(1000, 1024, 1000, cards=2)])
    # half-card tasks (p=0.75) strand the 300; two-card tasks (p=0.25) strand all 1300
    assert mix.fragment(8000, 1 << 20, (1000, 300)) == pytest.approx(0.75 * 300 + 0.25 * 1300)


def test_gradient_puts_a_half_on_the_whole_card_not_the_leftover() -> None:
    # On (1000, 600): on the 600 card it leaves 100 nobody can use (+100); on the whole card
    # it leaves (500, 600), both usable (+0). Best-fit would take the fuller 600 card.
    delta, taken = HALF.best(8000, 1 << 20, (1000, 600), (True, True), 1000, 1024, 500) or (0, ())
    assert (delta, taken) == (0, (0,))


def test_gradient_refuses_what_does_not_fit() -> None:
    assert HALF.best(500, 1 << 20, (1000,), (True,), 1000, 1024, 500) is None     # cpu
    assert HALF.best(8000, 1 << 20, (400,), (True,), 1000, 1024, 500) is None     # share
    assert HALF.best(8000, 1 << 20, (1000,), (False,), 1000, 1024, 500) is None   # memory
    assert CARD.best(8000, 1 << 20, (1000, 500), (True, True), 1000, 1024, 2000) is None


def test_mix_from_requests_groups_gpu_tasks_and_drops_cpu_only() -> None:
    reqs = [TaskRequests(cpu_milli=c, memory_mib=1024, gpu_milli=g, gpu_memory_mib=0,
                         replicas=1)
            for c, g in [(1000, 500), (3000, 500), (2000, 500), (4000, 0), (8000, 2000)]]
    mix = ShapeMix.from_requests(reqs)
    assert [(s.cards, s.gpu_milli, s.cpu_milli, round(s.weight, 2)) for s in mix.shapes] == [
        (1, 500, 2000, 0.43), (2, 1000, 8000, 0.57)]     # weighted by GPU asked: 1500 : 2000


@pytest.mark.parametrize("shape", [
    lambda: Shape(1000, 1024, 0), lambda: Shape(1000, 1024, 500, cards=2),
    lambda: Shape(-1, 1024, 500)], ids=["no-gpu", "shared-pair", "negative"])
def test_bad_shapes_are_refused(shape: object) -> None:
    with pytest.raises(InvalidInput):
        shape()  # type: ignore[operator]


def test_empty_mix_is_refused() -> None:
    with pytest.raises(InvalidInput, match="at least one GPU shape"):
        ShapeMix([])


def node(name: str, free_milli: int) -> NodeInfo:
    """A one-T4 node with ``free_milli`` of its card free."""
    base = build_node(name, {"nvidia.com/gpu.product": "T4"},
                      {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "1"})
    return replace(base, devices=tuple(replace(d, free_milli=free_milli) for d in base.devices))


def test_fgd_member_keeps_the_whole_card_whole_where_best_fit_strands_a_leftover() -> None:
    nodes = [node("a", 600), node("b", 1000)]   # a: 600 free, b: a whole free card
    half = TaskRequests(cpu_milli=1000, memory_mib=1024, gpu_milli=500, gpu_memory_mib=0,
                        replicas=1)
    fit = LocalScheduler(nodes, Policy.BEST_FIT, HALF).schedule(half, parse_selector(""))
    fgd = LocalScheduler(nodes, Policy.FGD, HALF).schedule(half, parse_selector(""))
    assert isinstance(fit, tuple) and isinstance(fgd, tuple)
    assert [b.node for b in fit] == ["a"]       # fullest card: leaves 100 stranded
    assert [b.node for b in fgd] == ["b"]       # leaves 600 and 500, both usable


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=8),
       st.sampled_from([100, 250, 500, 700, 1000, 2000]))
def test_fragment_never_exceeds_the_free_gpu_and_the_gradient_matches_it(
        frees: list[int], want: int) -> None:
    mix = ShapeMix([Shape(1000, 1024, 300), Shape(2000, 2048, 1000, weight=2),
                    Shape(4000, 4096, 1000, cards=2)])
    free = sum(frees)
    assert 0 <= mix.fragment(8000, 1 << 20, frees) <= free
    found = mix.best(8000, 1 << 20, frees, [True] * len(frees), 1000, 1024, want)
    if found is None:
        return
    delta, taken = found
    after = list(frees)
    for i in taken:
        after[i] -= min(want, 1000)
    assert delta == pytest.approx(mix.cost(7000, (1 << 20) - 1024, after)
                                  - mix.cost(8000, 1 << 20, frees))


def test_cost_counts_whole_cards_the_cpu_cannot_feed_at_the_starved_weight() -> None:
    # one-card tasks need 4 cores; 6 cores feed 1.5 of the 4 free cards: 2.5 cards starved,
    # and the cpu balance (4 cores a GPU, the mix's) serves 1.5 of the 4 free GPUs too
    mix = ShapeMix([Shape(4000, 1024, 1000)], starved_weight=0.5)
    assert mix.cpu_per_gpu == 4000
    assert mix.fragment(6000, 1 << 20, (1000,) * 4) == 0            # the paper's measure
    assert mix.cost(6000, 1 << 20, (1000,) * 4) == pytest.approx(
        0.5 * (2.5 * 1000 + BALANCE_FACTOR * 2.5 * 1000))
    assert mix.cost(16000, 1 << 20, (1000,) * 4) == 0               # cpu for all four


def test_cpu_balance_counts_partly_used_cards_the_cpu_cannot_serve() -> None:
    # shares of half a card asking 2 cores (4 a GPU) and one-card tasks asking 8, equal GPU
    # demand: 6 cores a GPU. 3 cores serve 0.5 of the 1.5 GPU free; the one-card shape does
    # not fit (the paper counts that) and no whole card is starved, so only the balance sees
    # the 1,000 milli unserved; 9 cores serve all of it.
    mix = ShapeMix([Shape(2000, 1024, 500), Shape(8000, 1024, 1000)], starved_weight=0.5)
    assert mix.cpu_per_gpu == pytest.approx(6000)
    frees = (500, 1000)
    assert mix.cost(3000, 1 << 20, frees) - mix.fragment(3000, 1 << 20, frees) == \
        pytest.approx(0.5 * BALANCE_FACTOR * 1000)
    assert mix.cost(9000, 1 << 20, frees) == mix.fragment(9000, 1 << 20, frees)


def test_cpu_balance_draws_a_cpu_light_share_to_a_node_poor_in_cpu() -> None:
    # a: one free card with 2 cores (poor), b: one free card with 20 cores (rich); a share
    # asking 1 core serves a's GPU better than b's, where cpu is plentiful anyway
    mix = ShapeMix([Shape(1000, 1024, 500), Shape(8000, 1024, 1000)], starved_weight=0.5)
    light = (1000, 1024, 500)
    on_a = mix.best(2000, 1 << 20, (1000,), (True,), *light)
    on_b = mix.best(20000, 1 << 20, (1000,), (True,), *light)
    assert on_a is not None and on_b is not None
    assert on_a[0] < on_b[0]
    paper = ShapeMix(mix.shapes, starved_weight=0.0)
    assert paper.cost(2000, 1 << 20, (1000,)) == paper.fragment(2000, 1 << 20, (1000,))
    paper = ShapeMix([Shape(4000, 1024, 1000)], starved_weight=0.0)
    assert paper.cost(6000, 1 << 20, (1000,) * 4) == 0


def test_gradient_sends_a_cpu_heavy_card_task_where_cpu_is_plentiful() -> None:
    # a: 4 cards, 20 cores (5 a card, what the typical task needs); b: 4 cards, 64 cores.
    # The paper's gradient sees no difference (both keep 3 usable cards); the starved term
    # sends the 12-core task to b, where it leaves the cpu a's cards need.
    mix = ShapeMix([Shape(5000, 1024, 1000)], starved_weight=0.5)
    heavy = (12000, 1024, 1000)
    on_a = mix.best(20000, 1 << 20, (1000,) * 4, (True,) * 4, *heavy)
    on_b = mix.best(64000, 1 << 20, (1000,) * 4, (True,) * 4, *heavy)
    assert on_a is not None and on_b is not None
    assert on_b[0] < on_a[0]
    paper = ShapeMix([Shape(5000, 1024, 1000)], starved_weight=0.0)
    assert paper.best(20000, 1 << 20, (1000,) * 4, (True,) * 4, *heavy) == \
        paper.best(64000, 1 << 20, (1000,) * 4, (True,) * 4, *heavy)


@pytest.mark.parametrize("weight", [-1.0, float("nan"), float("inf"), 10.5])
def test_starved_weight_must_be_a_bounded_number(weight: float) -> None:
    with pytest.raises(InvalidInput, match="starved weight"):
        ShapeMix([Shape(1000, 1024, 500)], starved_weight=weight)


# -- the starved term and model-constrained tasks ------------------------------------------

CPU_HUNGRY = [Shape(5000, 1024, 1000), Shape(2000, 1024, 500)]


@pytest.mark.parametrize(("spared", "models", "want"), [
    ((), {"T4"}, 0.5),                  # nothing spared: the term everywhere
    ({"T4"}, {"G2"}, 0.5),              # a model no constrained task names keeps it
    ({"T4"}, {"T4"}, 0.0),              # a named model is spared
    ({"T4"}, {"G2", "T4"}, 0.0),        # a node with any named model is spared
    ({"T4"}, set(), 0.5),               # a node without GPUs (or models unknown)
], ids=["none-spared", "other-model", "named", "mixed-node", "no-models"])
def test_starved_weight_is_off_on_models_constrained_tasks_name(
        spared: set[str], models: set[str], want: float) -> None:
    assert ShapeMix(CPU_HUNGRY, 0.5, spared).starved_weight_on(models) == want


def unfed(mix: ShapeMix, cpu: int, frees: tuple[int, ...] | list[int]) -> float:
    """The free milli-GPU a node's cpu cannot serve at the mix's cpu per GPU."""
    return max(0.0, sum(frees) - cpu * 1000 / mix.cpu_per_gpu)


def test_a_spared_model_is_judged_by_the_papers_gradient_and_the_cpu_balance() -> None:
    # 20 cores for 4 cards of 5-core tasks: a 12-core task starves 2.4 cards (see above);
    # on a spared model only the cpu balance (4.5 cores a GPU here) counts beside the paper's
    mix = ShapeMix(CPU_HUNGRY, 0.5, {"T4"})
    paper = ShapeMix(CPU_HUNGRY, 0.0)
    args = (20000, 1 << 20, (1000,) * 4, (True,) * 4, 12000, 1024, 1000)
    on_t4, paper_best = mix.best(*args, models={"T4"}), paper.best(*args)
    assert on_t4 is not None and paper_best is not None
    balance = 0.5 * BALANCE_FACTOR * (unfed(mix, 8000, (1000,) * 3)
                                      - unfed(mix, 20000, (1000,) * 4))
    assert on_t4[1] == paper_best[1]
    assert on_t4[0] == pytest.approx(paper_best[0] + balance)
    on_g2 = mix.best(*args, models={"G2"})
    assert on_g2 is not None
    assert on_g2[0] > on_t4[0]      # the whole-card term still counts on an unnamed model


node_states = st.tuples(st.integers(0, 64000), st.integers(0, 1 << 18),
                        st.lists(st.sampled_from([0, 200, 500, 800, 1000]), max_size=8))
requests = st.tuples(st.integers(0, 16000), st.integers(0, 1 << 16),
                     st.sampled_from([250, 500, 1000, 2000, 4000]))
weights = st.sampled_from([0.0, 0.25, 0.5, 1.0, 10.0])
model_sets = st.sets(st.sampled_from(["G2", "T4", "V100"]), max_size=2)


@given(node_states, requests, weights, model_sets, model_sets)
def test_the_term_is_never_negative_and_spares_exactly_the_named_models(
        state: tuple[int, int, list[int]], req: tuple[int, int, int], weight: float,
        spared: set[str], models: set[str]) -> None:
    cpu, memory, frees = state
    mix = ShapeMix(CPU_HUNGRY, weight, spared)
    unspared = ShapeMix(CPU_HUNGRY, weight)
    paper = ShapeMix(CPU_HUNGRY, 0.0)
    assert mix.cost(cpu, memory, frees, models) >= mix.fragment(cpu, memory, frees)
    assert paper.cost(cpu, memory, frees, models) == paper.fragment(cpu, memory, frees)
    if spared & models:     # named: the paper's, plus the cpu balance (never spared)
        balance = weight * BALANCE_FACTOR * unfed(mix, cpu, frees)
        assert mix.cost(cpu, memory, frees, models) == pytest.approx(
            paper.cost(cpu, memory, frees) + balance)
        return
    assert mix.cost(cpu, memory, frees, models) == unspared.cost(cpu, memory, frees)
    eligible = [True] * len(frees)
    assert mix.best(cpu, memory, frees, eligible, *req, models) == \
        unspared.best(cpu, memory, frees, eligible, *req)


# -- the GPU pinned tasks need, held against tasks that could run elsewhere -------------------

HELD = ShapeMix([Shape(1000, 1024, 1000)], pinned_share={"T4": 0.25})


@pytest.mark.parametrize(("model", "free_model", "free_all", "want"), [
    ("G2", 1000, 8000, 0.0),        # nothing pinned to G2
    ("T4", 4000, 8000, 0.0),        # 4 of 8 free cards are T4, 2 are held: room to spare
    ("T4", 2500, 8000, 250.0),      # after it 1,500 T4 left, 1,750 held: 250 short
    ("T4", 1000, 8000, 750.0),      # already short: the whole replica less its own share
    ("T4", 1000, 1000, 0.0),        # 1,000 of 1,000 free, 250 held: the last card is left
], ids=["unpinned-model", "plenty", "crossing", "short", "model-is-all-free"])
def test_scarcity_is_the_growth_of_the_shortfall_below_the_held_share(
        model: str, free_model: int, free_all: int, want: float) -> None:
    assert HELD.scarcity(model, free_model, free_all, 1000) == pytest.approx(want)


def card_task(gpu: int, replicas: int = 1) -> TaskRequests:
    return TaskRequests(cpu_milli=1000, memory_mib=1024, gpu_milli=gpu, gpu_memory_mib=0,
                        replicas=replicas)


@pytest.mark.parametrize(("tasks", "want"), [
    ([], {}),
    ([(card_task(1000), frozenset())], {}),                               # nothing pinned
    ([(card_task(1000), frozenset({"T4"})), (card_task(3000), frozenset())], {"T4": 0.25}),
    ([(card_task(500), frozenset({"P100", "V100"})), (card_task(500), frozenset())],
     {"P100": 0.25, "V100": 0.25}),                                       # split evenly
    ([(card_task(1000, replicas=3), frozenset({"T4"})), (card_task(1000), frozenset()),
      (card_task(0), frozenset({"G2"}))], {"T4": 0.75}),                 # cpu-only: no GPU
], ids=["empty", "unpinned", "one-model", "alternatives", "replicas-and-cpu-only"])
def test_pinned_shares_are_each_models_part_of_the_gpu_demand(
        tasks: list[tuple[TaskRequests, frozenset[str]]], want: dict[str, float]) -> None:
    got = pinned_shares(tasks)
    assert got.keys() == want.keys()
    assert all(got[m] == pytest.approx(v) for m, v in want.items())


@pytest.mark.parametrize("share", [-0.1, 1.5, float("nan")])
def test_a_pinned_share_must_be_a_fraction(share: float) -> None:
    with pytest.raises(InvalidInput, match="pinned shares"):
        ShapeMix([Shape(1000, 1024, 500)], pinned_share={"T4": share})


@given(st.floats(0.0, 1.0), st.integers(0, 64_000), st.integers(0, 64_000),
       st.sampled_from([250, 500, 1000, 2000, 8000]))
def test_scarcity_never_costs_more_than_the_replica_and_is_zero_with_room(
        share: float, free_model: int, other_free: int, gpu: int) -> None:
    mix = ShapeMix([Shape(1000, 1024, 1000)], pinned_share={"T4": share})
    free_all = free_model + other_free
    cost = mix.scarcity("T4", free_model, free_all, gpu)
    assert -1e-6 <= cost <= gpu * (1 - share) + 1e-6
    if free_model - gpu >= share * (free_all - gpu):      # still above the hold after it
        assert cost == 0
    assert mix.scarcity("G2", free_model, free_all, gpu) == 0
