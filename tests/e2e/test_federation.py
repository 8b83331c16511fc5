"""The federation loop end to end: a real hub process, real agent processes, real gRPC.

Join -> Ready -> submit -> placed on the only cluster that fits -> Running -> Succeeded;
a task that fits nowhere stays Queued with a reason per cluster; a hub killed mid-run and
restarted loses nothing and every task finishes.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fuyao.spec import TaskState
from fuyaoctl.client import Client
from fuyaoctl.localstack import LocalStack
from tests.e2e.conftest import gpu_pool, write_fleet

pytestmark = pytest.mark.slow


def wait_state(client: Client, name: str, states: set[str], timeout: float = 45.0) -> str:
    """Poll until the task reaches one of ``states``; fail with its last view otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            view = client.get_task(name)
            if view.state.value in states:
                return view.state.value
        except Exception:  # the hub may be restarting
            view = None
        if time.monotonic() > deadline:
            raise AssertionError(f"task {name} not in {states} after {timeout}s: {view}")
        time.sleep(0.2)


def two_clusters(stack: LocalStack, tmp: Path) -> None:
    east = write_fleet(tmp / "east.yaml", [gpu_pool("h100", "NVIDIA-H100-80GB-HBM3", 8)])
    west = write_fleet(tmp / "west.yaml", [gpu_pool("t4", "Tesla-T4", 4)])
    stack.start_hub()
    stack.join_and_start("east", east, labels={"fuyao.io/region": "east"})
    stack.join_and_start("west", west, labels={"fuyao.io/region": "west"})
    stack.wait_ready(["east", "west"])


def test_task_runs_on_the_only_cluster_that_fits(stack: LocalStack, tmp_path: Path) -> None:
    two_clusters(stack, tmp_path)
    with stack.client() as client:
        clusters = {c.name: c for c in client.list_clusters()}
        assert clusters["east"].gpus == {"H100": 16}
        assert clusters["west"].gpus == {"T4": 8}
        client.submit_task({"name": "train", "gpu": 4, "gpu_model": ">=A100",
                            "duration": "2s"})
        assert wait_state(client, "train", {"Running", "Succeeded"}) in {"Running", "Succeeded"}
        view = client.get_task("train")
        assert view.cluster == "east"
        assert view.node is not None and view.node.startswith("h100-")
        assert wait_state(client, "train", {"Succeeded"}) == "Succeeded"
        kinds = [e.kind for e in client.get_task("train").events]
        for kind in ("Submitted", "Placed", "Accepted", "Running", "Succeeded"):
            assert kind in kinds, kinds
        assert kinds.index("Placed") < kinds.index("Running") < kinds.index("Succeeded")


def test_task_that_fits_nowhere_stays_queued_with_reasons(stack: LocalStack,
                                                          tmp_path: Path) -> None:
    two_clusters(stack, tmp_path)
    with stack.client() as client:
        client.submit_task({"name": "huge", "gpu": 16, "gpu_model": "H100"})
        deadline = time.monotonic() + 20
        view = client.get_task("huge")
        while set(view.reasons) != {"east", "west"} and time.monotonic() < deadline:
            time.sleep(0.2)
            view = client.get_task("huge")
        assert view.state == TaskState.QUEUED
        assert set(view.reasons) == {"east", "west"}
        assert "0/2 clusters are available" in view.message


def test_hub_killed_mid_run_loses_nothing(stack: LocalStack, tmp_path: Path) -> None:
    two_clusters(stack, tmp_path)
    names = [f"job-{i}" for i in range(6)]
    with stack.client() as client:
        client.submit_tasks([{"name": n, "gpu": 1, "duration": "4s"} for n in names])
        wait_state(client, names[0], {"Running", "Succeeded"})
    stack.stop_hub(kill=True)            # a crash: no graceful shutdown
    stack.start_hub()
    with stack.client() as client:
        assert {t.name for t in client.list_tasks()} == set(names)
        stack.wait_ready(["east", "west"], timeout=60)
        for n in names:
            assert wait_state(client, n, {"Succeeded"}, timeout=90) == "Succeeded"
