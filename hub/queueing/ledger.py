"""``Ledger``: each queue's use kept from one placement cycle to the next, re-charged only
for the tasks whose charge changed.

``Queueing`` (``hub.queueing.queueing``) syncs it at every cycle's ``begin`` and for the
queue views. ``sync`` compares a task with what it was charged (queue, cluster, placement
generation) and charges or uncharges only the differences: a task's demand is computed once
per placement, not once per cycle. Over the hub's ``ActiveTasks`` (``hub.taskindex``) it
looks only at the tasks put in, taken out or changed since the last sync (the map's
``feed``), plus any it dropped on request; over any other mapping, and the first time, it
compares every task. ``recount`` is the uncached rule it must equal
(a hypothesis test in ``tests/queueing`` holds them equal over random admits, placements,
finishes, preemptions and failovers). Uncharging can leave zero entries where a recount has
none; every reader treats the two alike (quota, share and view code read ``.get(r, 0)`` and
show only non-zero use), and ``nonzero`` compares them so.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from hub.activetask import ActiveTask
from hub.queueing.eviction import ADMITTED
from hub.queueing.quota import Usage, Vector
from hub.taskindex import ActiveTasks

NeedOf = Callable[[ActiveTask], Vector]
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Charge:
    """What one admitted task is charged: where, for which placement, how much."""

    queue: str
    cluster: str
    generation: int
    need: Vector


def charged(task: ActiveTask) -> bool:
    """Does the task count in its queue's use? (Placed or Running on a cluster; a divided
    task has no cluster: its parts are charged.)"""
    return task.state in ADMITTED and task.cluster is not None


def recount(tasks: Mapping[str, ActiveTask], need_of: NeedOf) -> Usage:
    """Every queue's use summed from scratch (the rule ``Ledger.sync`` keeps)."""
    usage = Usage()
    for task in tasks.values():
        if charged(task):
            usage.charge(task.queue, task.cluster, need_of(task))
    return usage


class Ledger:
    """The use of every queue and what each admitted task adds to it."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.charges: dict[str, Charge] = {}
        self._source: Mapping[str, ActiveTask] | None = None   # the map its feed is of
        self._changed: set[str] = set()       # that map's feed: ids changed since a sync
        self._dropped: set[str] = set()       # dropped by ``drop`` since a sync

    def sync(self, tasks: Mapping[str, ActiveTask], need_of: NeedOf) -> Usage:
        """Bring the use up to date with ``tasks`` (the active tasks by id) and return it."""
        if tasks is not self._source or not isinstance(tasks, ActiveTasks):
            self._source = tasks
            self._changed = tasks.feed() if isinstance(tasks, ActiveTasks) else set()
            self._every(tasks, need_of)
        else:
            ids = self._changed | self._dropped
            self._changed.clear()
            for task_id in ids:
                task = tasks.get(task_id)
                if task is None:
                    self.drop(task_id)
                else:
                    self._sync_one(task, need_of)
        self._dropped.clear()
        return self.usage

    def _every(self, tasks: Mapping[str, ActiveTask], need_of: NeedOf) -> None:
        """Compare every task (and drop the charges of those no longer in ``tasks``)."""
        for task in tasks.values():
            self._sync_one(task, need_of)
        for task_id in [t for t in self.charges if t not in tasks]:
            self.drop(task_id)

    def _sync_one(self, task: ActiveTask, need_of: NeedOf) -> None:
        old = self.charges.get(task.id)
        if not charged(task):
            if old is not None:
                self.drop(task.id)
            return
        if old is not None:
            if (old.generation == task.generation and old.cluster == task.cluster
                    and old.queue == task.queue):
                return
            self.drop(task.id)
        assert task.cluster is not None
        charge = Charge(task.queue, task.cluster, task.generation, need_of(task))
        self.charges[task.id] = charge
        self.usage.charge(charge.queue, charge.cluster, charge.need)

    def drop(self, task_id: str) -> Vector:
        """Stop charging a task; returns what it was charged (empty if nothing)."""
        old = self.charges.pop(task_id, None)
        if old is None:
            return {}
        self._dropped.add(task_id)      # the next sync looks at it again
        self.usage.charge(old.queue, old.cluster, old.need, -1)
        return old.need

    def need(self, task_id: str) -> Vector:
        """What a task is charged now (empty if it is not)."""
        old = self.charges.get(task_id)
        return old.need if old is not None else {}


def copy_usage(usage: Usage) -> Usage:
    """A copy a cycle may charge without touching the ledger's."""
    return Usage({q: dict(v) for q, v in usage.total.items()},
                 {k: dict(v) for k, v in usage.by_cluster.items()})


def _strip(vectors: Mapping[K, Vector]) -> dict[K, Vector]:
    out = {k: {r: n for r, n in v.items() if n} for k, v in vectors.items()}
    return {k: v for k, v in out.items() if v}


def nonzero(usage: Usage) -> tuple[dict[str, Vector], dict[tuple[str, str], Vector]]:
    """The use with zero entries left out: what every reader of it can tell apart."""
    return _strip(usage.total), _strip(usage.by_cluster)
