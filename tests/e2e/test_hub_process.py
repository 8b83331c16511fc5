"""The hub process's own surfaces: health and metrics port, plaintext agent port, PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from fuyaoctl.localstack import LocalStack
from tests.e2e.conftest import gpu_pool, write_fleet
from tests.e2e.test_federation import wait_state
from tests.support.postgres import fresh_database

pytestmark = pytest.mark.slow


def run_one_task(stack: LocalStack, tmp_path: Path) -> None:
    fleet = write_fleet(tmp_path / "east.yaml", [gpu_pool("t4", "Tesla-T4", 4)])
    stack.start_hub()
    stack.join_and_start("east", fleet)
    stack.wait_ready(["east"])
    with stack.client() as client:
        client.submit_task({"name": "probe", "gpu": 1, "duration": "1s"})
        assert wait_state(client, "probe", {"Succeeded"}) == "Succeeded"


def test_health_port_serves_readiness_and_prometheus_metrics(stack: LocalStack,
                                                             tmp_path: Path) -> None:
    run_one_task(stack, tmp_path)
    health = f"http://127.0.0.1:{stack.health_port}"
    assert httpx.get(f"{health}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{health}/readyz").status_code == 200
    metrics = httpx.get(f"{health}/metrics").text
    assert "fuyao_placements_total 1.0" in metrics
    assert 'fuyao_clusters{state="Ready"} 1.0' in metrics
    assert 'fuyao_agent_messages_total{kind="inventory"}' in metrics


def test_agent_insecure_serves_plaintext_and_joins_hand_out_no_ca(tmp_path: Path) -> None:
    with LocalStack(home=tmp_path / "stack", hub_args=["--agent-insecure"],
                    agent_args=["--heartbeat-interval", "0.5"]) as stack:
        run_one_task(stack, tmp_path)
        assert not (stack.home / "east-ca.crt").exists()      # the join carried no CA


def test_hub_process_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    with fresh_database(pg_url) as db, LocalStack(
            home=tmp_path / "stack", db_url=db,
            agent_args=["--heartbeat-interval", "0.5"]) as stack:
        run_one_task(stack, tmp_path)
        stack.stop_hub()
        stack.start_hub()
        with stack.client() as client:
            assert [(t.name, t.state.value) for t in client.list_tasks()] == [
                ("probe", "Succeeded")]
