"""The trace-quality bench replays a trace through the real hub and members and measures it.

A tiny node list and pod list are written per test; one test reads the shared Alibaba trace
when it is there. Figures are checked for what must hold (a fraction, monotone, K=1 is the
single pool, the hub's view agrees with the members), never for timing.
"""

from __future__ import annotations

import json
import sys
from itertools import pairwise
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import trace_quality  # noqa: E402
from trace_quality import TRACES  # noqa: E402
from trace_replay import (  # noqa: E402
    ClusterChoice,
    Federation,
    Outcome,
    SinglePool,
    Split,
    arrival_order,
    check_constraints,
    gpu_constraint,
    gpu_milli_of,
    load_nodes,
    load_tasks,
    replay,
    split_nodes,
)

from fuyao.errors import InvalidInput  # noqa: E402

SHARED = TRACES / "alibaba-gpu-v2023" / "openb_node_list_all_node.csv"

# (name, cpu_milli, memory_mib, gpus, model), four nodes of each
KINDS = [("cpu", 32000, 131072, 0, ""), ("t4", 32000, 131072, 2, "T4"),
         ("g2", 96000, 393216, 8, "G2"), ("v16", 32000, 131072, 4, "V100M16"),
         ("v32", 32000, 131072, 4, "V100M32")]
NODES = "sn,cpu_milli,memory_mib,gpu,model\n" + "".join(
    f"n-{kind}-{i},{cpu},{mem},{gpus},{model}\n" for kind, cpu, mem, gpus, model in KINDS
    for i in range(4))
GPUS = 4 * (2 + 8 + 4 + 4)
# (num_gpu, gpu_milli, gpu_spec): shares, whole cards, a gang of cards, CPU-only, constraints
SHAPES = [(1, 500, ""), (1, 250, ""), (1, 1000, ""), (0, 0, ""), (1, 460, ""), (2, 1000, ""),
          (1, 1000, "V100M32"), (1, 750, ""), (1, 300, "T4"), (1, 1000, "V100M16|V100M32")]


