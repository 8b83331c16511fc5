"""Fault injection against real hub and agent processes, and an audit of every task.

Used by ``tests/faults`` (each fault once, tens of tasks) and ``bench/faults.py`` (larger,
a markdown table). A ``Scenario`` is a ``LocalStack`` hub with simulated clusters whose
members log every copy start and stop, each agent dialling the hub through its own
``Proxy`` (so a test can drop or black-hole one cluster's connection), and a ``TaskStream``
submitting batches over REST while the fault happens. A fault is one function
``(scenario) -> figures`` in ``FAULTS``: adding another is one small function.

``audit`` then checks every acknowledged task against the hub and the members' copy logs:
finished exactly once, running exactly once, or queued with a reason; ``lost`` and
``run_twice`` (two copies of one task running at the same moment, on any clusters, from
the members' own logs) must be 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fuyao.errors import FuyaoError
from fuyaoctl.client import Client
from fuyaoctl.localstack import LocalStack, free_port

Figures = dict[str, Any]


# --- a TCP proxy per cluster -------------------------------------------------------------

class Proxy:
    """A TCP proxy to the hub's agent port, in its own thread; can drop or black-hole."""

    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self.target_port = target_port
        self.blackholed = False
        self.drops = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, "127.0.0.1", self.port))
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_w}
        await asyncio.gather(self._pipe(reader, up_w), self._pipe(up_r, writer),
                             return_exceptions=True)
        for w in (writer, up_w):
            self._writers.discard(w)
            w.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                if not self.blackholed:     # a partition: bytes vanish, nobody is told
                    writer.write(data)
                    await writer.drain()
        finally:
            writer.close()

    def _call(self, fn: Callable[[], None]) -> None:
        done = threading.Event()

        def run() -> None:
            fn()
            done.set()
        self._loop.call_soon_threadsafe(run)
        done.wait(10)

    def drop(self) -> None:
        """Close every connection through the proxy (the agent reconnects)."""
        def close_all() -> None:
            for w in list(self._writers):
                w.transport.abort()
        self.drops += 1
        self._call(close_all)

    def blackhole(self, on: bool) -> None:
        """Cut the cluster off (bytes dropped silently); healing drops the broken streams."""
        self.blackholed = on
        if not on:
            self.drop()

    def close(self) -> None:
        """Stop the proxy thread."""
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


# --- a stream of tasks -------------------------------------------------------------------

