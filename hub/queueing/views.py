"""What the queueing layer shows users: a queue's use against its quota and its fair share
(``queue list | describe``), and a queued task's place and the quota holding it (``task
list | describe | explain``).

Pure reads of ``Queueing``'s memory (``hub.queueing.queueing``), which calls ``queue_view``,
``task_hold`` and ``task_place`` for its public ``view``/``views``/``hold_for``/
``place_of``; nothing here writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fuyao.queues import QueueView, format_resource
from fuyao.spec import TaskState
from hub.activetask import ActiveTask
from hub.queueing.eviction import ADMITTED
from hub.queueing.quota import Usage, Vector, dominant_share
from hub.store import QueueRecord

if TYPE_CHECKING:
    from hub.queueing.queueing import Queueing


def _shown(vector: Vector) -> dict[str, str]:
    return {r: format_resource(r, v) for r, v in sorted(vector.items()) if v}


def queue_view(owner: Queueing, rec: QueueRecord, usage: Usage) -> QueueView:
    """One queue: settings, use against quota, dominant share now, and its fair share (its
    weight over the weights of its level's queues that have active tasks, itself included).
    """
    state = owner.book.states[rec.name]
    counts = {"queued": 0, "admitted": 0}
    active_queues: set[str] = set()
    for task in owner.tasks.active.values():
        active_queues.add(task.queue)
        if task.queue == rec.name:
            counts["admitted" if task.state in ADMITTED else "queued"] += 1
    level = [q for q in owner.states() if q.priority == state.priority
             and (q.name in active_queues or q.name == rec.name)]
    fair = state.weight / sum(q.weight for q in level)
    used = usage.of(rec.name)
    return QueueView(
        name=rec.name, priority=rec.priority, weight=rec.weight, quotas=rec.quotas,
        cluster_quotas=rec.cluster_quotas, borrow=rec.borrow, usage=_shown(used),
        cluster_usage={c: _shown(vec) for (q, c), vec in sorted(usage.by_cluster.items())
                       if q == rec.name and any(vec.values())},
        dominant_share=round(dominant_share(used, owner.totals()), 4),
        fair_share=round(fair, 4), created_at=rec.created_at, updated_at=rec.updated_at,
        **counts,
    )


def positions_now(owner: Queueing) -> Mapping[str, int]:
    """Each queued task's place in its queue now (the cycle's order inside a queue)."""
    return owner.tasks.positions()


PARKED = ("parked: no cluster could take it even with nothing running; tried again when a "
          "cluster joins or one's nodes or settings change")


def task_place(owner: Queueing, task: ActiveTask) -> tuple[int | None, str | None] | None:
    """A queued task's position in its queue and what holds it (``task_hold``'s
    ``position`` and ``held_by``); None when it is not Queued. What every task view shows,
    without the quota and usage figures only ``task explain`` reads: a submit's answer
    builds one view per task."""
    if task.state != TaskState.QUEUED:
        return None
    held = owner.holds.get(task.id) or (PARKED if owner.parking.parked(task) else None)
    return positions_now(owner).get(task.id), held


def task_hold(owner: Queueing, task: ActiveTask) -> dict[str, Any] | None:
    """The queue and quota state of a queued task; None when it is not Queued.

    ``{"queue", "position", "held_by", "quotas", "borrow", "usage", "reserved_cluster",
    "preempting"}``: ``position`` 1 is next in its queue; ``held_by`` the quota that holds
    it (e.g. ``queue team-a: gpu A100 quota 16, in use 16``), ``PARKED`` for a task set aside
    (``hub.queueing.parking``), or None; ``reserved_cluster`` a
    cluster kept for it (backfill or preemption); ``preempting`` the victims it waits for.
    """
    place = task_place(owner, task)
    if place is None:
        return None
    rec = owner.book.records.get(task.queue)
    plan = owner.preemption.preempting.get(task.id)
    return {
        "queue": task.queue,
        "position": place[0],
        "held_by": place[1],
        "quotas": dict(rec.quotas) if rec else {},
        "borrow": dict(rec.borrow) if rec else {},
        "usage": _shown(owner.usage.of(task.queue)),
        "reserved_cluster": next((c for c, h in owner.reserved.items()
                                  if h.task_id == task.id), None),
        "preempting": list(plan[1]) if plan else [],
    }
