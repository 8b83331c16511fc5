"""Two hub processes on one PostgreSQL database, and the checks the HA tests share.

``Replicas`` starts hub ``a`` and hub ``b`` (each a ``LocalStack`` with its own home and
ports, the same ``--db``); agents are started by ``a`` with both agent addresses, the
standby's first, so they must follow the refusal to the leader. ``audit_once`` checks every
task the way the fault-injection suite counts them.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from fuyaoctl.client import Client
from fuyaoctl.localstack import LocalStack, Proc
from tests.e2e.conftest import FAST_TIMINGS


class Replicas:
    """Hubs ``a`` and ``b`` on one database."""

    def __init__(self, root: Path, db_url: str, hub_args: tuple[str, ...] = ()) -> None:
        config = root / "hub.yaml"
        config.write_text(yaml.safe_dump(FAST_TIMINGS))
        args = ["--config", str(config), *hub_args]
        agent = ["--heartbeat-interval", "0.5"]
        self.a = LocalStack(home=root / "a", db_url=db_url, hub_args=list(args), agent_args=agent)
        self.b = LocalStack(home=root / "b", db_url=db_url, hub_args=list(args), agent_args=agent)
        self.stacks = {"a": self.a, "b": self.b}

    def api(self, name: str) -> str:
        """``127.0.0.1:PORT`` of a replica's REST API, as ``hub status`` names it."""
        return f"127.0.0.1:{self.stacks[name].api_port}"

    def agent_hubs(self) -> str:
        """The agents' ``--hub`` value: both replicas, standby ``b`` first."""
        return f"127.0.0.1:{self.b.agent_port},127.0.0.1:{self.a.agent_port}"

    def start_agent(self, name: str, fleet: Path) -> Proc:
        """Join ``name`` through the leader ``a`` and start its agent with both addresses."""
        self.a.join(name)
        register = f"127.0.0.1:{self.a.register_port},127.0.0.1:{self.b.register_port}"
        return self.a.start_agent(name, fleet, extra=["--hub", self.agent_hubs(),
                                                      "--register", register])

    def wait_leader(self, via: LocalStack, name: str, timeout: float = 60.0) -> dict[str, Any]:
        """Poll ``hub status`` on ``via`` until replica ``name`` leads; returns the status."""
        deadline = time.monotonic() + timeout
        status: dict[str, Any] = {}
        with via.client() as client:
            while time.monotonic() < deadline:
                try:
                    status = client.hub_status()
                except Exception:
                    status = {}
                if status.get("leader") == self.api(name):
                    return status
                time.sleep(0.1)
        raise AssertionError(f"{name} did not lead within {timeout}s: {status}")

    def start(self) -> dict[str, Any]:
        """Start ``a``, then ``b``; returns ``hub status`` once ``a`` leads."""
        self.a.start_hub()
        self.b.start_hub()
        self.b.token = self.a.token     # one database, one set of API tokens
        return self.wait_leader(self.b, "a")

    def close(self) -> None:
        """Stop the agents, then both hubs."""
        self.a.close()
        self.b.close()

    def __enter__(self) -> Replicas:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_all_ended(client: Client, names: list[str], timeout: float = 180.0) -> dict[str, str]:
    """Poll until every named task is terminal; returns name -> state."""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        try:
            states = {t.name: t.state.value for t in client.list_tasks() if t.name in names}
        except Exception:
            time.sleep(0.5)
            continue
        if len(states) == len(names) and all(s in ("Succeeded", "Failed", "Cancelled")
                                              for s in states.values()):
            return states
        time.sleep(0.3)
    raise AssertionError(f"tasks not all ended after {timeout}s: {Counter(states.values())}")


def audit_once(client: Client, names: list[str]) -> Counter[str]:
    """Every task finished exactly once, or runs once, or waits with a reason; returns the
    outcome counts. A task that ran in two generations counts as ``twice``."""
    outcome: Counter[str] = Counter()
    for name in names:
        view = client.get_task(name)
        kinds = Counter(e.kind for e in view.events)
        ran = {e.generation for e in view.events if e.kind == "Running"}
        if len(ran) > 1 or kinds["Succeeded"] + kinds["Failed"] > 1:
            outcome["twice"] += 1
        elif view.state.value == "Succeeded":
            outcome["finished once"] += 1
        elif view.state.value == "Running":
            outcome["running once"] += 1
        elif view.state.value == "Queued" and view.message:
            outcome["queued with a reason"] += 1
        else:
            outcome[f"lost ({view.state.value})"] += 1
    return outcome
