"""``fuyaoctl task watch NAME`` and ``cluster watch`` against real hub and agent processes,
with Redis (the must-work command block) and without it (the hub's own event bus)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fuyaoctl.localstack import LocalStack
from tests.e2e.conftest import gpu_pool, write_fleet
from tests.support.redis import RedisServer

pytestmark = pytest.mark.slow


def fuyaoctl(stack: LocalStack, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "fuyaoctl", "--hub", stack.url, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(params=["redis", "no-redis"])
def stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalStack]:
    args: list[str] = []
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        args = ["--redis", server.url]
    with LocalStack(home=tmp_path / "stack", hub_args=args,
                    agent_args=["--heartbeat-interval", "0.5"]) as s:
        s.start_hub()
        s.join_and_start("east", write_fleet(tmp_path / "east.yaml",
                                             [gpu_pool("t4", "Tesla-T4", 4)]))
        s.wait_ready(["east"])
        yield s


def test_task_watch_follows_a_task_until_it_ends(stack: LocalStack) -> None:
    with stack.client() as client:
        client.submit_task({"name": "probe", "gpu": 1, "duration": "3s"})
    watch = fuyaoctl(stack, "task", "watch", "probe", "-o", "json")
    out, err = watch.communicate(timeout=60)
    assert watch.returncode == 0, err
    kinds = [json.loads(line)["kind"] for line in out.splitlines()]
    assert kinds[0] == "Submitted" and kinds[-1] == "Succeeded"
    assert {"Placed", "Running"} <= set(kinds)
    assert len(kinds) == len(set(kinds))             # history and live events, once each
    again = fuyaoctl(stack, "task", "watch", "probe")     # ended: its history, at once
    table, _ = again.communicate(timeout=30)
    assert again.returncode == 0 and "task/probe  Succeeded" in table


def test_task_watch_of_an_unknown_task_fails_and_cluster_watch_sees_a_cordon(
        stack: LocalStack) -> None:
    missing = fuyaoctl(stack, "task", "watch", "nope")
    _, err = missing.communicate(timeout=30)
    assert missing.returncode == 1 and "not found" in err
    with stack.client() as client:
        client.cordon("east")
    # From the first event on (id 0): what happened before the watcher started is there too.
    watch = fuyaoctl(stack, "cluster", "watch", "--since", "0", "--timeout", "5s", "-o", "json")
    out, err = watch.communicate(timeout=60)
    assert watch.returncode == 0, err
    seen = [(e["name"], e["kind"]) for e in map(json.loads, out.splitlines())]
    assert seen.index(("east", "Joined")) < seen.index(("east", "Cordoned"))
