"""Two real hub processes on one PostgreSQL: one leads, the standby serves reads, refuses
writes with the leader's address, turns agents away to the leader, and takes over when the
leader is killed with SIGKILL mid-batch (fault 3) without losing or repeating a task."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from fuyao.errors import Transient
from fuyaoctl.cli import cli
from tests.e2e.conftest import gpu_pool, write_fleet
from tests.ha.replicas import Replicas, audit_once, wait_all_ended
from tests.support.postgres import fresh_database

pytestmark = pytest.mark.slow


def test_the_standby_serves_reads_and_refuses_writes_naming_the_leader(
        tmp_path: Path, pg_url: str) -> None:
    with fresh_database(pg_url) as db, Replicas(tmp_path, db) as hubs:
        status = hubs.start()
        roles = {r["address"]: r["role"] for r in status["replicas"]}
        assert roles == {hubs.api("a"): "leader", hubs.api("b"): "standby"}
        assert status["epoch"] >= 1
        shown = CliRunner().invoke(cli, ["--hub", hubs.b.url, "hub", "status", "-o", "json"])
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.stdout)["leader"] == hubs.api("a")
        table = CliRunner().invoke(cli, ["--hub", hubs.b.url, "hub", "status"])
        assert "standby" in table.stdout and hubs.api("a") in table.stdout
        hubs.start_agent("east", write_fleet(tmp_path / "east.yaml",
                                             [gpu_pool("t4", "Tesla-T4", 4)]))
        hubs.a.wait_ready(["east"])
        with hubs.a.client() as leader:
            leader.submit_task({"name": "seen", "gpu": 1, "duration": "1s"})
        answer = httpx.post(f"{hubs.b.url}/api/v1/clusters/east/cordon")
        assert answer.status_code == 503
        assert answer.headers["Fuyao-Leader"] == hubs.api("a")
        assert answer.json()["error"]["details"]["leader"] == hubs.api("a")
        assert "standby" in answer.json()["error"]["message"]
        with hubs.b.client() as standby:
            with pytest.raises(Transient, match="standby"):
                standby.submit_task({"name": "refused", "gpu": 1})
            # Reads come from the store: the cluster and the task the leader stored.
            deadline = time.monotonic() + 20
            while standby.get_cluster("east").state.value != "Ready":
                assert time.monotonic() < deadline
                time.sleep(0.2)
            assert standby.get_task("seen").name == "seen"
            assert [t.name for t in standby.list_tasks()] == ["seen"]
        health = httpx.get(f"http://127.0.0.1:{hubs.b.health_port}/readyz").json()
        assert health == {"ready": True, "role": "standby"}


def test_kill_the_leader_mid_batch_the_standby_takes_over_and_no_task_is_lost_or_repeated(
        tmp_path: Path, pg_url: str) -> None:
    with fresh_database(pg_url) as db, Replicas(tmp_path, db) as hubs:
        before = hubs.start()
        hubs.start_agent("east", write_fleet(tmp_path / "east.yaml",
                                             [gpu_pool("t4", "Tesla-T4", 4, count=2)]))
        hubs.a.wait_ready(["east"])
        names = [f"job-{i:02d}" for i in range(24)]
        with hubs.a.client() as leader:
            leader.submit_tasks([{"name": n, "gpu": 1, "duration": "3s"} for n in names])
            deadline = time.monotonic() + 30
            while not any(t.state.value == "Running" for t in leader.list_tasks()):
                assert time.monotonic() < deadline, "nothing started"
                time.sleep(0.1)
        killed = time.monotonic()
        hubs.a.stop_hub(kill=True)
        after = hubs.wait_leader(hubs.b, "b")
        took = time.monotonic() - killed
        print(f"takeover observed {took:.1f}s after kill -9 of the leader")
        assert after["epoch"] == before["epoch"] + 1
        roles = {r["address"]: r["role"] for r in after["replicas"]}
        assert roles[hubs.api("b")] == "leader"
        assert roles.get(hubs.api("a"), "gone") != "leader"   # listed until it is stale
        with hubs.b.client() as leader:
            states = wait_all_ended(leader, names)
            assert set(states.values()) == {"Succeeded"}
            assert audit_once(leader, names) == {"finished once": len(names)}
