"""One active task in the hub's memory, and the small pure helpers around it.

``ActiveTask`` is the mutable working copy of a task that has not ended; ``TaskBook``
(``hub.taskbook``) owns them and persists every change. The helpers build what is sent to
agents (``place_command``, ``cancel_command``) and what is written to the store
(``task_update``; a placement's stored scores are ``hub.scorerows``'), and snapshot a task
so a failed write can be undone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from typing import Any

from pydantic import BaseModel

from fuyao.catalog import DEFAULT_CATALOG
from fuyao.labels import GPU_MODEL, NPU_MODEL
from fuyao.selector import Selector, parse_selector
from fuyao.spec import TaskRequests, TaskSpec, TaskState
from fuyao.wire.v1 import agent_pb2 as pb
from hub.catalogs import member_names
from hub.placement.framework import PlacementRequest
from hub.scorerows import frozen as frozen_scores
from hub.store import TaskRecord, TaskUpdate

Command = tuple[str, pb.HubMessage]   # (cluster, message) to send once persisted

PHASE_NAMES = {
    pb.TASK_PHASE_ACCEPTED: "Accepted",
    pb.TASK_PHASE_BOUND: "Bound",
    pb.TASK_PHASE_RUNNING: "Running",
    pb.TASK_PHASE_SUCCEEDED: "Succeeded",
    pb.TASK_PHASE_FAILED: "Failed",
    pb.TASK_PHASE_UNSCHEDULABLE: "Unschedulable",
    pb.TASK_PHASE_CANCELLED: "Cancelled",
}
TERMINAL_PHASES = {pb.TASK_PHASE_SUCCEEDED, pb.TASK_PHASE_FAILED, pb.TASK_PHASE_CANCELLED}
UNBOUND_PHASES = {pb.TASK_PHASE_ACCEPTED, pb.TASK_PHASE_UNSCHEDULABLE}
# Fields whose change the task's map is told of (``hub.taskindex``: what it files tasks by,
# and what the queue ledger charges by).
WATCHED = frozenset({"state", "cluster", "generation", "queue", "unschedulable_since"})


@dataclass
class ActiveTask:
    """A non-terminal task and the hub's working state for it."""

    id: str
    name: str
    spec: TaskSpec
    state: TaskState
    queue: str
    priority: int
    seq: int
    created_at: datetime
    updated_at: datetime
    cluster: str | None = None
    node: str | None = None
    generation: int = 0
    message: str = ""
    reasons: dict[str, str] = field(default_factory=dict)
    scores: Sequence[Any] = ()   # the stored form, as tuples: ``hub.scorerows``
    owner: str = ""
    parent: str | None = None         # a part's divided task (``hub.division``)
    failover: bool = False            # next placement may use the headroom reserve
    avoid: set[str] = field(default_factory=set)   # clusters that could not schedule it
    unschedulable_since: float | None = None
    dispatched_at: float | None = None   # monotonic time its PlaceTask went out to be sent
    stored_at: float | None = None    # wall time its submit was durable (None: loaded)
    saving: bool = False              # a re-queue is being written: not placeable yet
    _request: PlacementRequest | None = None
    _watcher: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in WATCHED:
            watcher = self.__dict__.get("_watcher")
            if watcher is not None:
                watcher()

    def assign(self, changes: Mapping[str, Any]) -> None:
        """Set several fields at once, as setting each would (the watcher called once if any
        of them is ``WATCHED``): a placement or a re-queue sets about ten, and each
        ``__setattr__`` through Python was a measurable part of staging 10,000 of them."""
        self.__dict__.update(changes)
        if not WATCHED.isdisjoint(changes):
            watcher = self.__dict__.get("_watcher")
            if watcher is not None:
                watcher()

    def watch(self, watcher: Callable[[], None] | None) -> None:
        """Call ``watcher`` whenever a ``WATCHED`` field is set (None: stop)."""
        self._watcher = watcher

    @classmethod
    def from_record(cls, rec: TaskRecord, spec: TaskSpec | None = None) -> ActiveTask:
        """Rebuild from the store; ``spec``: the validated spec ``rec.spec`` was dumped from
        (a submit), kept as the store would give it back (``stored_spec``) instead of
        validated again from its dump."""
        return cls(
            id=rec.id, name=rec.name,
            spec=TaskSpec.model_validate(rec.spec) if spec is None else stored_spec(spec),
            state=TaskState(rec.state), queue=rec.queue, priority=rec.priority, seq=rec.seq,
            created_at=rec.created_at, updated_at=rec.updated_at, cluster=rec.cluster,
            node=rec.node, generation=rec.generation, message=rec.message,
            reasons=dict(rec.reasons), scores=frozen_scores(rec.scores), owner=rec.owner,
            parent=rec.parent,
        )

    @property
    def divisible(self) -> bool:
        """May it be split across clusters when no one cluster takes it whole? (``gang:
        false`` with more than one replica, not itself a part: ``hub.division``)"""
        spec = self.spec
        return spec.replicas > 1 and not spec.gang and self.parent is None

    def request(self) -> PlacementRequest:
        """What the scheduler is asked for this task (built once, flags applied per attempt)."""
        base = self._base()
        if base.failover == self.failover and base.exclude == frozenset(self.avoid):
            return base
        self._request = base.flagged(self.failover, frozenset(self.avoid))
        return self._request

    def requests(self) -> TaskRequests:
        """The spec's resource requests, parsed once (the scheduler's request carries them)."""
        return self._base().requests

    def _base(self) -> PlacementRequest:
        if self._request is None:
            self._request = placement_request(self.id, self.spec, self.priority)
        return self._request

    def to_record(self) -> TaskRecord:
        """The store's record of this task as it is now."""
        return TaskRecord(
            id=self.id, name=self.name, spec=self.spec.model_dump(mode="json"),
            state=self.state.value, queue=self.queue, priority=self.priority, seq=self.seq,
            created_at=self.created_at, updated_at=self.updated_at, cluster=self.cluster,
            node=self.node, generation=self.generation, message=self.message,
            reasons=dict(self.reasons), scores=list(self.scores), owner=self.owner,
            parent=self.parent,
        )


