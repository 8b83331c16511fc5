"""``fuyao-agent``'s launch: gRPC's runtime settings in place before gRPC loads."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from member_agent.launch import AGENT_GRPC_EXPERIMENTS, configure_grpc

ROOT = Path(__file__).resolve().parents[2]


def test_the_agent_runs_on_grpcs_iomgr_client_unless_the_operator_says_otherwise() -> None:
    environ: dict[str, str] = {}
    assert configure_grpc(environ) == AGENT_GRPC_EXPERIMENTS == "-event_engine_client"
    assert environ == {"GRPC_EXPERIMENTS": "-event_engine_client"}
    mine = {"GRPC_EXPERIMENTS": "-event_engine_listener"}
    assert configure_grpc(mine) == "-event_engine_listener"
    defaults = {"GRPC_EXPERIMENTS": ""}       # gRPC's own defaults, asked for by name
    assert configure_grpc(defaults) == "" and defaults == {"GRPC_EXPERIMENTS": ""}


def test_the_console_script_sets_grpcs_settings_before_anything_imports_grpc() -> None:
    """gRPC core reads GRPC_EXPERIMENTS once, when it loads: the script's module must not
    load it first."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["fuyao-agent"] == "member_agent.launch:main"
    probe = ("import os, sys; os.environ.pop('GRPC_EXPERIMENTS', None); "
             "import member_agent.launch as launch; loaded = 'grpc' in sys.modules; "
             "launch.configure_grpc(); print(loaded, os.environ['GRPC_EXPERIMENTS'])")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, check=True)
    assert done.stdout.split() == ["False", "-event_engine_client"]