def pods_csv(count: int = 100) -> str:
    lines = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec"]
    for i in range(count):
        num_gpu, milli, spec = SHAPES[i % len(SHAPES)]
        lines.append(f"pod-{i:03d},{2000 + 1000 * (i % 3)},{4096 * (1 + i % 4)},{num_gpu},"
                     f"{milli},{spec}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    nodes, pods, fgd = tmp_path / "nodes.csv", tmp_path / "pods.csv", tmp_path / "fgd.csv"
    nodes.write_text(NODES)
    pods.write_text(pods_csv())
    fgd.write_text("workload,sc_policy,tune,seed,total_gpus,50,100\n"
                   "pods,05-BestFit,1.3,42,28,50.0,90.0\n"
                   "pods,05-BestFit,1.3,43,28,50.0,92.0\n"
                   "pods,06-FGD,1.3,42,28,50.0,95.0\n"
                   "other,06-FGD,1.3,42,28,10.0,10.0\n")
    return {"nodes": nodes, "pods": pods, "fgd": fgd}


def test_allocation_is_a_percentage_that_grows_with_arrived_work(files: dict[str, Path]) -> None:
    nodes = load_nodes(str(files["nodes"]))
    order = arrival_order(load_tasks(files["pods"]), 42, gpu_milli_of(nodes))
    fed = Federation(split_nodes(nodes, 2, Split.ROUND_ROBIN), choice=ClusterChoice.DEFAULT,
                     headroom=0.0)
    result = replay(fed, order, until=100)
    values = [result.curve[p] for p in sorted(result.curve)]
    assert all(0.0 <= v <= 100.0 for v in values)
    assert all(b >= a - 1e-9 for a, b in pairwise(values))  # monotone
    at_100 = result.at(100)
    assert at_100 is not None and 50.0 < at_100 <= 100.0
    assert result.arrived_pct >= 100.0
    assert result.outcomes["bound"] > 0 and result.outcomes["reserve_failed"] == 0


@pytest.mark.parametrize("seed", [42, 43])
def test_the_member_binds_what_the_hub_placed_on_the_model_it_reserved(
        files: dict[str, Path], seed: int) -> None:
    """The hub pins the model of its fit in what it sends, so the member never refuses a
    placed task and never binds another model than the hub reserved and checked headroom on.
    (Before the pin, K=1 behind the hub equalled the member alone, because the member
    ignored the hub's model choice; ~94% of GPU tasks then landed on another model.)"""
    nodes = load_nodes(str(files["nodes"]))
    order = arrival_order(load_tasks(files["pods"]), seed, gpu_milli_of(nodes))
    fed = Federation([nodes], choice=ClusterChoice.DEFAULT, headroom=0.0)
    result = replay(fed, order)
    pool = replay(SinglePool(nodes), order)
    assert result.outcomes.get("member_unfit", 0) == 0
    assert fed.counters()["member_chose_other_model"] == 0
    assert result.outcomes["bound"] > 0 and pool.outcomes["bound"] > 0


def test_hub_view_ends_equal_to_the_members_with_no_reservation_left(
        files: dict[str, Path]) -> None:
    nodes = load_nodes(str(files["nodes"]))
    order = arrival_order(load_tasks(files["pods"]), 7, gpu_milli_of(nodes))
    fed = Federation(split_nodes(nodes, 3, Split.CONTIGUOUS), choice=ClusterChoice.RANDOM,
                     headroom=0.0, seed=7)
    replay(fed, order)
    assert fed.hub_allocated_gpu_milli() == fed.allocated_gpu_milli > 0
    assert all(fed.fleet.reservation(t.name) is None for t in order)


def test_random_cluster_choice_is_reproducible_per_seed(files: dict[str, Path]) -> None:
    nodes = load_nodes(str(files["nodes"]))
    order = arrival_order(load_tasks(files["pods"]), 42, gpu_milli_of(nodes))
    members = split_nodes(nodes, 4, Split.ROUND_ROBIN)

    def run(seed: int) -> dict[int, float]:
        fed = Federation(members, choice=ClusterChoice.RANDOM, headroom=0.0, seed=seed)
        return replay(fed, order).curve

    assert run(1) == run(1)


def test_headroom_rejects_work_the_reserve_would_take(files: dict[str, Path]) -> None:
    nodes = load_nodes(str(files["nodes"]))
    order = arrival_order(load_tasks(files["pods"]), 42, gpu_milli_of(nodes))
    members = split_nodes(nodes, 2, Split.ROUND_ROBIN)
    open_ = replay(Federation(members, choice=ClusterChoice.DEFAULT, headroom=0.0), order)
    kept = replay(Federation(members, choice=ClusterChoice.DEFAULT, headroom=0.5), order)
    assert kept.outcomes["no_cluster"] > open_.outcomes["no_cluster"]


@pytest.mark.parametrize(("how", "want"), [
    (Split.ROUND_ROBIN, [["a", "d", "g"], ["b", "e"], ["c", "f"]]),
    (Split.CONTIGUOUS, [["a", "b", "c"], ["d", "e"], ["f", "g"]]),
], ids=["round-robin", "contiguous"])
def test_split_gives_every_node_to_one_cluster(how: Split, want: list[list[str]]) -> None:
    from fuyao.inventory import NodeInfo

    nodes = [NodeInfo(name) for name in "abcdefg"]
    assert [[n.name for n in part] for part in split_nodes(nodes, 3, how)] == want


@pytest.mark.parametrize("clusters", [0, 8])
def test_split_refuses_more_clusters_than_nodes_or_none(clusters: int) -> None:
    from fuyao.inventory import NodeInfo

    with pytest.raises(InvalidInput, match=f"clusters: {clusters}"):
        split_nodes([NodeInfo(n) for n in "abcdefg"], clusters, Split.ROUND_ROBIN)


@pytest.mark.parametrize(("spec", "model", "selector"), [
    ("", None, None),
    ("G2", "G2", None),
    ("V100M32", "V100", "fuyao.io/gpu-memory in (32Gi)"),
    ("V100M16|V100M32", "V100", "fuyao.io/gpu-memory in (16Gi, 32Gi)"),
    ("P100|V100M16", "P100|V100", None),
], ids=["none", "one-model", "memory-variant", "both-variants", "mixed"])
def test_gpu_spec_becomes_model_and_memory(spec: str, model: str | None,
                                           selector: str | None) -> None:
    assert gpu_constraint(spec) == (model, selector)


def test_gpu_spec_tasks_land_only_where_the_trace_allows(files: dict[str, Path]) -> None:
    nodes = load_nodes(str(files["nodes"]))
    raw = {line.split(",")[0]: line.split(",")[4] for line in NODES.splitlines()[1:]}
    tasks = load_tasks(files["pods"])
    assert check_constraints(tasks, nodes, raw) == 0
    v32 = next(t for t in tasks if t.gpu_spec == "V100M32")
    fed = Federation([nodes], choice=ClusterChoice.DEFAULT, headroom=0.0)
    assert fed.submit(v32) is Outcome.BOUND
    busy = [n.name for n in fed.members["member-0"].nodes() if any(
        d.free_milli < 1000 for d in n.devices)]
    assert len(busy) == 1 and busy[0].startswith("n-v32-")


def test_arrival_order_shuffles_the_trace_then_adds_clones_up_to_the_target(
        files: dict[str, Path]) -> None:
    tasks = load_tasks(files["pods"])
    capacity = GPUS * 1000
    order = arrival_order(tasks, 42, capacity, tune=1.3)
    assert order == arrival_order(tasks, 42, capacity, tune=1.3)
    assert order != arrival_order(tasks, 43, capacity, tune=1.3)
    assert sorted(t.name for t in order[:len(tasks)]) == sorted(t.name for t in tasks)
    assert all("-tuned-" in t.name for t in order[len(tasks):])
    assert sum(t.gpu_milli for t in order) <= 1.3 * capacity
    assert sum(t.gpu_milli for t in tasks) < 1.3 * capacity - 2000 <= sum(
        t.gpu_milli for t in order)                                  # the trace alone is short
    fewer = arrival_order(tasks, 42, capacity, tune=0.2)
    assert sum(t.gpu_milli for t in fewer) <= 0.2 * capacity
    assert {t.name for t in fewer} < {t.name for t in tasks}


def test_pod_list_with_a_shared_multi_gpu_pod_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "pods.csv"
    bad.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np-0,1000,1024,2,500\n")
    with pytest.raises(InvalidInput, match=r"row 0 \(line 2\): 2 GPUs of 500m"):
        load_tasks(bad)


def test_cli_prints_fgd_baselines_and_each_k_against_them(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code = trace_quality.main([
        "--nodes", str(files["nodes"]), "--pods", str(files["pods"]), "--fgd", str(files["fgd"]),
        "--clusters", "1,2", "--seeds", "42-43", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gpus"] == GPUS and out["seeds"] == [42, 43]
    assert out["fgd_single_pool"] == {"BestFit": {"50": 50.0, "100": 91.0},
                                      "FGD": {"50": 50.0, "100": 95.0}}
    runs = {(r["clusters"], r["choice"]): r for r in out["runs"]}
    assert set(runs) == {(1, "-"), (2, "default"), (2, "random")}
    for r in runs.values():
        assert len(r["alloc_100_by_seed"]) == 2
        assert r["vs_BestFit"] == pytest.approx(r["alloc_pct"]["100"] / 91.0, abs=1e-3)
        assert r["vs_FGD"] == pytest.approx(r["alloc_pct"]["100"] / 95.0, abs=1e-3)


def test_cli_reports_a_bad_node_list_and_exits_2(
        files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code = trace_quality.main(["--nodes", str(files["nodes"]) + ":50:2",
                               "--pods", str(files["pods"]), "--fgd", str(files["fgd"])])
    assert code == 2
    assert "rows 50:52 out of range" in capsys.readouterr().err


@pytest.mark.skipif(not SHARED.exists(), reason="the shared Alibaba trace is not here")
def test_shared_trace_nodes_normalize_like_the_readme_says() -> None:
    nodes = load_nodes(str(SHARED))
    assert len(nodes) == 1523 and gpu_milli_of(nodes) == 6212 * 1000
    v32 = {(d.model, d.memory_mib) for n in nodes
           if n.labels.get("nvidia.com/gpu.product") == "V100M32" for d in n.devices}
    assert v32 == {("V100", 32 * 1024)}
