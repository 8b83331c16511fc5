"""``fuyaoctl simulate`` as a user runs it: no hub, files in, JSON / a table / a PNG out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from fuyaoctl.cli import cli
from tests.simulate.test_simulate_engine import NODES, pods_csv

ONE_T4 = """cluster: {labels: {site: a}}
nodePools:
  - name: t4
    count: 1
    labels: {nvidia.com/gpu.product: T4}
    allocatable: {cpu: "16", memory: 64Gi, nvidia.com/gpu: "1"}
"""
THREE_CARD_TASKS = "\n---\n".join(
    f"name: job-{i}\ncpu: 1\nmemory: 1Gi\ngpu: 1\nimage: busybox" for i in range(3)) + "\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {"nodes": tmp_path / "nodes.csv", "pods": tmp_path / "pods.csv",
           "short": tmp_path / "short.csv", "fleet": tmp_path / "a.yaml",
           "tasks": tmp_path / "tasks.yaml"}
    out["nodes"].write_text(NODES)
    out["pods"].write_text(pods_csv())
    out["short"].write_text("\n".join(",".join(line.split(",")[:5])
                                      for line in pods_csv().splitlines()) + "\n")
    out["fleet"].write_text(ONE_T4)
    out["tasks"].write_text(THREE_CARD_TASKS)
    return out


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def report(*args: str | Path) -> Any:
    result = run("simulate", *args, "-o", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_trace_split_into_clusters_reports_the_documented_json(files: dict[str, Path]) -> None:
    out = report("--nodes", files["nodes"], "--pods", files["pods"], "--clusters", "4",
                 "--split", "round-robin", "--arrival", "1.0", "--seed", "42")
    assert out["gpus_total"] == 72 and out["clusters_count"] == 4
    assert out["tasks_arrived"] == out["tasks_placed"] + out["tasks_unplaced"] > 0
    assert 50 < out["gpu_allocation_pct"] <= 100
    assert sorted(out["clusters"]) == ["member-0", "member-1", "member-2", "member-3"]
    for cluster in out["clusters"].values():
        assert {"gpu_allocation_pct", "cpu_allocation_pct", "fragmentation_pct",
                "nodes", "gpus", "tasks_placed"} <= set(cluster)
        assert 0 <= cluster["fragmentation_pct"] <= 100
    assert sum(c["tasks_placed"] for c in out["clusters"].values()) == out["tasks_placed"]
    assert out["policy"] == "default" and out["member_policy"] == "best-fit"


@pytest.mark.parametrize("policy", ["static-weight", "random", "dynamic-weight", "fgd"])
def test_each_policy_runs_and_the_same_seed_gives_the_same_answer(
        files: dict[str, Path], policy: str) -> None:
    args = ("--nodes", files["nodes"], "--pods", files["pods"], "--clusters", "3",
            "--seed", "7", "--policy", policy)
    first, again = report(*args), report(*args)
    first.pop("seconds")
    again.pop("seconds")
    assert first == again and first["policy"] == policy


def test_several_policies_compare_side_by_side_in_json_and_a_png(
        files: dict[str, Path], tmp_path: Path) -> None:
    png = tmp_path / "curves.png"
    out = report("--nodes", files["nodes"], "--pods", files["pods"], "--clusters", "2",
                 "--policy", "default,fgd", "--policy", "random", "--plot", png)
    assert [r["policy"] for r in out["runs"]] == ["default", "fgd", "random"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_both_pod_list_layouts_give_the_same_allocation(files: dict[str, Path]) -> None:
    full = report("--nodes", files["nodes"], "--pods", files["pods"], "--clusters", "2")
    short = report("--nodes", files["nodes"], "--pods", files["short"], "--clusters", "2")
    # the short layout has no gpu_spec: the constrained pods may land elsewhere
    assert short["tasks_arrived"] > 0 and full["tasks_arrived"] > 0
    assert abs(full["gpu_allocation_pct"] - short["gpu_allocation_pct"]) < 15


def test_fleet_files_and_task_files_with_what_if_edits(files: dict[str, Path]) -> None:
    """One T4 and three one-card tasks: one fits. Adding two T4 nodes (to the cluster, or as
    a new cluster) fits all three; removing the original cluster leaves the new one."""
    base = report("--fleet", files["fleet"], "--tasks", files["tasks"], "--arrival", "3")
    assert (base["tasks_arrived"], base["tasks_placed"], base["gpus_total"]) == (3, 1, 1)
    grown = report("--fleet", files["fleet"], "--tasks", files["tasks"],
                   "--add-nodes", "cluster=a,model=T4,count=2,gpus=1")
    assert (grown["tasks_placed"], grown["gpus_total"]) == (3, 3)
    assert grown["clusters"]["a"]["nodes"] == 3
    moved = report("--fleet", files["fleet"], "--tasks", files["tasks"],
                   "--add-nodes", "cluster=b,model=T4,count=3,gpus=1", "--remove-cluster", "a")
    assert list(moved["clusters"]) == ["b"] and moved["tasks_placed"] == 3


def test_durations_run_a_simulated_clock(files: dict[str, Path]) -> None:
    out = report("--nodes", files["nodes"], "--pods", files["pods"], "--durations")
    assert out["durations"] is True and out["tasks_departed"] > 0


def test_table_output_and_progress_bar(files: dict[str, Path]) -> None:
    result = run("simulate", "--nodes", files["nodes"], "--pods", files["pods"],
                 "--clusters", "2", "--progress")
    assert result.exit_code == 0, result.output
    assert "policy default (members: best-fit), seed 42:" in result.stdout
    assert "member-0" in result.stdout and "frag %" in result.stdout
    assert "[1/1] default [" in result.stderr and "100.0%" in result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--pods", "{pods}"], "exactly one of --nodes, --fleet or --from-hub"),
    (["--nodes", "{nodes}", "--fleet", "{fleet}", "--pods", "{pods}"], "exactly one of --nodes"),
    (["--nodes", "{nodes}"], "exactly one of --pods, --tasks or --queue"),
    (["--fleet", "{fleet}", "--clusters", "2", "--pods", "{pods}"], "--clusters splits"),
    (["--nodes", "{nodes}", "--pods", "{dir}/missing.csv"], "cannot read pod list"),
    (["--nodes", "{nodes}", "--pods", "{nodes}"], "missing column(s) name"),
    (["--nodes", "{nodes}", "--pods", "{pods}", "--clusters", "21"], "between 1 and 20"),
    (["--nodes", "{nodes}", "--pods", "{pods}", "--policy", "best"], "unknown policy 'best'"),
    (["--nodes", "{nodes}", "--pods", "{pods}", "--add-nodes", "cluster=b"],
     "count= is required"),
    (["--nodes", "{nodes}", "--pods", "{pods}", "--add-nodes", "cluster=b,count=x"],
     "must be whole numbers"),
    (["--nodes", "{nodes}", "--pods", "{pods}", "--remove-cluster", "nope"],
     "no cluster 'nope'"),
    (["--nodes", "{nodes}", "--pods", "{pods}", "--plot", "{dir}/x.jpg"], "must end in .png"),
    (["--nodes", "{nodes}", "--pods", "{short}", "--durations"], "no task has a duration"),
    (["--nodes", "{nodes}:0:4", "--pods", "{pods}"], "no GPUs"),
    (["--nodes", "{nodes}", "--pods", "{pods}", "--arrival", "0"], "--arrival"),
], ids=["no-fleet", "two-fleets", "no-workload", "clusters-of-files", "missing-file",
        "not-a-pod-list", "too-many-clusters", "unknown-policy", "add-no-count",
        "add-bad-count", "remove-unknown", "plot-not-png", "durations-without-times",
        "no-gpus", "zero-arrival"])
def test_bad_input_exits_2_with_a_clear_message(files: dict[str, Path], tmp_path: Path,
                                                args: list[str], message: str) -> None:
    values = {k: str(v) for k, v in files.items()} | {"dir": str(tmp_path)}
    result = run("simulate", *[a.format(**values) for a in args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
