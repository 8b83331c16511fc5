"""Fault injection against real hub and agent processes, and an audit of every task.

Used by ``tests/faults`` (each fault once, tens of tasks) and ``bench/faults.py`` (larger,
a markdown table and JSON): one implementation of every fault. A ``Scenario`` is a
``LocalStack`` hub with simulated clusters whose members log every copy start and stop,
each agent dialling the hub through its own ``Proxy`` (so a fault can drop or black-hole
one cluster's connection); for the hub's own faults it adds a standby hub on PostgreSQL, a
PostgreSQL server of its own, or a redis-server of its own. A ``TaskStream`` submits
batches over REST while the fault happens. A fault is one function ``(scenario, stream)
-> figures`` in ``FAULTS`` (``members``: 1, 2, 4, 5, 5b, 6, 7, 10; ``hubs``: 3, 8, 9);
its figures may carry ``checks``, named bools of what the fault must show.

``audit`` then checks every acknowledged task against the hub and the members' copy logs:
finished exactly once, running exactly once, or queued with a reason; ``lost`` and
``run_twice`` (two copies of one task running at the same moment, on any clusters, from
the members' own logs) must be 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .audit import Copy, Figures, audit, overlaps, read_copies
from .hubs import leader_kill, postgres_down, redis_down
from .members import (
    agent_freeze,
    agent_kill_for_good,
    agent_kill_restart,
    clock_skew,
    duplicate_reorder,
    failover_times,
    hub_kill_restart,
    on_cluster,
    partition,
    stream_drops,
)
from .proxy import Proxy
from .scenario import Scenario, Timing, fleet, wait_until
from .stream import TaskStream

__all__ = ["FAULTS", "Copy", "Fault", "Figures", "Proxy", "Scenario", "TaskStream", "Timing",
           "agent_kill_for_good", "audit", "failover_times", "fleet", "overlaps",
           "postgres_down",
           "read_copies", "run_fault", "wait_until"]


@dataclass(frozen=True)
class Fault:
    """A fault: its function, and how to set the scenario up for it."""

    run: Callable[[Scenario, TaskStream], Figures]
    agent_env: dict[str, str] = field(default_factory=dict)   # for cluster c0's agent
    timing: Timing | None = None                              # else the run's timing
    postgres: bool = False        # the store on a PostgreSQL server of the scenario's own
    standby: bool = False         # a second hub waiting on that database
    redis: bool = False           # --redis, with a redis-server of the scenario's own


# A lease that outlasts a 5 s restart or outage: the member keeps its copies meanwhile.
LONG_LEASE = Timing(member_lease=15.0, failover_margin=2.0)

FAULTS: dict[str, Fault] = {
    "1 agent kill -9, restart after 5 s": Fault(agent_kill_restart, timing=LONG_LEASE),
    "2 agent kill -9 for good": Fault(agent_kill_for_good),
    "3 leading hub kill -9, standby waiting": Fault(
        leader_kill, timing=LONG_LEASE, postgres=True, standby=True),
    "4 only hub kill -9, restart": Fault(hub_kill_restart),
    "5 agent SIGSTOP past lease, SIGCONT": Fault(agent_freeze),
    "5b member cut off (agent runs)": Fault(partition),
    "6 stream dropped 20 times": Fault(stream_drops),
    "7 messages duplicated and reordered": Fault(
        duplicate_reorder, {"FUYAO_AGENT_FAULTS": "duplicate,reorder"}),
    "8 PostgreSQL down 5 s": Fault(postgres_down, timing=LONG_LEASE, postgres=True),
    "9 Redis down": Fault(redis_down, redis=True),
    "10 agent clock 10 min off": Fault(clock_skew, {"FUYAO_AGENT_CLOCK_SKEW_SECONDS": "600"}),
}


def run_fault(name: str, home: Path, *, clusters: int = 2, nodes: int = 4, batch: int = 5,
              every: float = 0.3, tasks: int = 40, durations: tuple[float, ...] = (6, 10, 15),
              timing: Timing | None = None, redis_down_s: float = 5.0) -> Figures:
    """Run one fault with a task stream flowing, let things settle, audit every task.
    ``redis_down_s``: how long fault 9 keeps Redis down (the bench: 30 s)."""
    fault = FAULTS[name]
    scenario = Scenario(home, clusters=clusters, nodes=nodes,
                        timing=fault.timing or timing or Timing(), postgres=fault.postgres,
                        standby=fault.standby, redis=fault.redis, redis_down_s=redis_down_s)
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