class TaskStream:
    """Submits ``batch`` tasks every ``every`` seconds until stopped, in a thread."""

    def __init__(self, url: str, *, batch: int, every: float, durations: tuple[float, ...],
                 prefix: str = "t", limit: int | None = None, failover: str | None = None) -> None:
        self.url = url
        self.batch, self.every, self.durations = batch, every, durations
        self.prefix, self.limit, self.failover = prefix, limit, failover
        self.acked: list[str] = []
        self.uncertain: list[str] = []     # the hub may or may not have stored them
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._n = 0

    def start(self) -> TaskStream:
        self._thread.start()
        return self

    def _spec(self) -> dict[str, Any]:
        self._n += 1
        spec: dict[str, Any] = {"name": f"{self.prefix}-{self._n}", "cpu": "1", "memory": "1Gi",
                                "duration": f"{self.durations[self._n % len(self.durations)]}s"}
        if self.failover:
            spec["failover"] = self.failover
        return spec

    def _run(self) -> None:
        with Client(self.url, timeout=5.0) as client:
            while not self._stop.is_set():
                if self.limit is not None and self._n >= self.limit:
                    return
                specs = [self._spec() for _ in range(self.batch)]
                try:
                    client.submit_tasks(specs)
                    self.acked += [s["name"] for s in specs]
                except FuyaoError:
                    self.uncertain += [s["name"] for s in specs]
                self._stop.wait(self.every)

    def stop(self) -> None:
        """Stop submitting (waits for the batch in flight)."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(30)

    def wait_done(self, timeout: float = 120.0) -> None:
        """Wait until a stream with a ``limit`` has submitted everything."""
        self._thread.join(timeout)


# --- the scenario ------------------------------------------------------------------------

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
            "unschedulable_timeout": "30s"}}


@dataclass
class Scenario:
    """A hub and ``clusters`` simulated members behind proxies, under one home."""

    home: Path
    clusters: int = 2
    nodes: int = 4
    timing: Timing = field(default_factory=Timing)
    stack: LocalStack = field(init=False)
    proxies: dict[str, Proxy] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)
    agent_env: dict[str, dict[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        config = self.home / "hub.yaml"
        self.home.mkdir(parents=True, exist_ok=True)
        config.write_text(yaml.safe_dump(self.timing.config()))
        self.stack = LocalStack(home=self.home / "stack", hub_args=["--config", str(config)],
                                agent_args=["--heartbeat-interval", str(self.timing.heartbeat)])
        self.names = [f"c{i}" for i in range(self.clusters)]

    def start(self) -> Scenario:
        """Start the hub, join every cluster and start its agent; wait until all Ready."""
        self.stack.start_hub()
        for name in self.names:
            self.proxies[name] = Proxy(self.stack.agent_port)
            self.stack.join(name)
            self.start_agent(name)
        self.stack.wait_ready(self.names, timeout=60)
        return self

    def start_agent(self, name: str) -> None:
        """(Re)start a cluster's agent, dialling the hub through the cluster's proxy."""
        nodes = fleet(self.home / f"{name}.yaml", self.nodes)
        env = self.agent_env.get(name)
        saved = {k: os.environ.get(k) for k in env or {}}
        os.environ.update(env or {})
        try:
            self.stack.start_agent(name, nodes, hub=f"127.0.0.1:{self.proxies[name].port}")
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

    def client(self) -> Client:
        return Client(self.stack.url, timeout=30.0)

    def stream(self, **kwargs: Any) -> TaskStream:
        """A started task stream against this hub."""
        return TaskStream(self.stack.url, **kwargs).start()

    def wait_settled(self, timeout: float = 120.0) -> None:
        """Wait until no task is Placed (dispatched, not yet running): every task then is
        Queued, Running or ended, which the audit can judge."""
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while time.monotonic() < deadline:
                with contextlib.suppress(FuyaoError):
                    if not client.list_tasks(state="Placed"):
                        return
                time.sleep(0.3)

    def close(self) -> None:
        """Stop everything (agents frozen by a fault are woken first)."""
        for name, proc in self.stack.agents.items():
            with contextlib.suppress(OSError):
                if proc.alive():
                    os.kill(proc.popen.pid, signal.SIGCONT)
            del name
        self.stack.close()
        for proxy in self.proxies.values():
            proxy.close()


# --- the audit ---------------------------------------------------------------------------

@dataclass
class Copy:
    """One copy of a task in one member, from its copy log."""

    cluster: str
    generation: int
    start: float
    stop: float | None = None
    reason: str = ""


def read_copies(paths: list[Path]) -> dict[str, list[Copy]]:
    """Every copy of every task, by task id, from the members' copy logs."""
    copies: dict[str, list[Copy]] = defaultdict(list)
    open_: dict[tuple[str, str, int], Copy] = {}
    lines = []
    for path in paths:
        if path.exists():
            lines += [json.loads(line) for line in path.read_text().splitlines() if line]
    for e in sorted(lines, key=lambda e: e["ts"]):
        key = (e["cluster"], e["task"], e["generation"])
        if e["event"] == "start":
            copy = Copy(e["cluster"], e["generation"], e["ts"])
            open_[key] = copy
            copies[e["task"]].append(copy)
        elif key in open_:
            copy = open_.pop(key)
            copy.stop, copy.reason = e["ts"], e["reason"]
    return copies


def overlaps(copies: list[Copy]) -> bool:
    """True if two copies ran at the same moment."""
    end = float("-inf")
    for copy in sorted(copies, key=lambda c: c.start):
        if copy.start < end:
            return True
        end = max(end, float("inf") if copy.stop is None else copy.stop)
    return False


def audit(scenario: Scenario, stream: TaskStream, attempts: int = 30) -> Figures:
    """Judge every task the stream got acknowledged (and any uncertain one the hub has).

    The hub's view and the copy logs are read one after the other while tasks keep
    finishing, so a copy that ends between the two reads looks inconsistent: such a
    snapshot is taken again, for up to ``attempts`` seconds (a loaded hub may be seconds
    behind its agents' reports); a real problem stays."""
    for _ in range(attempts - 1):
        result = _audit_once(scenario, stream)
        if not result["problems"]:
            return result
        time.sleep(1.0)
    return _audit_once(scenario, stream)


