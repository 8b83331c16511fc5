"""The Queued tasks' placement order, kept queue by queue as tasks come and go.

``ActiveTasks`` (``hub.taskindex``) gives each Queued task a rank, ``(-priority, seq, when
put in, id, task, queue)`` - the first three are unique among current ranks, so two ranks
never compare their tasks - and hands ``TaskOrder.update`` the ranks that came and went
since the last answer. Each queue keeps its ranks sorted, with their tasks side by side, so:

- a placement cycle takes each queue's tasks as they stand (``lanes``: one copy of a list
  per queue, no sorting, no pass over the tasks in Python);
- a task's place in its queue is two bisections (``position``): nothing is numbered;
- tasks that left (placed, cancelled) are mostly at the front of their queue, so taking
  them out reads only as far as the last of them; new tasks that rank together (a submit)
  go in with one slice assignment wherever they fall;
- tasks **set aside** (``set_aside``: the queueing layer's parked tasks, which no cluster
  could take even empty) leave their queue's list for a sorted list of their own: cycles do
  not see them, their places still count them, and ``restore`` puts them all back.

Held by ``tests/unit/test_active_tasks.py``: over random puts, replacements, removals, state
and queue changes, set-asides and restores, ``lanes`` equals the scan's Queued tasks not set
aside, sorted and grouped by queue, and ``position`` their numbering queue by queue.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Iterable
from operator import itemgetter

from hub.activetask import ActiveTask

# (-priority, seq, when put in, id, the task, its queue): placement order
Rank = tuple[int, int, int, str, ActiveTask, str]
_TASK = itemgetter(4)


class _Queue:
    """One queue's ranks in order (``ranks`` and ``tasks`` side by side), and its ranks set
    aside (sorted)."""

    __slots__ = ("aside", "ranks", "tasks")

    def __init__(self) -> None:
        self.ranks: list[Rank] = []
        self.tasks: list[ActiveTask] = []
        self.aside: list[Rank] = []


class TaskOrder:
    """Every queue's Queued tasks in placement order, and the ones set aside."""

    def __init__(self) -> None:
        self._queues: dict[str, _Queue] = {}
        self._aside: dict[str, Rank] = {}     # task id -> its rank, set aside

    def update(self, fresh: list[Rank], gone: list[Rank]) -> None:
        """Take out each of ``gone`` (ranks that went stale; one never put in is skipped),
        then put in ``fresh`` (sorted, current)."""
        for queue, ranks in _by_queue(gone).items():
            into = self._queues.get(queue)
            if into is None:
                continue
            aside = [r for r in ranks if self._aside.get(r[3]) is r]
            if aside:
                for rank in aside:
                    del self._aside[rank[3]]
                _drop(into.aside, None, aside)
            _drop(into.ranks, into.tasks, ranks)
        for queue, ranks in _by_queue(fresh).items():
            into = self._queues.get(queue)
            if into is None:
                into = self._queues[queue] = _Queue()
            _insert(into, ranks)
        for queue in [q for q, o in self._queues.items() if not (o.ranks or o.aside)]:
            del self._queues[queue]

    def lanes(self) -> dict[str, list[ActiveTask]]:
        """Each queue's tasks not set aside, in order (copies: safe to keep while tasks
        change)."""
        return {queue: list(o.tasks) for queue, o in self._queues.items() if o.tasks}

    def ranked(self) -> list[ActiveTask]:
        """Every task, set aside or not, in placement order across queues."""
        queues = self._queues.values()
        if len(queues) == 1 and not self._aside:
            return list(next(iter(queues)).tasks)
        runs = [r for o in queues for r in (o.ranks, o.aside) if r]
        return list(map(_TASK, sorted(itertools.chain.from_iterable(runs))))

    def position(self, rank: Rank) -> int:
        """``rank``'s place in its queue (1 = next), counting the tasks set aside."""
        into = self._queues[rank[5]]
        return bisect_left(into.ranks, rank) + bisect_left(into.aside, rank) + 1

    def set_aside(self, ranks: Iterable[Rank]) -> None:
        """Take current ranks out of their queues' lists into the set-aside ones."""
        for queue, moved in _by_queue([r for r in ranks if r[3] not in self._aside]).items():
            into = self._queues[queue]
            _drop(into.ranks, into.tasks, moved)
            into.aside = sorted(into.aside + moved)
            for rank in moved:
                self._aside[rank[3]] = rank

    def restore(self) -> None:
        """Put every task set aside back in its queue's list."""
        for into in self._queues.values():
            if into.aside:
                into.ranks = sorted(into.ranks + into.aside)
                into.tasks = [r[4] for r in into.ranks]
                into.aside = []
        self._aside.clear()

    def aside(self, task_id: str) -> Rank | None:
        """The rank of ``task_id`` if it is set aside."""
        return self._aside.get(task_id)

    @property
    def aside_count(self) -> int:
        """How many tasks are set aside."""
        return len(self._aside)


def _by_queue(ranks: Iterable[Rank]) -> dict[str, list[Rank]]:
    """``ranks`` grouped by queue, each group sorted."""
    out: dict[str, list[Rank]] = {}
    for rank in ranks:
        group = out.get(rank[5])
        if group is None:
            out[rank[5]] = [rank]
        else:
            group.append(rank)
    for group in out.values():
        group.sort()
    return out


def _drop(ranks: list[Rank], tasks: list[ActiveTask] | None, gone: list[Rank]) -> None:
    """Take the entries of sorted ``gone`` that are in ``ranks`` (the very tuples) out of it
    (and the same places out of ``tasks``), rewriting the lists only up to the last one."""
    places: set[int] = set()
    for rank in gone:
        i = bisect_left(ranks, rank)
        if i < len(ranks) and ranks[i] is rank:
            places.add(i)
    if not places:
        return
    end = max(places) + 1
    ranks[:end] = [r for i, r in enumerate(ranks[:end]) if i not in places]
    if tasks is not None:
        tasks[:end] = [t for i, t in enumerate(tasks[:end]) if i not in places]


def _insert(into: _Queue, fresh: list[Rank]) -> None:
    """Put sorted ``fresh`` in: appended when it ranks after the rest (a submit), in one
    slice when it falls between two neighbours, else merged."""
    ranks = into.ranks
    tasks = [r[4] for r in fresh]
    if not ranks or ranks[-1] < fresh[0]:
        ranks += fresh
        into.tasks += tasks
        return
    i = bisect_left(ranks, fresh[0])
    if i == len(ranks) or fresh[-1] < ranks[i]:
        ranks[i:i] = fresh
        into.tasks[i:i] = tasks
        return
    into.ranks = sorted(ranks + fresh)     # two sorted runs: one merge
    into.tasks = [r[4] for r in into.ranks]
