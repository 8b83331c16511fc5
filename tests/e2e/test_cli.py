"""``fuyaoctl`` as a user runs it, against a real hub process and a real agent process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fuyaoctl.localstack import LocalStack, save_join
from tests.e2e.conftest import gpu_pool, write_fleet

pytestmark = pytest.mark.slow


def ctl(stack: LocalStack, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the fuyaoctl console script with FUYAO_HUB pointing at the stack."""
    exe = Path(sys.executable).parent / "fuyaoctl"
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "FUYAO_HUB": stack.url})
    if ok:
        assert done.returncode == 0, done.stderr
    return done


def ctl_json(stack: LocalStack, *args: str) -> Any:
    return json.loads(ctl(stack, *args, "-o", "json").stdout)


def test_join_submit_list_capacity_through_the_cli(stack: LocalStack, tmp_path: Path) -> None:
    stack.start_hub()
    joined = ctl_json(stack, "cluster", "join", "east", "--label", "fuyao.io/region=east",
                      "--weight", "3", "--headroom", "0.25")
    assert set(joined) >= {"cluster", "token", "agent_command"}
    assert f"--hub 127.0.0.1:{stack.agent_port}" in joined["agent_command"]
    assert joined["ca_cert"].startswith("-----BEGIN CERTIFICATE-----")
    assert "--ca-cert east-ca.crt" in joined["agent_command"]
    token_file = save_join(tmp_path, "east", joined["token"], joined["ca_cert"])
    fleet = write_fleet(tmp_path / "east.yaml", [gpu_pool("a100", "NVIDIA-A100-SXM4-80GB", 8)])
    stack.start_agent("east", fleet, token_file=token_file)
    stack.wait_ready(["east"])

    clusters = ctl_json(stack, "cluster", "list")
    assert [(c["name"], c["state"], c["labels"]["fuyao.io/region"], c["weight"], c["headroom"])
            for c in clusters] == [("east", "Ready", "east", 3, 0.25)]

    task_file = tmp_path / "ft.yaml"
    task_file.write_text("name: ft\ngpu: 2\ngpu_model: '>=A100'\nduration: 60s\n")
    ctl(stack, "task", "submit", "-f", str(task_file))
    ctl(stack, "task", "submit", "--name", "probe", "--gpu", "1", "--gpu-model", "H100")
    deadline = time.monotonic() + 30
    while True:
        tasks = {t["name"]: t for t in ctl_json(stack, "task", "list")}
        if tasks["ft"]["state"] == "Running" and tasks["probe"].get("reasons"):
            break
        assert time.monotonic() < deadline, tasks
        time.sleep(0.3)
    assert tasks["ft"]["cluster"] == "east"
    assert tasks["probe"]["state"] == "Queued" and tasks["probe"]["cluster"] is None

    described = ctl(stack, "task", "describe", "probe").stdout
    assert "east" in described and "H100" in described

    rows = ctl_json(stack, "capacity")["rows"]
    assert [(r["group"], r["model"], r["devices_total"], r["devices_allocated"],
             r["devices_reserved"]) for r in rows] == [("east", "A100", 16, 2, 4)]

    bad = ctl(stack, "task", "submit", "--name", "x", "--cpu", "-1", ok=False)
    assert bad.returncode == 2 and "error:" in bad.stderr
    dup = ctl(stack, "task", "submit", "--name", "ft", ok=False)
    assert dup.returncode == 1 and "ft" in dup.stderr
    missing = ctl(stack, "cluster", "describe", "nope", ok=False)
    assert missing.returncode == 1 and "not found" in missing.stderr
    assert [t["name"] for t in ctl_json(stack, "task", "list")] == ["ft", "probe"]

    ctl(stack, "task", "cancel", "ft")
    assert ctl_json(stack, "task", "list", "--state", "Cancelled")[0]["name"] == "ft"

    audit = ctl_json(stack, "audit", "--limit", "3")
    assert (audit[0]["action"], audit[0]["target"]) == ("task.cancel", "ft")
    assert any(a["result"].startswith("refused:") for a in ctl_json(stack, "audit"))
    assert "task.cancel" in ctl(stack, "audit").stdout
