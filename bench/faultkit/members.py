"""Faults of a member and its agent (1, 2, 4, 5, 5b, 6, 7, 10): each ``(scenario, stream)
-> figures``, listed in ``faultkit.FAULTS``."""

from __future__ import annotations

import signal
import time
from typing import Any

from e2e_bench import HubMetrics, breakdown  # beside faultkit, in bench/

from .scenario import Scenario, wait_until
from .stream import TaskStream

Figures = dict[str, Any]


def on_cluster(scenario: Scenario, cluster: str) -> list[str]:
    """Names of tasks the hub has placed on or running in ``cluster`` (filtered by state,
    which the hub answers from memory: polling it does not load the store)."""
    with scenario.client() as client:
        return [v.name for state in ("Placed", "Running")
                for v in client.list_tasks(state=state, cluster=cluster)]


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
    """2. kill -9 an agent for good: silence to all its tasks placed, then running,
    elsewhere. Timed from the kill to the hub's own event times (the ``Placed`` and
    ``Running`` events of each task's new generation), so how often this polls does not
    count; the polling is kept light (filtered lists the hub answers from memory, every
    0.25 s from a second before the grace)."""
    stream.stop()
    with s.client() as client:
        lost = {v.name: v.generation for state in ("Placed", "Running")
                for v in client.list_tasks(state=state, cluster="c0")}
    metrics = HubMetrics(s.stack.health_port)
    before = metrics.scrape()
    killed = time.time()
    s.signal_agent("c0", signal.SIGKILL)

    def moved() -> bool:
        # One-task pages first: listing 10,000 queued tasks every 0.25 s took a large share
        # of the hub the failover is timing. The full list only if a queued task is not one
        # of the lost (a stream task that fits nowhere).
        with s.client() as client:
            if any(client.list_tasks(state=state, cluster="c0", limit=1)
                   for state in ("Placed", "Running")):
                return False
            first = client.list_tasks(state="Queued", limit=1)
            if not first:
                return True
            if first[0].name in lost:
                return False
            queued = {v.name for v in client.list_tasks(state="Queued")}
        return not queued & lost.keys()
    time.sleep(max(0.0, s.timing.grace - 1.0))     # nothing can move before the grace
    wait_until(moved, timeout=s.timing.grace + 300, step=0.25)
    s.wait_settled(timeout=300)
    times = failover_times(s, lost)
    placed, running = times["Placed"], times["Running"]
    grace = s.timing.grace
    figures: Figures = {"moved": len(lost), "grace_s": grace}
    if placed:
        figures.update(failover_s=round(max(placed) - killed, 2),
                       over_grace_s=round(max(placed) - killed - grace, 2))
    if running:
        figures.update(running_s=round(max(running) - killed, 2),
                       running_over_grace_s=round(max(running) - killed - grace, 2))
    figures["timeline"] = timeline(times, killed + grace)
    # where the re-placed tasks' time went from their cycle to Running, by the hub's stage
    # histogram (hub/stages.py; the few stream tasks placed meanwhile count too; "queue"
    # is left out: it counts from a task's first submit, minutes before its re-queue)
    figures["stages_mean_ms"] = {stage: row["mean_ms"] for stage, row
                                 in breakdown(before, metrics.scrape()).items()
                                 if stage != "queue"}
    # The hub's clock starts at the last heartbeat it heard, up to one interval before the
    # kill: it must not have re-placed anything before the grace had passed since then.
    figures["checks"] = {"waited out the grace": bool(placed) and min(placed) - killed
                         >= grace - s.timing.heartbeat}
    return figures


def failover_times(s: Scenario, lost: dict[str, int]) -> dict[str, list[float]]:
    """Unix times of each lost task's first ``Requeued`` event in the generation it was lost
    in, and its first ``Placed`` and ``Running`` events in a newer one (the hub's own clock:
    the same machine's), by kind."""
    times: dict[str, list[float]] = {"Requeued": [], "Placed": [], "Running": []}
    with s.client() as client:
        for name, generation in lost.items():
            events = client.get_task(name).events
            for kind, at in (
                    ("Requeued", [e.at.timestamp() for e in events
                                  if e.kind == "Requeued" and e.generation == generation]),
                    ("Placed", [e.at.timestamp() for e in events
                                if e.kind == "Placed" and e.generation > generation]),
                    ("Running", [e.at.timestamp() for e in events
                                 if e.kind == "Running" and e.generation > generation])):
                times[kind] += [min(at)] if at else []
    return times


def timeline(times: dict[str, list[float]], due: float) -> dict[str, list[float]]:
    """Where a failover's time went: for each event kind, seconds past the grace (``due``,
    a Unix time) at which the first, the median and the last lost task got it."""
    out: dict[str, list[float]] = {}
    for kind, at in times.items():
        if at:
            at = sorted(at)
            out[kind.lower()] = [round(at[0] - due, 3), round(at[len(at) // 2] - due, 3),
                                 round(at[-1] - due, 3)]
    return out


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
    return {"not_ready_samples": flaps, "checks": {"never left Ready": flaps == 0}}
