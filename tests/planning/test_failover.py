"""N-1: a verdict the real scheduler gives on a copy, flipping when one node is added."""

from __future__ import annotations

from fuyao.spec import ClusterState, TaskSpec
from hub.fleet import FleetView
from hub.placement import DEFAULT_PROFILE
from hub.planning.failover import RULE, Running, n_minus_one
from hub.planning.fit import count_fit
from tests.placement.builders import fleet_of, node, place

EIGHT = [1000] * 8
FOUR_USED = [1000] * 4 + [0] * 4


def train(task_id: str, gpus: int = 8, priority: int = 0) -> Running:
    """A task running on H100s (its cards already count as used in the node's report)."""
    return Running(place(task_id, gpu_milli=gpus * 1000, priority=priority), "H100",
                   (-priority, int(task_id[-1])))


def fleet(extra_y_node: bool = False) -> FleetView:
    """x runs an 8-card task on its only node; y has a node with only 4 cards free."""
    y = [node("y1", "H100", 8, free_milli=FOUR_USED)]
    if extra_y_node:
        y.append(node("y2", "H100", 8, free_milli=EIGHT))
    return fleet_of({"x": [node("x1", "H100", 8, free_milli=[0] * 8)], "y": y},
                    headroom=0.1)


def test_verdict_flips_when_one_node_is_added() -> None:
    running = {"x": [train("t1")]}
    before = n_minus_one(fleet(), DEFAULT_PROFILE, running)
    assert not before.safe
    lost = before.clusters["x"]
    assert (lost.safe, lost.tasks, lost.unplaced, lost.short) == (False, 1, ["t1"],
                                                                  {"H100": 8.0})
    assert before.clusters["y"].safe           # y runs nothing
    after = n_minus_one(fleet(extra_y_node=True), DEFAULT_PROFILE, running)
    assert after.safe
    assert after.clusters["x"].moved == {"y": 1} and after.clusters["x"].short == {}


def test_failover_may_use_the_headroom_reserve() -> None:
    # y: 16 cards, 4 used, 50% headroom: an ordinary 8-card task does not fit (12 > 8),
    # a failover does.
    f = fleet(extra_y_node=True)
    f.upsert_cluster("y", labels={}, weight=1, headroom=0.5, state=ClusterState.READY)
    ordinary = count_fit(f, DEFAULT_PROFILE, TaskSpec(name="o", gpu=8), limit=10)
    assert ordinary.clusters["y"] == 0
    verdict = n_minus_one(f, DEFAULT_PROFILE, {"x": [train("t1")]})
    assert verdict.clusters["x"].safe and verdict.clusters["x"].moved == {"y": 1}
    assert "headroom" in verdict.rule and verdict.rule == RULE


def test_headroom_needed_and_recommended() -> None:
    running = {"x": [train("t1")]}
    small = n_minus_one(fleet(), DEFAULT_PROFILE, running)
    assert small.clusters["x"].headroom_needed == 1.0      # 8 of y's 8 cards: all of it
    big = n_minus_one(fleet(extra_y_node=True), DEFAULT_PROFILE, running)
    assert big.clusters["x"].headroom_needed == 0.5        # 8 of 16
    assert big.headroom_recommended == {"x": 0.0, "y": 0.5}


def test_higher_priority_tasks_are_re_placed_first() -> None:
    y_half = {"x": [node("x1", "H100", 8, free_milli=[0] * 8)],
              "y": [node("y1", "H100", 8, free_milli=FOUR_USED)]}
    running = {"x": [train("t1", 4, priority=0), train("t2", 4, priority=5)]}
    verdict = n_minus_one(fleet_of(y_half), DEFAULT_PROFILE, running)
    assert verdict.clusters["x"].unplaced == ["t1"]          # t2 went first and took y1


def test_a_scenario_leaves_the_copy_as_it_found_it() -> None:
    # x's loss reserves room on z; y's loss (judged after, on the same copy) must see it free.
    clusters = {"x": [node("x1", "H100", 8, free_milli=[0] * 8)],
                "y": [node("y1", "H100", 8, free_milli=[0] * 8)],
                "z": [node("z1", "H100", 8)]}
    running = {"x": [train("t1")], "y": [train("t2")]}
    verdict = n_minus_one(fleet_of(clusters), DEFAULT_PROFILE, running)
    assert verdict.clusters["x"].safe and verdict.clusters["y"].safe


def test_a_cordoned_cluster_takes_no_failover() -> None:
    f = fleet(extra_y_node=True)
    f.set_cordoned("y", True)
    verdict = n_minus_one(f, DEFAULT_PROFILE, {"x": [train("t1")]})
    assert not verdict.clusters["x"].safe


def test_cpu_only_tasks_report_cores_and_memory_short() -> None:
    f = fleet_of({"x": [node("x1", cpu=8)], "y": [node("y1", cpu=4)]},
                 states={"y": ClusterState.READY})
    running = {"x": [Running(place("c1", cpu=6, memory_gib=2), "none", (0, 1))]}
    verdict = n_minus_one(f, DEFAULT_PROFILE, running)
    assert verdict.clusters["x"].short == {"cpu": 6.0, "memory_gib": 2.0}


def test_headroom_needed_counts_only_nodes_the_tasks_could_use() -> None:
    # y has 64 amd64 cores but x's task wants arm64: no headroom on y can cover it.
    f = fleet_of({"x": [node("x1", cpu=8, labels={"kubernetes.io/arch": "arm64"})],
                  "y": [node("y1", cpu=64)]})
    arm = Running(place("etl", "kubernetes.io/arch = arm64", cpu=4), "none", (0, 1))
    verdict = n_minus_one(f, DEFAULT_PROFILE, {"x": [arm]})
    assert not verdict.clusters["x"].safe and verdict.clusters["x"].headroom_needed == 1.0
    plain = Running(place("etl", cpu=16), "none", (0, 1))
    assert n_minus_one(f, DEFAULT_PROFILE, {"x": [plain]}).clusters["x"].headroom_needed == 0.25
