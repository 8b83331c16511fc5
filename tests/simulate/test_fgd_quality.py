"""The ``fgd`` policy places better than best-fit where the fragmentation choice matters.

A hand-built fleet: node ``a`` (2 whole cards, little cpu) and node ``b`` (8 cards, one of
them half used). A half-card share arrives, then nine one-card tasks. Best-fit puts the
share on ``a`` (the node left fullest by cpu and GPU fraction) and splits a whole card, so
only eight whole cards remain; FGD puts it on ``b``'s half-used card (fragmentation drops)
and all nine fit. Checked as a single pool (the member's choice) and split into two
clusters (the hub's ``Fragmentation`` cluster choice must find ``b``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fuyao.fragmentation import DEFAULT_MIX
from fuyao.inventory import NodeInfo
from fuyao.selector import parse_selector
from fuyao.spec import TaskRequests
from hub.planning.simulate import (
    SimCluster,
    SimTask,
    Split,
    load_nodes,
    policy,
    simulate,
    split_nodes,
)
from hub.planning.simulate.run import workload_mix


@pytest.fixture
def nodes(tmp_path: Path) -> list[NodeInfo]:
    path = tmp_path / "nodes.csv"
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\n"
                    "a,4000,65536,2,G2\nb,64000,262144,8,G2\n")
    a, b = load_nodes(str(path))
    half = replace(b.devices[0], free_milli=500)
    return [a, replace(b, devices=(half, *b.devices[1:]))]


def tasks() -> list[SimTask]:
    anywhere = parse_selector("")
    share = SimTask("share", TaskRequests(1000, 1024, 500, 0, 1), anywhere)
    whole = [SimTask(f"card-{i}", TaskRequests(1000, 1024, 1000, 0, 1), anywhere)
             for i in range(9)]
    return [share, *whole]


def run(clusters: list[SimCluster], name: str) -> dict[str, object]:
    work = tasks()
    return simulate(clusters, work, policy(name), order=work, mix=workload_mix(work))


@pytest.mark.parametrize("name", ["default", "random", "static-weight", "dynamic-weight"])
def test_fgd_single_pool_fits_every_task_where_best_fit_strands_a_card(
        nodes: list[NodeInfo], name: str) -> None:
    pool = [SimCluster("pool", tuple(nodes))]
    fgd, best_fit = run(pool, "fgd"), run(pool, name)
    assert fgd["tasks_unplaced"] == 0
    assert best_fit["tasks_unplaced"] == 1                     # one card task found no card
    assert fgd["gpu_allocated_final_pct"] == 100.0             # 500 + 500 + 9 x 1000 of 10 cards
    assert best_fit["gpu_allocated_final_pct"] == 90.0


def test_fgd_hub_chooses_the_cluster_whose_node_fragments_least(nodes: list[NodeInfo]) -> None:
    split = [SimCluster("with-a", (nodes[0],)), SimCluster("with-b", (nodes[1],))]
    report = run(split, "fgd")
    assert report["tasks_unplaced"] == 0
    assert report["clusters"]["with-b"]["tasks_placed"] == 8    # the share and seven cards
    assert report["member_chose_other_gpu_node"] == 0


def test_fgd_keeps_the_headroom_reserve_on_the_model_it_would_have_chosen(
        tmp_path: Path) -> None:
    # A one-card T4 node looks best to FGD (it fills up), but one card is all of that
    # model's capacity: the 25% reserve forbids it. The G2 node's four cards take three
    # tasks and keep the fourth as the reserve.
    path = tmp_path / "nodes.csv"
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\n"
                    "a,32000,131072,1,T4\nb,32000,131072,4,G2\n")
    cluster = SimCluster("c", tuple(load_nodes(str(path))), headroom=0.25)
    work = [SimTask(f"card-{i}", TaskRequests(1000, 1024, 1000, 0, 1), parse_selector(""))
            for i in range(4)]
    for name in ("fgd", "default"):
        report = simulate([cluster], work, policy(name), order=work, mix=workload_mix(work))
        assert report["tasks_placed"] == 3, name                  # the fourth: the reserve
        assert report["clusters"]["c"]["gpus"] == 5
        assert report["gpu_allocated_final_pct"] == 60.0, name    # three of five cards


def test_the_workload_mix_spares_every_model_a_constrained_task_names() -> None:
    def task(name: str, selector: str) -> SimTask:
        return SimTask(name, TaskRequests(8000, 1024, 1000, 0, 1), parse_selector(selector))

    work = [*tasks(), task("v100", "gpu-model = V100, gpu-memory in (16Gi, 32Gi)"),
            task("p100-or-t4", "gpu-model in (P100, T4)"), task("newer", "gpu-model >= A100")]
    mix = workload_mix(work, starved_weight=0.5)
    assert mix.spared_models == {"V100", "P100", "T4"}      # a range names no model
    assert mix.starved_weight_on({"T4"}) == 0.0
    assert mix.starved_weight_on({"G2"}) == 0.5
    assert workload_mix(tasks(), starved_weight=0.5).spared_models == frozenset()


def test_simulations_use_the_starved_term_and_a_live_member_the_papers_gradient(
        nodes: list[NodeInfo]) -> None:
    assert workload_mix(tasks()).starved_weight == 0.5
    report = run([SimCluster("pool", tuple(nodes))], "fgd")
    assert report["starved_weight"] == 0.5
    assert DEFAULT_MIX.starved_weight == 0.0          # no workload, no constrained models known
    cpu_only = [SimTask("cpu", TaskRequests(1000, 1024, 0, 0, 1), parse_selector(""))]
    assert workload_mix(cpu_only).shapes == DEFAULT_MIX.shapes
    assert workload_mix(cpu_only).starved_weight == 0.5


@pytest.mark.parametrize("clusters", [1, 2], ids=["single-pool", "two-clusters"])
def test_fgd_keeps_t4_cards_for_the_tasks_pinned_to_t4(tmp_path: Path, clusters: int) -> None:
    # Two T4 and two G2 nodes of one card each (split round-robin, a T4 and a G2 per
    # cluster); unpinned and T4-pinned card tasks alternate. Every card fragments the same
    # (ties go to the name: ``a``, a T4, and the first cluster), but half the workload's GPU
    # demand is pinned to T4, so each cluster holds half its free GPU for it: the unpinned
    # tasks take the G2 cards and every pinned task finds a T4.
    path = tmp_path / "nodes.csv"
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
        f"{name},32000,131072,1,{model}\n"
        for name, model in [("a", "T4"), ("b", "T4"), ("c", "G2"), ("d", "G2")]))
    card = TaskRequests(1000, 1024, 1000, 0, 1)
    work = [SimTask(f"{kind}-{i}", card, parse_selector(selector))
            for i in range(2)
            for kind, selector in [("anywhere", ""), ("t4-only", "fuyao.io/gpu-model = T4")]]
    mix = workload_mix(work)
    assert mix.pinned_share == {"T4": 0.5}
    fleet = split_nodes(load_nodes(str(path)), clusters, Split.ROUND_ROBIN)
    report = simulate(fleet, work, policy("fgd"), order=work, mix=mix)
    assert report["tasks_unplaced"] == 0
    assert report["gpu_allocated_final_pct"] == 100.0
    assert report["member_chose_other_gpu_node"] == 0


def test_without_pinned_tasks_the_mix_holds_nothing() -> None:
    assert workload_mix(tasks()).pinned_share == {}
    assert DEFAULT_MIX.pinned_share == {}          # a live member's default: no hold
