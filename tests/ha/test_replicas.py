"""Two real hub processes on one PostgreSQL: one leads, the standby serves reads, refuses
writes with the leader's address and turns agents away to the leader. The takeover when the
leader is killed mid-batch is fault 3 of ``bench/faultkit`` (run by ``tests/faults``)."""

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
from tests.ha.replicas import Replicas
from tests.support.postgres import fresh_database

pytestmark = pytest.mark.slow


def test_the_standby_serves_reads_and_refuses_writes_naming_the_leader(
        tmp_path: Path, pg_url: str) -> None:
    with fresh_database(pg_url) as db, Replicas(tmp_path, db) as hubs:
        status = hubs.start()
        roles = {r["address"]: r["role"] for r in status["replicas"]}
        assert roles == {hubs.api("a"): "leader", hubs.api("b"): "standby"}
        assert status["epoch"] >= 1
        shown = CliRunner().invoke(cli, ["--hub", hubs.b.url, "--token", str(hubs.a.token), "hub",
                                     "status", "-o", "json"])
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.stdout)["leader"] == hubs.api("a")
        table = CliRunner().invoke(cli, ["--hub", hubs.b.url, "--token", str(hubs.a.token), "hub",
                                     "status"])
        assert "standby" in table.stdout and hubs.api("a") in table.stdout
        hubs.start_agent("east", write_fleet(tmp_path / "east.yaml",
                                             [gpu_pool("t4", "Tesla-T4", 4)]))
        hubs.a.wait_ready(["east"])
        with hubs.a.client() as leader:
            leader.submit_task({"name": "seen", "gpu": 1, "duration": "1s"})
        answer = httpx.post(f"{hubs.b.url}/api/v1/clusters/east/cordon",
                            headers={"Authorization": f"Bearer {hubs.a.token}",
                                     "Content-Type": "application/json"})
        assert answer.status_code == 503
        assert answer.headers["Fuyao-Leader"] == hubs.api("a")
        assert answer.headers["x-request-id"]       # refused inside the guardrails
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
        assert health == {"ready": True, "role": "standby", "redis": "off", "auth": "token"}

