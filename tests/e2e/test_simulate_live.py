"""``fuyaoctl simulate --from-hub --queue`` against a real hub process and sim agents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fuyaoctl.localstack import LocalStack
from tests.e2e.conftest import gpu_pool, write_fleet

pytestmark = pytest.mark.slow


def simulate(stack: LocalStack, *args: str) -> Any:
    exe = Path(sys.executable).parent / "fuyaoctl"
    done = subprocess.run([str(exe), "simulate", *args, "-o", "json"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **stack.env()})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_what_if_more_nodes_take_the_pending_queue(stack: LocalStack, tmp_path: Path) -> None:
    """East has 2 nodes x 2 T4; three queued tasks want 2 H100s each and nothing has H100s.
    Adding 4 H100 nodes of 2 cards to east in the simulation places all three; the live
    fleet is untouched."""
    stack.start_hub()
    stack.join_and_start("east", write_fleet(tmp_path / "east.yaml",
                                             [gpu_pool("t4", "Tesla-T4", 2)]))
    stack.wait_ready(["east"])
    client = stack.client()
    nodes = client.cluster_nodes("east")
    assert sorted(n.name for n in nodes) == ["t4-0", "t4-1"]
    assert sum(len(n.devices) for n in nodes) == 4
    for i in range(3):
        client.submit_task({"name": f"big-{i}", "gpu": 2, "gpu_model": "H100"})
    deadline = time.monotonic() + 30
    while len(client.list_tasks(state="Queued")) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)

    now = simulate(stack, "--from-hub", "--queue", "--arrival", "10")
    assert (now["tasks_arrived"], now["tasks_placed"]) == (3, 0)
    assert now["gpus_total"] == 4 and list(now["clusters"]) == ["east"]
    grown = simulate(stack, "--from-hub", "--queue", "--arrival", "10",
                     "--add-nodes", "cluster=east,model=H100,count=4,gpus=2")
    assert (grown["tasks_placed"], grown["gpus_total"]) == (3, 12)
    assert len(client.cluster_nodes("east")) == 2         # the hub itself is unchanged