def _audit_once(scenario: Scenario, stream: TaskStream) -> Figures:
    with scenario.client() as client:
        views = {v.name: v for v in client.list_tasks()}
    copies = read_copies([scenario.stack.copy_log(n) for n in scenario.names])
    names = stream.acked + [n for n in stream.uncertain if n in views]
    counts: dict[str, int] = defaultdict(int)
    problems: list[str] = []
    for name in names:
        view = views.get(name)
        if view is None:
            counts["lost"] += 1
            problems.append(f"{name}: acknowledged but unknown to the hub")
            continue
        mine = copies.get(view.id, [])
        if overlaps(mine):
            counts["run_twice"] += 1
            problems.append(f"{name}: two copies at once: {mine}")
        state = view.state.value
        if state == "Succeeded":
            finished = sum(c.reason == "succeeded" for c in mine)
            if finished == 1:
                counts["finished_once"] += 1
            elif finished > 1:
                # It finished during a partition, unseen, and its replacement finished too
                # before the first one's report arrived: run to completion twice, one after
                # the other (never at once). restart-elsewhere is at-least-once.
                counts["finished_twice"] += 1
            else:
                counts["lost"] += 1
                problems.append(f"{name}: Succeeded but copies {mine}")
        elif state == "Running":
            running = [c for c in mine if c.stop is None]
            ok = [(c.cluster, c.generation) for c in running] == [(view.cluster, view.generation)]
            counts["running_once" if ok else "lost"] += 1
            if not ok:
                problems.append(f"{name}: Running on {view.cluster} g{view.generation} but "
                                f"copies {mine}")
        elif state == "Queued" and view.message:
            counts["queued_with_reason"] += 1
        else:
            counts["lost"] += 1
            problems.append(f"{name}: {state} ({view.message})")
    return {"tasks": len(names), "finished_once": counts["finished_once"],
            "running_once": counts["running_once"],
            "queued_with_reason": counts["queued_with_reason"],
            "finished_twice": counts["finished_twice"], "lost": counts["lost"],
            "run_twice": counts["run_twice"], "problems": problems[:20]}


# --- the faults ----------------------------------------------------------------------------

def on_cluster(scenario: Scenario, cluster: str) -> list[str]:
    """Names of tasks the hub has placed on or running in ``cluster``."""
    with scenario.client() as client:
        return [v.name for v in client.list_tasks(cluster=cluster)
                if v.state.value in ("Placed", "Running")]


