"""``Scenario``: a hub (or two) and simulated members as real processes, for one fault."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fuyao.errors import FuyaoError
from fuyaoctl.client import Client
from fuyaoctl.localstack import LocalStack

from .proxy import Proxy
from .stream import TaskStream


def fleet(path: Path, nodes: int, cpus: int = 16) -> Path:
    """A CPU cluster of ``nodes`` nodes."""
    pools = [{"name": "n", "count": nodes, "labels": {"kubernetes.io/arch": "amd64"},
              "allocatable": {"cpu": str(cpus), "memory": f"{cpus * 4}Gi", "pods": "110"}}]
    path.write_text(yaml.safe_dump({"nodePools": pools}))
    return path


@dataclass
class Timing:
    """The hub's failure-detection timings for a fault run (seconds)."""

    heartbeat: float = 0.5
    unknown_after: float = 2.0
    not_ready_after: float = 3.0
    eviction_timeout: float = 1.0
    member_lease: float = 4.0
    failover_margin: float = 1.0
    eviction_rate: float = 2000.0
    monitor_interval: float = 0.1

    @property
    def grace(self) -> float:
        """Silence after which the hub re-places a lost cluster's tasks."""
        return max(self.not_ready_after + self.eviction_timeout,
                   self.member_lease + self.failover_margin)

    def config(self) -> dict[str, Any]:
        return {"timings": {
            "unknown_after": f"{self.unknown_after}s",
            "not_ready_after": f"{self.not_ready_after}s",
            "eviction_timeout": f"{self.eviction_timeout}s",
            "member_lease": f"{self.member_lease}s",
            "failover_margin": f"{self.failover_margin}s",
            "eviction_rate": str(self.eviction_rate),
            "monitor_interval": f"{self.monitor_interval}s", "placement_interval": "0.2s",
            "unschedulable_timeout": "30s"},
            # The audit and the faults poll the REST API hard; the per-token limit is not
            # what is under test.
            "api_rate_limit": 0}


