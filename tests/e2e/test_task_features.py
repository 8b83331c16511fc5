"""Issue 9's task features as a user meets them: real hub and agent processes, fuyaoctl as
a console script. Profiles, queues holding a gang, a dependency, a dry-run, GPU memory
sharing, a DAG of three, and an explain with a nearest fit."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from fuyaoctl.localstack import LocalStack
from tests.e2e.conftest import FAST_TIMINGS, gpu_pool, write_fleet
from tests.e2e.test_cli import ctl, ctl_json

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def wait_for(stack: LocalStack, name: str, state: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        task: dict[str, Any] = ctl_json(stack, "task", "describe", name)
        # the timeline is written through the store, a moment after the state changes
        if task["state"] == state and state in {e["kind"] for e in task["events"]}:
            return task
        assert time.monotonic() < deadline, task
        time.sleep(0.3)


def test_profiles_queues_dependencies_dry_run_memory_sharing_dag_and_explain(
    stack: LocalStack, tmp_path: Path,
) -> None:
    stack.start_hub()
    east = write_fleet(tmp_path / "east.yaml", [
        gpu_pool("a100", "NVIDIA-A100-SXM4-80GB", 8, count=3)])
    west = write_fleet(tmp_path / "west.yaml", [
        gpu_pool("v100", "Tesla-V100-SXM2-32GB", 8), gpu_pool("t4", "Tesla-T4", 4)])
    stack.join_and_start("east", east)
    stack.join_and_start("west", west)
    stack.wait_ready(["east", "west"])

    # The "must work as written" lines of the issue, in order.
    ctl(stack, "queue", "create", "team-a", "--weight", "2", "--quota", "gpu=8",
        "--quota", "cpu=64")
    ctl(stack, "queue", "create", "team-b", "--weight", "1", "--quota", "gpu=4",
        "--borrow", "gpu=4")
    applied = ctl(stack, "profile", "apply", "-f", str(ROOT / "examples/profiles/llm-train.yaml"))
    assert applied.stdout.strip() == "profile llm-train applied (version 1)"
    big = ctl_json(stack, "task", "submit", "--name", "big", "--queue", "team-a",
                   "--profile", "llm-train", "--replicas", "2", "--gang")
    assert (big["spec"]["gpu"], big["spec"]["replicas"], big["spec"]["gang"],
            big["spec"]["profile_version"]) == (8, 2, True, 1)
    ctl(stack, "task", "submit", "--name", "eval", "--queue", "team-b", "--gpu", "1",
        "--after", "big", "--priority", "10")
    probe = ctl_json(stack, "task", "submit", "--name", "probe", "--gpu", "1", "--gpu-model",
                     "T4", "--dry-run")
    assert probe["cluster"] == "west" and len(probe["nodes"]) == 1
    assert probe["model"] == "T4" and list(probe["scores"]) == ["west"]
    assert "probe" not in [t["name"] for t in ctl_json(stack, "task", "list")]
    tainted = ctl_json(stack, "cluster", "taint", "west", "dedicated=ml:NoSchedule")
    assert tainted["taints"] == [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    nowhere = ctl_json(stack, "task", "submit", "--name", "probe", "--gpu", "1", "--gpu-model",
                       "T4", "--dry-run")
    assert nowhere["cluster"] is None and nowhere["histogram"] == {
        "cluster has a taint the task does not tolerate: dedicated=ml:NoSchedule": 1,
        "no node matches fuyao.io/gpu-model=T4": 1}
    assert ctl_json(stack, "cluster", "taint", "west", "dedicated=ml:NoSchedule-")["taints"] == []
    bad = ctl(stack, "cluster", "taint", "west", "dedicated=ml", ok=False)
    assert bad.returncode == 2 and "must look like key=value:NoSchedule" in bad.stderr
    ctl(stack, "task", "submit", "--name", "nb", "--gpu-mem", "8Gi", "--gpu-model", "A100",
        "--duration", "1h")

    # big: 16 GPUs against team-a's quota of 8 -> held by the quota; the fleet has room.
    deadline = time.monotonic() + 30
    while True:
        why = ctl_json(stack, "task", "explain", "big")
        if why["queue"].get("held_by"):
            break
        assert time.monotonic() < deadline, why
        time.sleep(0.3)
    assert why["state"] == "Queued"
    assert why["queue"]["held_by"] == ("queue team-a: gpu quota 8, in use 0; the task asks "
                                       "16, more than the quota allows")
    assert why["nearest_fit"]["change"] == {"queue": "default"}
    assert why["nearest_fit"]["cluster"] == "east"
    # or, in team-a, the most its quota admits now
    assert {"replicas": 1} in [a["change"] for a in why["alternatives"]]
    described = ctl_json(stack, "queue", "describe", "team-a")   # the last line of the block
    assert (described["quotas"], described["queued"]) == ({"gpu": "8", "cpu": "64"}, 1)
    assert {"usage", "cluster_usage", "dominant_share", "fair_share"} <= set(described)
    text = ctl(stack, "task", "explain", "big").stdout
    assert "Queue:" in text and "team-a #1" in text and "gpu 8 (in use 0)" in text
    eval_why = ctl_json(stack, "task", "explain", "eval")
    assert eval_why["dependencies"] == {"big": "Queued"}
    assert eval_why["held"] == "waiting for big (Queued)"

    # nb shares one A100: a third of a card's share, the model pinned.
    nb = wait_for(stack, "nb", "Running")
    assert nb["cluster"] == "east"
    rows = {(r["group"], r["model"]): r for r in ctl_json(stack, "capacity")["rows"]}
    assert rows[("east", "A100")]["gpu_memory_allocated_gib"] == pytest.approx(8.0, abs=0.1)

    # A task that fits nowhere: explain gives the histogram and the nearest fit.
    ctl(stack, "task", "submit", "--name", "huge", "--gpu", "8", "--gpu-model", "V100",
        "--replicas", "3")
    deadline = time.monotonic() + 30
    while True:
        huge = ctl_json(stack, "task", "explain", "huge")
        if huge["histogram"]:
            break
        assert time.monotonic() < deadline, huge
        time.sleep(0.3)
    assert huge["histogram"] == {
        "no node matches fuyao.io/gpu-model=V100": 1,
        "only 2 of 3 replicas fit on nodes with fuyao.io/gpu-model=V100 and 8 free GPUs": 1}
    assert huge["nearest_fit"]["change"] == {"gpu": 4}   # 3 x 4 of 16 V100s, 10% kept
    text = ctl(stack, "task", "explain", "huge").stdout
    assert "Nearest fit: with 4 GPUs per replica instead of 8 -> west" in text

    # A DAG of three in one file: each starts after the one before succeeded.
    dag = tmp_path / "dag.yaml"
    dag.write_text("tasks:\n"
                   "  - {name: d-prep, cpu: 1, duration: 1s}\n"
                   "  - {name: d-train, gpu: 1, duration: 1s, after: [d-prep]}\n"
                   "  - {name: d-eval, gpu: 1, duration: 1s, after: [d-train, d-prep]}\n")
    ctl(stack, "task", "submit", "-f", str(dag))
    done = {n: wait_for(stack, n, "Succeeded") for n in ("d-prep", "d-train", "d-eval")}
    events = {n: {e["kind"]: e["at"] for e in t["events"]} for n, t in done.items()}
    assert events["d-prep"]["Succeeded"] <= events["d-train"]["Placed"]
    assert events["d-train"]["Succeeded"] <= events["d-eval"]["Placed"]

    # Bad input: exit 2, nothing changed.
    cycle = tmp_path / "cycle.yaml"
    cycle.write_text("tasks:\n  - {name: c1, after: [c2]}\n  - {name: c2, after: [c1]}\n")
    bad = ctl(stack, "task", "submit", "-f", str(cycle), ok=False)
    assert bad.returncode == 2 and "dependency cycle: c1 -> c2 -> c1" in bad.stderr
    profile = tmp_path / "bad.yaml"
    profile.write_text("name: bad\nselector:\n"
                       "  - {key: fuyao.io/region, operator: Gt, values: [east]}\n")
    bad = ctl(stack, "profile", "apply", "-f", str(profile), ok=False)
    assert bad.returncode == 2 and "cannot be ordered" in bad.stderr
    refused = ctl(stack, "profile", "delete", "llm-train", ok=False)
    assert refused.returncode == 1 and "used by queued tasks: big" in refused.stderr
    names = [t["name"] for t in ctl_json(stack, "task", "list")]
    assert "c1" not in names and "bad" not in [p["name"] for p in
                                               ctl_json(stack, "profile", "list")]


def test_an_operator_catalog_normalizes_a_members_unknown_card(tmp_path: Path) -> None:
    config = tmp_path / "hub.yaml"
    config.write_text(yaml.safe_dump({**FAST_TIMINGS, "catalog": {
        "models": [{"name": "RTX4090", "vendor": "nvidia", "rank": 65, "memory": "24Gi"}],
        "aliases": {"GeForce-RTX-4090-Special": "RTX4090"}}}))
    with LocalStack(home=tmp_path / "stack", hub_args=["--config", str(config)],
                    agent_args=["--heartbeat-interval", "0.5"]) as stack:
        stack.start_hub()
        fleet = write_fleet(tmp_path / "lab.yaml", [
            gpu_pool("rtx", "GeForce-RTX-4090-Special", 4, count=1)])
        stack.join_and_start("lab", fleet)
        stack.wait_ready(["lab"])
        models = {m["name"]: m for m in ctl_json(stack, "catalog")["models"]}
        assert (models["RTX4090"]["rank"], models["RTX4090"]["aliases"]) == (
            65, ["geforce-rtx-4090-special"])
        assert ctl_json(stack, "cluster", "list")[0]["gpus"] == {"RTX4090": 4}
        ctl(stack, "task", "submit", "--name", "game", "--gpu", "1", "--gpu-model", ">=A10",
            "--duration", "1h")
        running = wait_for(stack, "game", "Running")
        assert running["cluster"] == "lab"