def stored_spec(spec: TaskSpec) -> TaskSpec:
    """``spec`` as ``TaskSpec.model_validate(spec.model_dump(mode="json"))`` gives it back,
    without validating it again (36 us a task at submit, 3% of the hub in the e2e bench).

    The values of a validated spec read back unchanged (every validator returns its input
    or rejects it; a quantity keeps its int, float or str; a profile's ``model_copy`` sets
    ``profile_version`` to None only): what differs is which fields count as set, all of
    them after the dump. The copy says so. A spec with a nested model (a preference, a
    toleration) not every field of which was set is validated from its dump instead. The
    hypothesis property ``tests/unit/test_stored_spec.py`` holds the two to the same
    values, types, dumps and set fields. The copy is shallow: it shares its lists and dicts
    with ``spec``, which its one caller (``Hub.submit``, a request's body) drops after.
    """
    if not all(_all_set(v) for v in spec.__dict__.values() if isinstance(v, list) and v):
        return TaskSpec.model_validate(spec.model_dump(mode="json"))
    kept = spec.model_copy()
    object.__setattr__(kept, "__pydantic_fields_set__", set(TaskSpec.model_fields))
    return kept


def _all_set(items: list[Any]) -> bool:
    """True unless a model among ``items`` leaves a field unset (or nests another)."""
    return not any(
        isinstance(item, BaseModel) and (
            len(item.model_fields_set) != len(type(item).model_fields)
            or any(isinstance(v, (BaseModel, list, dict)) for v in item.__dict__.values()))
        for item in items)


def placement_request(task_id: str, spec: TaskSpec, priority: int) -> PlacementRequest:
    """The scheduler's question for a task spec (also asked by dry-runs and explain)."""
    return PlacementRequest(
        task_id=task_id, name=spec.name, requests=spec.requests(),
        selector=parse_selector(spec.effective_selector()), priority=priority,
        cluster_selector=parse_selector(spec.cluster_selector) if spec.cluster_selector
        else None,
        cluster_preference=tuple((parse_selector(p.selector), p.weight)
                                 for p in spec.cluster_preference),
        tolerations=tuple(spec.tolerations),
    )