@dataclass
class Scenario:
    """A hub and ``clusters`` simulated members behind proxies, under one home.

    ``postgres``: the store on a PostgreSQL server of the scenario's own (a fault may halt
    it), else SQLite in the hub's home; ``standby``: a second hub on that database, waiting
    (agents get both addresses, ``--hub PROXY,STANDBY``); ``redis``: ``--redis`` with a
    redis-server of its own (a fault may stop it). The servers are started with the test
    suite's helpers (``tests/support``), imported only when a fault needs them."""

    home: Path
    clusters: int = 2
    nodes: int = 4
    timing: Timing = field(default_factory=Timing)
    postgres: bool = False
    standby: bool = False
    redis: bool = False
    redis_down_s: float = 5.0          # how long fault 9 keeps Redis down
    stack: LocalStack = field(init=False)          # hub "a", which starts as the leader
    second: LocalStack | None = field(init=False, default=None)   # hub "b", the standby
    api: LocalStack = field(init=False)            # the hub that serves REST now
    proxies: dict[str, Proxy] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    agent_env: dict[str, dict[str, str]] = field(default_factory=dict)
    pg: Any = field(init=False, default=None)          # tests.support.postgres.PostgresServer
    redis_server: Any = field(init=False, default=None)   # tests.support.redis.RedisServer

    def __post_init__(self) -> None:
        config = self.home / "hub.yaml"
        self.home.mkdir(parents=True, exist_ok=True)
        config.write_text(yaml.safe_dump(self.timing.config()))
        self.hub_args = ["--config", str(config)]
        self.stack = self._hub("stack")
        self.api = self.stack
        self.names = [f"c{i}" for i in range(self.clusters)]

    def _hub(self, name: str) -> LocalStack:
        return LocalStack(home=self.home / name, hub_args=self.hub_args,
                          agent_args=["--heartbeat-interval", str(self.timing.heartbeat)])

    def _servers(self) -> None:
        """Start the PostgreSQL and Redis servers the scenario asks for."""
        if self.postgres or self.standby:
            from tests.support.postgres import create_database, start_postgres
            # Durable commits: a fault halts it (a crash) and counts what was lost.
            self.pg = start_postgres(durable=True)
            self.stack.db_url = create_database(self.pg.url)
        if self.redis:
            from tests.support.redis import start_redis
            self.redis_server = start_redis()
            self.hub_args += ["--redis", self.redis_server.url]

    def start(self) -> Scenario:
        """Start the hub(s), join every cluster and start its agent; wait until all Ready."""
        self._servers()
        self.stack.start_hub()
        if self.standby:
            self.second = self._hub("standby")
            self.second.db_url = self.stack.db_url
            self.second.start_hub()
            self.second.token = self.stack.token   # one database, one set of API tokens
            self.wait_leader(self.stack)
        for name in self.names:
            self.proxies[name] = Proxy(self.stack.agent_port)
            self.stack.join(name)
            self.start_agent(name)
        self.stack.wait_ready(self.names, timeout=60)
        return self

    def wait_leader(self, hub: LocalStack, timeout: float = 60.0) -> dict[str, Any]:
        """Poll ``hub status`` (on any live replica) until ``hub`` leads; returns it."""
        address = f"127.0.0.1:{hub.api_port}"
        status: dict[str, Any] = {}

        def leads() -> bool:
            nonlocal status
            with Client(hub.url, token=self.stack.token, timeout=5.0) as client:
                status = client.hub_status()
            return status.get("leader") == address
        wait_until(leads, timeout, step=0.1)
        return status

    def start_agent(self, name: str) -> None:
        """(Re)start a cluster's agent, dialling the hub through the cluster's proxy (and
        the standby directly, if there is one)."""
        nodes = fleet(self.home / f"{name}.yaml", self.nodes)
        hubs = f"127.0.0.1:{self.proxies[name].port}"
        if self.second is not None:
            hubs += f",127.0.0.1:{self.second.agent_port}"
        env = self.agent_env.get(name)
        saved = {k: os.environ.get(k) for k in env or {}}
        os.environ.update(env or {})
        try:
            self.stack.start_agent(name, nodes, hub=hubs)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def signal_agent(self, name: str, sig: signal.Signals) -> None:
        """Send ``sig`` to a cluster's agent process (SIGKILL, SIGSTOP, SIGCONT)."""
        proc = self.stack.agents[name].popen
        os.kill(proc.pid, sig)
        if sig is signal.SIGKILL:
            proc.wait(10)

    def urls(self) -> list[str]:
        """Every hub's REST URL, the leader first."""
        return [self.api.url] + [h.url for h in (self.stack, self.second)
                                 if h is not None and h is not self.api]

    def client(self) -> Client:
        return Client(self.api.url, token=self.stack.token, timeout=30.0)

    def stream(self, **kwargs: Any) -> TaskStream:
        """A started task stream against this hub (and the standby, when the first fails)."""
        return TaskStream(self.urls(), token=self.stack.token, **kwargs).start()

    def wait_settled(self, timeout: float = 120.0) -> None:
        """Wait until no task is Placed (dispatched, not yet running): every task then is
        Queued, Running or ended, which the audit can judge."""
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while time.monotonic() < deadline:
                with contextlib.suppress(FuyaoError):
                    if not client.list_tasks(state="Placed", limit=1):
                        return
                time.sleep(0.3)

    def close(self) -> None:
        """Stop everything (agents frozen by a fault are woken first), then the servers."""
        for proc in self.stack.agents.values():
            with contextlib.suppress(OSError):
                if proc.alive():
                    os.kill(proc.popen.pid, signal.SIGCONT)
        self.stack.close()
        if self.second is not None:
            self.second.stop_hub()
        for proxy in self.proxies.values():
            proxy.close()
        if self.redis_server is not None:
            self.redis_server.close()
        if self.pg is not None:
            self.pg.stop()


def wait_until(check: Callable[[], bool], timeout: float, step: float = 0.05) -> float:
    """Poll ``check`` (a hub error counts as not yet) until true; returns the monotonic
    time it became true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(FuyaoError):
            if check():
                return time.monotonic()
        time.sleep(step)
    raise TimeoutError(f"condition not met in {timeout:.0f}s")
