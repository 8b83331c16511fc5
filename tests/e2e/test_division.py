"""Replicas divided over clusters, end to end: a real hub process, real simulated member
agents, fuyaoctl as the user. Each member runs its part; the task's status adds the parts
up; losing one cluster re-places only that cluster's part; cancelling cancels every part."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fuyaoctl.localstack import LocalStack
from tests.e2e.conftest import gpu_pool, write_fleet
from tests.e2e.test_cli import ctl, ctl_json
from tests.e2e.test_queues import until

pytestmark = pytest.mark.slow

A100 = "NVIDIA-A100-SXM4-80GB"


def member(stack: LocalStack, tmp: Path, name: str, gpus: int) -> None:
    fleet = write_fleet(tmp / f"{name}.yaml", [gpu_pool(name, A100, gpus, count=1)])
    stack.join(name, headroom=0.0)
    stack.start_agent(name, fleet)


def parts(view: dict[str, Any]) -> dict[str, tuple[str, int, str, int]]:
    """part name -> (cluster, replicas, state, generation)."""
    return {p["name"]: (p["cluster"], p["replicas"], p["state"], p["generation"])
            for p in view["parts"]}


def test_replicas_divided_over_two_clusters(stack: LocalStack, tmp_path: Path) -> None:
    stack.start_hub()
    member(stack, tmp_path, "east", 4)
    member(stack, tmp_path, "west", 2)
    member(stack, tmp_path, "spare", 2)
    stack.wait_ready(["east", "west", "spare"])
    submitted = ctl_json(stack, "task", "submit", "--name", "big", "--gpu", "1",
                         "--gpu-model", "A100", "--replicas", "6", "--spread", "weighted",
                         "--spread-weight", "east=2", "--spread-weight", "west=1")
    assert submitted["spec"]["spread_weights"] == {"east": 2, "west": 1}

    def running() -> dict[str, Any] | None:
        view: dict[str, Any] = ctl_json(stack, "task", "describe", "big")
        ok = view["state"] == "Running" and len(view["parts"]) == 2 and all(
            p["state"] == "Running" for p in view["parts"])
        return view if ok else None

    view = until(running, timeout=60)
    by_cluster = {c: (n, s, g) for c, n, s, g in parts(view).values()}
    assert by_cluster == {"east": (4, "Running", 1), "west": (2, "Running", 1)}
    assert view["cluster"] is None
    east_part = next(n for n, p in parts(view).items() if p[0] == "east")
    west_part = next(n for n, p in parts(view).items() if p[0] == "west")
    part_view = ctl_json(stack, "task", "describe", west_part)
    assert part_view["parent"] == "big" and part_view["spec"]["replicas"] == 2
    # Each member runs its own part: the members' task lists say so.
    listed = {t["name"]: t["cluster"] for t in ctl_json(stack, "task", "list")}
    assert listed[east_part] == "east" and listed[west_part] == "west"
    refused = ctl(stack, "task", "cancel", west_part, ok=False)
    assert refused.returncode != 0 and "cancel that task" in refused.stderr

    # West is lost: only its part moves (to spare, generation 2); east's keeps running.
    stack.agents["west"].stop(kill=True)
    stack.stop_member("west")

    def moved() -> dict[str, Any] | None:
        view: dict[str, Any] = ctl_json(stack, "task", "describe", "big")
        p = parts(view)
        ok = (p[west_part][0] == "spare" and p[west_part][2] == "Running"
              and view["state"] == "Running")
        return view if ok else None

    view = until(moved, timeout=120)
    assert parts(view)[east_part] == ("east", 4, "Running", 1)
    assert parts(view)[west_part] == ("spare", 2, "Running", 2)
    kinds = [e["kind"] for e in ctl_json(stack, "task", "describe", west_part)["events"]]
    assert "Requeued" in kinds and kinds.count("Placed") == 2

    # Cancelling the task cancels every part.
    ctl(stack, "task", "cancel", "big")
    ended = until(lambda: (v := ctl_json(stack, "task", "describe", "big"))
                  and {p["state"] for p in v["parts"]} == {"Cancelled"} and v, timeout=60)
    assert ended["state"] == "Cancelled"
    table = ctl(stack, "task", "describe", "big").stdout
    assert "Parts (one workload per cluster)" in table and east_part in table
