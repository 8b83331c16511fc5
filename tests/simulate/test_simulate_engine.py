"""The simulation engine replays tasks through the real hub and members and measures them.

A tiny node list and pod list are written per test; figures are checked for what must hold
(a fraction, monotone, the hub's view agrees with the members, seeds repeat), never timing.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from fuyao.errors import InvalidInput
from fuyao.inventory import NodeInfo
from hub.planning.simulate import (
    Federation,
    Outcome,
    Split,
    arrival_order,
    gpu_constraint,
    gpu_milli_of,
    load_nodes,
    load_pod_list,
    policy,
    replay,
    simulate,
    split_nodes,
    workload_mix,
)
from hub.planning.simulate.workload import check_constraints

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
    lines = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
             "creation_time,deletion_time,scheduled_time"]
    for i in range(count):
        num_gpu, milli, spec = SHAPES[i % len(SHAPES)]
        lines.append(f"pod-{i:03d},{2000 + 1000 * (i % 3)},{4096 * (1 + i % 4)},{num_gpu},"
                     f"{milli},{spec},LS,Running,{10 * i},{10 * i + 25 + i % 7},{10 * i}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text(NODES)
    pods.write_text(pods_csv())
    return {"nodes": nodes, "pods": pods}


def federation(files: dict[str, Path], k: int, how: Split, name: str = "default",
               seed: int = 0, headroom: float = 0.0) -> Federation:
    from dataclasses import replace

    nodes = load_nodes(str(files["nodes"]))
    clusters = [replace(c, headroom=headroom) for c in split_nodes(nodes, k, how)]
    return Federation(clusters, policy(name), workload_mix(load_pod_list(files["pods"])), seed)


@pytest.mark.parametrize("name", ["default", "fgd", "random", "static-weight",
                                  "dynamic-weight"])
def test_allocation_is_a_percentage_that_grows_with_arrived_work(
        files: dict[str, Path], name: str) -> None:
    fed = federation(files, 2, Split.ROUND_ROBIN, name, seed=3)
    order = arrival_order(load_pod_list(files["pods"]), 42, fed.total_gpu_milli)
    result = replay(fed, order, until=100)
    values = [result.curve[p] for p in sorted(result.curve)]
    assert all(0.0 <= v <= 100.0 for v in values)
    assert all(b >= a - 1e-9 for a, b in pairwise(values))  # monotone
    at_100 = result.at(100)
    assert at_100 is not None and 50.0 < at_100 <= 100.0
    assert result.arrived_pct >= 100.0
    assert result.outcomes["bound"] > 0 and result.outcomes["reserve_failed"] == 0
    assert result.outcomes["member_unfit"] == 0     # the hub never places what no node takes


@pytest.mark.parametrize("name", ["default", "fgd"])
@pytest.mark.parametrize("seed", [42, 43])
def test_the_member_binds_what_the_hub_placed_on_the_model_it_reserved(
        files: dict[str, Path], seed: int, name: str) -> None:
    """The hub pins the model of its fit in what it sends, so the member never refuses a
    placed task and never binds another model than the hub reserved and checked headroom on;
    with ``fgd`` the hub's node for a GPU task is the member's too (one fragmentation
    function, one tie-break)."""
    fed = federation(files, 1, Split.ROUND_ROBIN, name)
    result = replay(fed, arrival_order(load_pod_list(files["pods"]), seed,
                                       fed.total_gpu_milli))
    assert result.outcomes["member_unfit"] == 0
    assert fed.counters()["member_chose_other_model"] == 0
    if name == "fgd":
        assert fed.counters()["member_chose_other_gpu_node"] == 0


@pytest.mark.parametrize("name", ["random", "fgd", "static-weight"])
def test_hub_view_ends_equal_to_the_members_with_no_reservation_left(
        files: dict[str, Path], name: str) -> None:
    fed = federation(files, 3, Split.CONTIGUOUS, name, seed=7)
    order = arrival_order(load_pod_list(files["pods"]), 7, fed.total_gpu_milli)
    replay(fed, order)
    hub_used = sum(t.used_milli for c in fed.fleet.clusters() for t in c.totals().values())
    assert hub_used == fed.allocated_gpu_milli > 0
    assert all(fed.fleet.reservation(t.name) is None for t in order)


@pytest.mark.parametrize("name", ["random", "static-weight", "fgd", "dynamic-weight"])
def test_runs_are_reproducible_per_seed(files: dict[str, Path], name: str) -> None:
    nodes = load_nodes(str(files["nodes"]))
    tasks = load_pod_list(files["pods"])
    clusters = split_nodes(nodes, 4, Split.ROUND_ROBIN)

    def run(seed: int) -> dict[str, object]:
        out = simulate(clusters, tasks, policy(name), seed=seed)
        return {k: out[k] for k in ("curve", "clusters", "tasks_placed")}

    assert run(1) == run(1)


def test_headroom_rejects_work_the_reserve_would_take(files: dict[str, Path]) -> None:
    order = arrival_order(load_pod_list(files["pods"]), 42, GPUS * 1000)
    open_ = replay(federation(files, 2, Split.ROUND_ROBIN), order)
    kept = replay(federation(files, 2, Split.ROUND_ROBIN, headroom=0.5), order)
    assert kept.outcomes["no_cluster"] > open_.outcomes["no_cluster"]


@pytest.mark.parametrize(("how", "want"), [
    (Split.ROUND_ROBIN, [["a", "d", "g"], ["b", "e"], ["c", "f"]]),
    (Split.CONTIGUOUS, [["a", "b", "c"], ["d", "e"], ["f", "g"]]),
], ids=["round-robin", "contiguous"])
def test_split_gives_every_node_to_one_cluster(how: Split, want: list[list[str]]) -> None:
    nodes = [NodeInfo(name) for name in "abcdefg"]
    parts = split_nodes(nodes, 3, how)
    assert [[n.name for n in part.nodes] for part in parts] == want
    assert [c.name for c in parts] == ["member-0", "member-1", "member-2"]


def test_by_model_split_keeps_each_model_together_where_k_allows(
        files: dict[str, Path]) -> None:
    parts = split_nodes(load_nodes(str(files["nodes"])), 5, Split.BY_MODEL)
    models = [{n.labels.get("nvidia.com/gpu.product", "") for n in c.nodes} for c in parts]
    assert models == [{""}, {"G2"}, {"T4"}, {"V100M16"}, {"V100M32"}]


@pytest.mark.parametrize("clusters", [0, 8])
def test_split_refuses_more_clusters_than_nodes_or_none(clusters: int) -> None:
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
    tasks = load_pod_list(files["pods"])
    assert check_constraints(tasks, nodes, raw) == 0
    v32 = next(t for t in tasks if t.gpu_spec == "V100M32")
    fed = federation(files, 1, Split.ROUND_ROBIN)
    assert fed.submit(v32) is Outcome.BOUND
    busy = [n.name for n in fed.members["member-0"].nodes() if any(
        d.free_milli < 1000 for d in n.devices)]
    assert len(busy) == 1 and busy[0].startswith("n-v32-")


def test_arrival_order_shuffles_the_trace_then_adds_clones_up_to_the_target(
        files: dict[str, Path]) -> None:
    tasks = load_pod_list(files["pods"])
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


def test_both_pod_list_layouts_read_the_same_tasks(tmp_path: Path) -> None:
    full = tmp_path / "full.csv"
    full.write_text(pods_csv(30))
    short = tmp_path / "short.csv"
    short.write_text("\n".join(",".join(line.split(",")[:5])
                               for line in pods_csv(30).splitlines()) + "\n")
    a, b = load_pod_list(full), load_pod_list(short)
    assert [t.name for t in a] == [t.name for t in b]
    assert [(t.requests.cpu_milli, t.requests.gpu_milli) for t in a] == [
        (t.requests.cpu_milli, t.requests.gpu_milli) for t in b]
    assert a[1].arrival == 10.0 and a[1].duration == 26.0   # deletion - scheduled
    assert b[1].arrival is None and b[1].duration is None


@pytest.mark.parametrize(("body", "message"), [
    ("name,cpu_milli\np,1\n", r"missing column\(s\) memory_mib, num_gpu, gpu_milli"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np-0,1000,1024,2,500\n",
     r"row 0 \(line 2\): 2 GPUs of 500m"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np-0,x,1024,1,500\n",
     r"row 0 \(line 2\): not a whole number"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np-0,1,1,1,0\n", r"one GPU of 0m"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np-0,1,1,0,0\np-0,1,1,0,0\n",
     r"'p-0' appears twice"),
    ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", r"no pods"),
], ids=["header", "shared-gang", "not-a-number", "zero-share", "duplicate", "empty"])
def test_bad_pod_lists_are_refused_with_the_line(tmp_path: Path, body: str,
                                                 message: str) -> None:
    bad = tmp_path / "pods.csv"
    bad.write_text(body)
    with pytest.raises(InvalidInput, match=message):
        load_pod_list(bad)


def test_durations_free_what_ended_so_more_fits(files: dict[str, Path]) -> None:
    nodes = load_nodes(str(files["nodes"]))
    tasks = load_pod_list(files["pods"])
    clusters = split_nodes(nodes, 2, Split.ROUND_ROBIN)
    timed = simulate(clusters, tasks, policy("default"), arrival=1.0, durations=True)
    assert timed["tasks_departed"] > 0 and timed["durations"] is True
    assert timed["simulated_seconds"] > 0
    assert timed["tasks_unplaced"] == 0        # each pod leaves before the pool fills


def test_gpu_milli_of_counts_cards(files: dict[str, Path]) -> None:
    assert gpu_milli_of(load_nodes(str(files["nodes"]))) == GPUS * 1000