def wait_until(check: Callable[[], bool], timeout: float, step: float = 0.05) -> float:
    """Poll ``check`` until true; returns the monotonic time it became true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(FuyaoError):
            if check():
                return time.monotonic()
        time.sleep(step)
    raise TimeoutError(f"condition not met in {timeout:.0f}s")


def running_on(s: Scenario, cluster: str) -> dict[str, int]:
    """Tasks Running on ``cluster``, with their generations."""
    with s.client() as client:
        return {v.name: v.generation for v in client.list_tasks(cluster=cluster)
                if v.state.value == "Running"}


def agent_kill_restart(s: Scenario, stream: TaskStream) -> Figures:
    """1. kill -9 an agent mid-dispatch, restart it after 5 s: the member kept its copies
    (the lease outlasts the restart here), the new agent adopts them, nothing re-runs."""
    before = running_on(s, "c0")
    s.signal_agent("c0", signal.SIGKILL)
    time.sleep(5)
    s.start_agent("c0")
    s.stack.wait_ready(["c0"], timeout=60)
    with s.client() as client:
        after = {v.name: v for v in client.list_tasks()}
    adopted = sum(1 for name, gen in before.items()
                  if after[name].cluster == "c0" and after[name].generation == gen)
    return {"running_at_kill": len(before), "adopted": adopted}


def agent_kill_for_good(s: Scenario, stream: TaskStream) -> Figures:
    """2. kill -9 an agent for good: silence to all its tasks running elsewhere."""
    stream.stop()
    lost = on_cluster(s, "c0")
    silent = time.monotonic()
    s.signal_agent("c0", signal.SIGKILL)

    def moved() -> bool:
        with s.client() as client:
            views = {v.name: v for v in client.list_tasks()}
        return all(views[n].cluster not in (None, "c0") or views[n].state.terminal
                   for n in lost)
    done = wait_until(moved, timeout=s.timing.grace + 120)
    return {"moved": len(lost), "failover_s": round(done - silent, 2),
            "grace_s": s.timing.grace, "over_grace_s": round(done - silent - s.timing.grace, 2)}


def hub_kill_restart(s: Scenario, stream: TaskStream) -> Figures:
    """4. kill -9 the only hub mid-batch and restart it."""
    s.stack.stop_hub(kill=True)
    time.sleep(2)
    s.stack.start_hub()
    s.stack.wait_ready(s.names, timeout=60)
    return {}


def agent_freeze(s: Scenario, stream: TaskStream) -> Figures:
    """5. SIGSTOP an agent past the lease and the eviction timeout, then SIGCONT it."""
    s.signal_agent("c0", signal.SIGSTOP)
    time.sleep(s.timing.grace + 4)
    s.signal_agent("c0", signal.SIGCONT)
    s.stack.wait_ready(["c0"], timeout=60)
    return {"frozen_s": s.timing.grace + 4}


def partition(s: Scenario, stream: TaskStream) -> Figures:
    """5b. the member cut off from the hub while its agent keeps running."""
    s.proxies["c0"].blackhole(True)
    time.sleep(s.timing.grace + 4)
    s.proxies["c0"].blackhole(False)
    s.stack.wait_ready(["c0"], timeout=60)
    return {"cut_off_s": s.timing.grace + 4}


def stream_drops(s: Scenario, stream: TaskStream) -> Figures:
    """6. the gRPC stream dropped and reconnected 20 times during a batch."""
    for _ in range(20):
        s.proxies["c0"].drop()
        time.sleep(0.4)
    s.stack.wait_ready(["c0"], timeout=60)
    return {"drops": s.proxies["c0"].drops}


def duplicate_reorder(s: Scenario, stream: TaskStream) -> Figures:
    """7. agent messages duplicated and reordered (the agent's fault hook)."""
    time.sleep(4)
    return {}


def clock_skew(s: Scenario, stream: TaskStream) -> Figures:
    """10. an agent whose clock is 10 minutes off never makes its cluster flap."""
    flaps = 0
    deadline = time.monotonic() + 3 * s.timing.grace
    with s.client() as client:
        while time.monotonic() < deadline:
            states = {c.name: c.state.value for c in client.list_clusters()}
            flaps += states.get("c0") != "Ready"
            time.sleep(0.1)
    return {"not_ready_samples": flaps}


@dataclass(frozen=True)
class Fault:
    """A fault: its function, and how to set the scenario up for it."""

    run: Callable[[Scenario, TaskStream], Figures]
    agent_env: dict[str, str] = field(default_factory=dict)   # for cluster c0's agent
    timing: Timing | None = None                              # else the run's timing


FAULTS: dict[str, Fault] = {
    "1 agent kill -9, restart after 5 s": Fault(
        agent_kill_restart, timing=Timing(member_lease=15.0, failover_margin=2.0)),
    "2 agent kill -9 for good": Fault(agent_kill_for_good),
    "4 only hub kill -9, restart": Fault(hub_kill_restart),
    "5 agent SIGSTOP past lease, SIGCONT": Fault(agent_freeze),
    "5b member cut off (agent runs)": Fault(partition),
    "6 stream dropped 20 times": Fault(stream_drops),
    "7 messages duplicated and reordered": Fault(
        duplicate_reorder, {"FUYAO_AGENT_FAULTS": "duplicate,reorder"}),
    "10 agent clock 10 min off": Fault(clock_skew, {"FUYAO_AGENT_CLOCK_SKEW_SECONDS": "600"}),
}


def run_fault(name: str, home: Path, *, clusters: int = 2, nodes: int = 4, batch: int = 5,
              every: float = 0.3, tasks: int = 40, durations: tuple[float, ...] = (6, 10, 15),
              timing: Timing | None = None) -> Figures:
    """Run one fault with a task stream flowing, let things settle, audit every task."""
    fault = FAULTS[name]
    scenario = Scenario(home, clusters=clusters, nodes=nodes,
                        timing=fault.timing or timing or Timing())
    scenario.agent_env["c0"] = dict(fault.agent_env)
    started = time.monotonic()
    try:
        scenario.start()
        stream = scenario.stream(batch=batch, every=every, durations=durations, limit=tasks)
        # Let the first batches land on both clusters, then strike mid-stream.
        wait_until(lambda: len(stream.acked) >= min(tasks // 2, 20) and bool(on_cluster(
            scenario, "c0")), timeout=60)
        figures = fault.run(scenario, stream)
        stream.wait_done()
        scenario.wait_settled()
        result = audit(scenario, stream)
    finally:
        scenario.close()
    return {"fault": name, **result, **figures,
            "seconds": round(time.monotonic() - started, 1)}
