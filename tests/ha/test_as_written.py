"""Issue 6's "must work as written" block, with real processes: two ``fuyao-hub serve``
on one PostgreSQL database, both with ``--redis`` (a real redis-server); one agent with
``--hub A,B`` (the leader first, as written); ``fuyaoctl hub status -o json`` in the
documented shape; ``fuyaoctl task watch NAME`` following until the task ends, from either
replica (with Redis every replica serves the event stream)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fuyaoctl.localstack import LocalStack
from tests.e2e.conftest import gpu_pool, write_fleet
from tests.ha.replicas import Replicas
from tests.support.postgres import fresh_database
from tests.support.redis import RedisServer

pytestmark = pytest.mark.slow


def fuyaoctl(via: LocalStack, token: str, *args: str) -> subprocess.Popen[str]:
    """``fuyaoctl --hub URL ARGS`` as a child process (what a user types)."""
    return subprocess.Popen([sys.executable, "-m", "fuyaoctl", "--hub", via.url, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**via.env(), "FUYAO_TOKEN": token})


def test_two_hubs_with_redis_an_agent_on_both_status_and_watch_as_written(
        tmp_path: Path, pg_url: str, redis_server: RedisServer) -> None:
    with fresh_database(pg_url) as db, Replicas(
            tmp_path, db.replace("postgresql+psycopg://", "postgresql://"),  # as written
            ("--redis", redis_server.url)) as hubs:
        hubs.start()
        token = str(hubs.a.token)
        both = f"127.0.0.1:{hubs.a.agent_port},127.0.0.1:{hubs.b.agent_port}"
        hubs.a.join("gpu-east")
        hubs.a.start_agent("gpu-east", write_fleet(tmp_path / "east.yaml",
                                                   [gpu_pool("t4", "Tesla-T4", 4)]),
                           extra=["--hub", both])
        hubs.a.wait_ready(["gpu-east"])

        for via in (hubs.a, hubs.b):        # the same answer from either replica
            shown = fuyaoctl(via, token, "hub", "status", "-o", "json")
            out, err = shown.communicate(timeout=60)
            assert shown.returncode == 0, err
            status = json.loads(out)
            assert status["leader"] == hubs.api("a") and isinstance(status["epoch"], int)
            replicas = {r["address"]: r for r in status["replicas"]}
            assert {a: r["role"] for a, r in replicas.items()} == {
                hubs.api("a"): "leader", hubs.api("b"): "standby"}

        with hubs.a.client() as leader:
            leader.submit_tasks([{"name": "train-a", "gpu": 1, "duration": "3s"},
                                 {"name": "train-b", "gpu": 1, "duration": "3s"}])
        watches = {name: fuyaoctl(via, token, "task", "watch", name, "-o", "json")
                   for name, via in (("train-a", hubs.a), ("train-b", hubs.b))}
        for name, watch in watches.items():
            out, err = watch.communicate(timeout=90)
            assert watch.returncode == 0, (name, err)
            events = [json.loads(line) for line in out.splitlines()]
            kinds = [e["kind"] for e in events]
            assert {e["name"] for e in events} == {name}
            assert kinds[0] == "Submitted" and kinds[-1] == "Succeeded", kinds
            assert {"Placed", "Running"} <= set(kinds)
            assert len(kinds) == len(set(kinds))      # history and live events, once each
