"""``ActiveTasks``: the hub's active tasks by id, filed as they change, so the questions asked
many times a second need not scan every task.

``TaskBook.active`` is one (a ``dict`` of task id to ``ActiveTask``; reads are the plain
dict's). A task put in is watched: ``ActiveTask`` tells its map when a field in ``WATCHED``
is set (``hub.activetask``), and the map marks it. Marked tasks are refiled when the map is
next asked which tasks are Queued (each placement cycle), on a cluster (the monitor's
eviction each tick, reconcile) or reported Unschedulable (the monitor's spill-over each tick);
those answers come in the map's own order, as a scan of it would list them. How many tasks
are in each state (``states``: the ``fuyao_tasks`` gauge, read on every ``/metrics`` scrape)
is kept the same way, so a scrape costs the changes since the last answer, not a scan.
``feed`` hands out a set that collects the id of every task put in, taken out or changed
from then on: the queue ledger (``hub.queueing.ledger``) re-charges only those instead of
comparing every active task each cycle.

The Queued tasks' placement order (higher priority first, then submission order) is kept
queue by queue as tasks come and go (``hub.taskorder``): each placement cycle takes it
(``lanes``), each submit's views read their places (``positions``), and sorting a backlog of
tens of thousands of queued tasks every time made both grow with the backlog
(docs/benchmarks.md, "A backlog"). ``ranked`` merges the queues (planning, explain). Tasks
``set_aside`` (the queueing layer's parked tasks) leave the lanes but keep their places. A
task's priority and ``seq`` never change while it is in the map (a task replaced under its
id, or moved to another queue, is ranked anew).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from functools import partial
from typing import Any, Final

from fuyao.spec import TaskState
from hub.activetask import ActiveTask
from hub.taskorder import Rank, TaskOrder

_Filed = tuple[TaskState, str | None, bool]   # (state, cluster, reported Unschedulable)
_Rank = Rank   # (-priority, seq, when put in, id, the task, its queue): hub.taskorder
_UNFILED: tuple[None, None, bool] = (None, None, False)   # a task not in the map
_QUEUED: Final = TaskState.QUEUED   # read as a module constant, not through the enum class


class ActiveTasks(dict[str, ActiveTask]):
    """Active tasks by id, filed by state, cluster and Unschedulable mark, and counted by
    state."""

    def __init__(self, tasks: Mapping[str, ActiveTask] | None = None) -> None:
        super().__init__()
        self._order: dict[str, int] = {}      # when each id was put in: a scan's order
        self._count = itertools.count()
        self._filed: dict[str, _Filed] = {}
        self._queued: set[str] = set()
        self._states: Counter[TaskState] = Counter()   # filed tasks by state (none kept at 0)
        self._clusters: dict[str, set[str]] = {}
        self._unschedulable: set[str] = set()
        self._dirty: set[str] = set()         # changed since last filed
        # The Queued tasks' ranks: ``_order`` as of the last answer, ``_unranked`` queued
        # since, ``_gone`` the ranks forgotten since (a task no longer Queued, or ranked
        # anew); a rank is current while ``_rank_of`` holds that very entry for its id.
        self._ranks = TaskOrder()
        self._unranked: list[_Rank] = []
        self._rank_of: dict[str, _Rank] = {}
        self._gone: list[_Rank] = []
        self._feeds: list[set[str]] = [self._dirty]
        for key, task in (tasks or {}).items():
            self[key] = task

    # -- the dict's writes, watched -----------------------------------------------------------

    def __setitem__(self, key: str, task: ActiveTask) -> None:
        old = self.get(key)
        if old is not task:
            if old is not None:
                old.watch(None)
                self._unrank(key)     # ranked anew (by the new task's priority and seq)
            if key not in self:
                self._order[key] = next(self._count)
            super().__setitem__(key, task)
            # a partial, not a closure: one object the collector tracks for every active
            # task, where a lambda kept four (the function, its cells and their tuple)
            task.watch(partial(self._touch, key))
        self._touch(key)

    def __delitem__(self, key: str) -> None:
        self[key].watch(None)
        self._unrank(key)
        super().__delitem__(key)
        del self._order[key]
        self._touch(key)

    def pop(self, key: str, default: Any = None) -> Any:
        """Take a task out (``default`` if absent)."""
        if key not in self:
            return default
        task = self[key]
        del self[key]
        return task

    def clear(self) -> None:
        """Take every task out."""
        for key in list(self):
            del self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Put tasks in, each as ``self[key] = task``."""
        for key, task in dict(*args, **kwargs).items():
            self[key] = task

    def setdefault(self, key: str, default: Any = None) -> Any:
        """The task under ``key``, put in first if absent."""
        if key not in self:
            self[key] = default
        return self[key]

    def popitem(self) -> tuple[str, ActiveTask]:
        """Take the last task out."""
        key = next(reversed(self))
        return key, self.pop(key)

    # -- filed answers, in the map's order ------------------------------------------------------

    def queued(self) -> list[ActiveTask]:
        """The Queued tasks."""
        return self._listed(self._filed_now()._queued)

    def ranked(self) -> list[ActiveTask]:
        """The Queued tasks in placement order: higher priority first, then lower ``seq``,
        then put in earlier (what sorting ``queued()`` by ``(-priority, seq)`` gives),
        queue after queue merged; the tasks set aside too."""
        return self._rank_now().ranked()

    def lanes(self) -> dict[str, list[ActiveTask]]:
        """Each queue's Queued tasks in placement order, but the ones set aside."""
        return self._rank_now().lanes()

    def positions(self) -> Mapping[str, int]:
        """Each Queued task's place in its queue in ``ranked`` order (1 = next), the tasks
        set aside counted. Read it before the next change."""
        return _Positions(self._rank_of, self._rank_now())

    def set_aside(self, tasks: Iterable[ActiveTask]) -> None:
        """Leave these Queued tasks out of ``lanes`` (not of ``ranked`` or their places)
        until ``restore`` or until they leave the queue; a task no longer Queued, or
        replaced, is skipped."""
        order, rank_of = self._rank_now(), self._rank_of
        ranks = [(rank_of.get(t.id), t) for t in tasks]
        order.set_aside([rank for rank, task in ranks if rank is not None and rank[4] is task])

    def restore(self) -> None:
        """Every task set aside is in ``lanes`` again."""
        self._rank_now().restore()

    def is_aside(self, task: ActiveTask) -> bool:
        """Is ``task`` (this very object) set aside?"""
        rank = self._rank_now().aside(task.id)
        return rank is not None and rank[4] is task

    def aside_count(self) -> int:
        """How many Queued tasks are set aside."""
        return self._rank_now().aside_count

    def _rank_now(self) -> TaskOrder:
        """Bring the order up to date with the tasks ranked and forgotten since."""
        self._filed_now()
        if self._gone or self._unranked:
            rank_of = self._rank_of
            fresh = sorted(r for r in self._unranked if rank_of.get(r[3]) is r)
            self._ranks.update(fresh, self._gone)
            self._unranked, self._gone = [], []
        return self._ranks

    def on_cluster(self, cluster: str) -> list[ActiveTask]:
        """The tasks whose cluster is ``cluster``."""
        return self._listed(self._filed_now()._clusters.get(cluster, ()))

    def on_clusters(self) -> list[ActiveTask]:
        """The tasks with a cluster, whichever (grouped by cluster, not in the map's order)."""
        self._filed_now()
        return [self[k] for keys in self._clusters.values() for k in keys]

    def unschedulable(self) -> list[ActiveTask]:
        """The tasks with ``unschedulable_since`` set."""
        return self._listed(self._filed_now()._unschedulable)

    def states(self) -> dict[TaskState, int]:
        """How many tasks are in each state, for the states some task is in, in the order
        ``TaskState`` lists them."""
        counts = self._filed_now()._states
        return {state: counts[state] for state in TaskState if state in counts}

    def feed(self) -> set[str]:
        """A set the id of every task put in, taken out or changed from now on is added to
        (the caller empties it as it reads)."""
        changed: set[str] = set()
        self._feeds.append(changed)
        return changed

    # -- internals ------------------------------------------------------------------------------

    def _touch(self, key: str) -> None:
        for feed in self._feeds:
            feed.add(key)

    def _unrank(self, key: str) -> None:
        """Forget ``key``'s rank (its entry goes stale)."""
        rank = self._rank_of.pop(key, None)
        if rank is not None:
            self._gone.append(rank)

    def _listed(self, keys: Iterable[str]) -> list[ActiveTask]:
        return [self[k] for k in sorted(keys, key=self._order.__getitem__)]

    def _filed_now(self) -> ActiveTasks:
        """Refile the tasks changed since the last answer (most changes, a generation or a
        queue, leave the filing as it was)."""
        dirty = self._dirty
        if not dirty:
            return self
        # Looked up once, not per task: a failover refiles ten thousand at once.
        filed, get, rank_of, unranked = self._filed, self.get, self._rank_of, self._unranked
        for key in dirty:
            task = get(key)
            if task is None:
                was = filed.get(key)
                if was is not None:
                    self._refile(key, was, None)
                continue
            state = task.state
            now = (state, task.cluster, task.unschedulable_since is not None)
            was = filed.get(key)
            if now != was:
                self._refile(key, was, now)
            if state is _QUEUED:
                rank = rank_of.get(key)
                if rank is not None and rank[5] != task.queue:
                    self._unrank(key)         # moved to another queue: numbered anew
                    rank = None
                if rank is None:
                    rank = (-task.priority, task.seq, self._order[key], key, task, task.queue)
                    rank_of[key] = rank
                    unranked.append(rank)
        dirty.clear()
        return self

    def _refile(self, key: str, was: _Filed | None, now: _Filed | None) -> None:
        """Move ``key`` from filing ``was`` to ``now`` (None: not filed), touching only the
        parts that differ (a Placed task now Running moves one count)."""
        if now is None:
            del self._filed[key]
        else:
            self._filed[key] = now
        state, cluster, unschedulable = was or _UNFILED
        new_state, new_cluster, new_unschedulable = now or _UNFILED
        if state != new_state:
            counts = self._states
            if state is not None:
                left = counts[state] - 1
                if left:
                    counts[state] = left
                else:
                    del counts[state]
                if state == TaskState.QUEUED:
                    self._queued.discard(key)
                    self._unrank(key)
            if new_state is not None:
                counts[new_state] += 1
                if new_state == TaskState.QUEUED:
                    self._queued.add(key)
        if cluster != new_cluster:
            if cluster is not None:
                on = self._clusters[cluster]
                on.discard(key)
                if not on:
                    del self._clusters[cluster]
            if new_cluster is not None:
                self._clusters.setdefault(new_cluster, set()).add(key)
        if unschedulable != new_unschedulable:
            if new_unschedulable:
                self._unschedulable.add(key)
            else:
                self._unschedulable.discard(key)


class _Positions(Mapping[str, int]):
    """``ActiveTasks.positions``: each Queued task's place, worked out when read."""

    __slots__ = ("_order", "_rank_of")

    def __init__(self, rank_of: Mapping[str, Rank], order: TaskOrder) -> None:
        self._rank_of, self._order = rank_of, order

    def __getitem__(self, key: str) -> int:
        return self._order.position(self._rank_of[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._rank_of)

    def __len__(self) -> int:
        return len(self._rank_of)