def member_selector(selector: str, model: str | None, gpu_milli: int) -> str:
    """The node selector the member binds with: the task's own, plus the accelerator model
    the hub's fit chose for a GPU task. Without the pin a member is free to bind another
    model than the one the hub reserved and checked headroom on (its best fit need not be
    the hub's), and the hub's view of every model drifts from the member's."""
    if not gpu_milli or not model:
        return selector
    entry = DEFAULT_CATALOG.get(model)
    key = NPU_MODEL if entry is not None and entry.kind == "npu" else GPU_MODEL
    names = member_names(model)
    if len(names) > 1:   # a hub alias renamed what the member reported: pin its names
        kept = Selector(tuple(r for r in parse_selector(selector).requirements
                              if r.key not in (GPU_MODEL, NPU_MODEL)))
        selector = str(kept)
        pin = f"{key} in ({', '.join(names)})"
    else:
        pin = f"{key} = {model}"
    return f"{selector}, {pin}" if selector.strip() else pin


def workload_fields(task: ActiveTask, model: str | None = None) -> dict[str, Any]:
    """The member-side description of a task's workload, as ``pb.TaskWorkload``'s fields;
    ``model`` is the accelerator model of the hub's fit, pinned in the selector (see
    ``member_selector``)."""
    req, spec = task.requests(), task.spec
    return {
        "image": spec.image, "command": spec.command, "cpu_milli": req.cpu_milli,
        "memory_mib": req.memory_mib, "gpu_milli": req.gpu_milli,
        "gpu_memory_mib": req.gpu_memory_mib, "gpu_mem_mib": req.gpu_mem_mib,
        "selector": member_selector(spec.effective_selector(), model,
                                    req.gpu_milli or req.gpu_mem_mib),
        "replicas": spec.replicas, "duration_seconds": spec.duration_seconds(),
        "priority": task.priority, "failover": spec.failover,
    }


# The commands below are built from dicts in one constructor call: a message built from
# nested message objects is copied into its parent, field by field, at each level (a
# PlaceTask that way took 1.7x the CPU, a CancelTask 1.5x; a failover builds 10,000 of each).

def place_command(task: ActiveTask, cluster: str, model: str | None = None) -> Command:
    """A PlaceTask of ``task``'s current generation on ``cluster`` (``model``: the fit's)."""
    return (cluster, pb.HubMessage(place={
        "task_id": task.id, "generation": task.generation, "name": task.name,
        "workload": workload_fields(task, model)}))


def cancel_command(cluster: str, task_id: str, generation: int, reason: str,
                   grace: int = 0) -> Command:
    """A CancelTask for every copy of ``task_id`` up to ``generation`` on ``cluster``
    (``grace``: seconds the member lets it stop; 0 = the member's default)."""
    return (cluster, pb.HubMessage(cancel={"task_id": task_id, "generation": generation,
                                           "reason": reason, "grace_seconds": grace}))


def task_update(task: ActiveTask, *fields: str) -> TaskUpdate:
    values = {f: getattr(task, f) for f in fields}
    if "state" in values:
        values["state"] = task.state.value
    return TaskUpdate(task.id, values)


SNAPSHOT_FIELDS = ("state", "cluster", "node", "generation", "failover", "reasons", "scores",
                    "message", "updated_at", "unschedulable_since", "dispatched_at")


Snapshot = tuple[Any, ...]   # the values of ``SNAPSHOT_FIELDS``, in that order
_snapshot = attrgetter(*SNAPSHOT_FIELDS)


def snapshot(task: ActiveTask) -> Snapshot:
    """What a transition changes of ``task``, to ``restore`` if its write fails."""
    snap: Snapshot = _snapshot(task)
    return snap


def restore(task: ActiveTask, snap: Snapshot) -> None:
    """``task``'s ``SNAPSHOT_FIELDS`` set back to ``snap``."""
    task.assign(dict(zip(SNAPSHOT_FIELDS, snap, strict=True)))
