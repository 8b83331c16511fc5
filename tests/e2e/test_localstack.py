"""The local stack the demo, the benchmarks and these tests run on: closing it stops every
process it started - agents, their member clusters and the hub - signalled together."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fuyaoctl import localstack
from fuyaoctl.localstack import LocalStack
from tests.e2e.conftest import gpu_pool, write_fleet

pytestmark = pytest.mark.slow


def _runs(pid: int) -> bool:
    """True while ``pid`` is a live process (not gone, not a zombie)."""
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_closing_a_stack_stops_every_agent_member_and_the_hub(stack: LocalStack,
                                                              tmp_path: Path) -> None:
    stack.start_hub()
    names = ["east", "west", "south"]
    for name in names:
        stack.join_and_start(name, write_fleet(tmp_path / f"{name}.yaml",
                                               [gpu_pool(name, "Tesla-T4", 2, count=1)]))
    stack.wait_ready(names)
    members = {name: stack.member_pid(name) for name in names}
    assert all(members.values()), members
    assert stack.hub is not None

    stack.close()

    assert [n for n, proc in stack.agents.items() if proc.alive()] == []
    assert not stack.hub.alive()
    assert [n for n, pid in members.items() if pid is not None and _runs(pid)] == []
    assert [n for n in names if stack.member_pid(n) is not None] == []


def test_stacks_in_one_process_never_share_a_port(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two stacks built before either hub listens (the HA tests' two hubs) get eight
    distinct ports even when the kernel hands the same free ports out again - a hub whose
    port another stack's hub took does not start ("already in use")."""
    handed = iter([41001, 41002, 41003, 41004] * 2 + list(range(41005, 41100)))
    monkeypatch.setattr(localstack, "free_port", lambda: next(handed))
    a = LocalStack(home=tmp_path / "a")
    b = LocalStack(home=tmp_path / "b")
    ports = [s.api_port for s in (a, b)] + [s.agent_port for s in (a, b)] + [
        s.health_port for s in (a, b)] + [s.register_port for s in (a, b)]
    assert len(set(ports)) == 8, ports
