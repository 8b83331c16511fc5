"""The seam between the agent's connection and a member backend (``sim`` or ``kube``).

The connection (``member_agent.connection``) calls ``start`` once with an event sink, reads
``nodes()`` / ``tasks()`` for full inventories, and forwards hub commands to ``place`` and
``cancel``. A backend reports what happens, in order, through the sink: ``NodesChanged``
whenever a node's labels or free resources change and ``TaskChanged`` as a task copy moves
through its phases. A backend emits the ``NodesChanged`` that binding (or completion) causes
before the matching ``TaskChanged``: the hub relies on that order.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol, cast

from fuyao.inventory import NodeInfo
from fuyao.wire.v1 import agent_pb2 as pb
from member_agent.faults import CLOCK_SKEW_MS


class Phase(IntEnum):
    """A task copy's phase, numbered as the wire's ``TaskPhase``."""

    ACCEPTED = pb.TASK_PHASE_ACCEPTED
    BOUND = pb.TASK_PHASE_BOUND
    RUNNING = pb.TASK_PHASE_RUNNING
    SUCCEEDED = pb.TASK_PHASE_SUCCEEDED
    FAILED = pb.TASK_PHASE_FAILED
    UNSCHEDULABLE = pb.TASK_PHASE_UNSCHEDULABLE
    CANCELLED = pb.TASK_PHASE_CANCELLED

    @property
    def terminal(self) -> bool:
        """True once the copy will never run again."""
        return self in (Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED)


def now_ms() -> int:
    """Wall-clock milliseconds, as reports carry them."""
    return int(time.time() * 1000) + CLOCK_SKEW_MS


@dataclass(frozen=True, slots=True)
class TaskStatus:
    """Where one copy (task id + generation) of a task stands in this member."""

    task_id: str
    generation: int
    phase: Phase
    node: str = ""
    reason: str = ""
    at_unix_ms: int = 0

    def to_proto(self) -> pb.TaskReport:
        """Wire form."""
        return pb.TaskReport(
            task_id=self.task_id,
            generation=self.generation,
            phase=cast(pb.TaskPhase, int(self.phase)),
            node=self.node,
            reason=self.reason,
            at_unix_ms=self.at_unix_ms,
        )


@dataclass(frozen=True, slots=True)
class NodesChanged:
    """Nodes whose view changed (full new state) and nodes that are gone."""

    upserted: tuple[NodeInfo, ...] = ()
    removed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TaskChanged:
    """A task copy moved to a new phase."""

    status: TaskStatus


BackendEvent = NodesChanged | TaskChanged
EventSink = Callable[[BackendEvent], None]


def workload_name(task_id: str, generation: int) -> str:
    """The member-side name of a task copy: ``fy-<first 8 of id>-<hash>-g<generation>``.

    The 6-hex hash of the whole id keeps ids that share a prefix (time-ordered ids do)
    apart; the name is a valid DNS-1123 label either way.
    """
    short = "".join(ch for ch in task_id.lower() if ch.isascii() and ch.isalnum())[:8]
    digest = hashlib.sha256(task_id.encode()).hexdigest()[:6]
    return f"fy-{short or 'task'}-{digest}-g{generation}"


class Backend(Protocol):
    """What the connection needs from a member backend."""

    name: str

    def cluster_labels(self) -> dict[str, str]:
        """Labels describing the whole cluster (sent in ``Hello``)."""
        ...

    async def start(self, sink: EventSink) -> None:
        """Load the member's state and start emitting events to ``sink``."""
        ...

    async def stop(self) -> None:
        """Stop timers and watches; running workloads are left alone."""
        ...

    def nodes(self) -> list[NodeInfo]:
        """Every node as it stands now."""
        ...

    def tasks(self) -> list[TaskStatus]:
        """Every task copy the member runs or finished recently."""
        ...

    async def place(self, command: pb.PlaceTask) -> None:
        """Create the workload for a task copy (idempotent per task id + generation)."""
        ...

    async def cancel(self, task_id: str, generation: int, reason: str = "") -> None:
        """Stop the task's copies with this generation or older and free their resources."""
        ...
