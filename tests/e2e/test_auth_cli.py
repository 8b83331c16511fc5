"""The issue's must-work commands, as a user types them, against a real hub process."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fuyaoctl.localstack import LocalStack

pytestmark = pytest.mark.slow
EXE = str(Path(sys.executable).parent / "fuyaoctl")


def run(env: dict[str, str], *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([EXE, *args], capture_output=True, text=True, timeout=60, env=env)
    if ok:
        assert done.returncode == 0, done.stderr
    return done


def as_json(env: dict[str, str], *args: str) -> Any:
    return json.loads(run(env, *args, "-o", "json").stdout)


def test_must_work_block(stack: LocalStack, tmp_path: Path) -> None:
    stack.start_hub()
    token_file = stack.admin_token_file
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    admin = {**os.environ, "FUYAO_HUB": stack.url,
             "FUYAO_TOKEN": token_file.read_text().strip(),
             "FUYAO_CONFIG": str(tmp_path / "config.yaml")}
    run(admin, "queue", "create", "team-a")
    created = as_json(admin, "auth", "token", "create", "ci-bot", "--role", "submitter",
                      "--queue", "team-a")
    assert set(created) >= {"name", "token"} and created["name"] == "ci-bot"
    listed = as_json(admin, "auth", "token", "list")
    assert {t["name"] for t in listed} == {"admin", "ci-bot"}
    bot = {**admin, "FUYAO_TOKEN": created["token"]}
    who = as_json(bot, "auth", "whoami")
    assert {k: who[k] for k in ("name", "role", "queues")} == {
        "name": "ci-bot", "role": "submitter", "queues": ["team-a"]}
    refused = run(bot, "cluster", "join", "east", ok=False)
    assert refused.returncode == 1 and "may not cluster.join" in refused.stderr

    as_json(admin, "cluster", "join", "gpu-east")
    rotated = as_json(admin, "cluster", "token", "create", "gpu-east")
    assert rotated["cluster"] == "gpu-east" and rotated["token"].startswith("fyj_")
    assert len(as_json(admin, "cluster", "token", "list", "gpu-east")) == 2

    run(bot, "task", "submit", "--name", "once", "--queue", "team-a")
    undeletable = run(bot, "task", "delete", "once", ok=False)
    assert undeletable.returncode == 1 and "cancel it first" in undeletable.stderr
    run(bot, "task", "cancel", "once")
    assert "task once deleted" in run(bot, "task", "delete", "once").stdout
    run(bot, "task", "submit", "--name", "once", "--queue", "team-a")   # the name is free

    run(admin, "auth", "token", "revoke", "ci-bot")
    gone = run(bot, "auth", "whoami", ok=False)
    assert gone.returncode == 1 and "revoked" in gone.stderr
    audit = as_json(admin, "audit", "--actor", "ci-bot", "--action", "task.")
    assert [a["action"] for a in audit][:2] == ["task.submit", "task.delete"]

    # kubeconfig-like contexts: no FUYAO_HUB / FUYAO_TOKEN in the environment
    bare = {k: v for k, v in admin.items() if k not in ("FUYAO_HUB", "FUYAO_TOKEN")}
    assert run(bare, "auth", "whoami", ok=False).returncode != 0
    run(bare, "config", "set-context", "laptop", "--hub", stack.url, "--token-file",
        str(token_file))
    run(bare, "config", "set-context", "other", "--hub", "http://127.0.0.1:1")
    run(bare, "config", "use-context", "laptop")
    assert as_json(bare, "auth", "whoami")["name"] == "admin"
    assert stat.S_IMODE((tmp_path / "config.yaml").stat().st_mode) == 0o600
    missing = run(bare, "config", "use-context", "nope", ok=False)
    assert missing.returncode == 1 and "not in" in missing.stderr
