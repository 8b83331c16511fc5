"""``Division``: the parts of divided tasks, their placement each cycle, their sum.

Owned by the placement loop (``hub.loops.PlacementLoop``), which calls, per cycle:
``divided`` (skip a divided task: its parts are tasks of their own), ``wants`` and ``place``
for a queued task that may be divided, ``top_up`` for divided tasks with replicas still
unplaced (``min_replicas``), ``store`` before the cycle's commit (the new parts are written
Queued, then placed by the commit like any task) and ``settle`` after it. Each part is one
workload in one cluster with its own generation, so failover, fencing, preemption and
quotas treat it as any task: a lost cluster re-places only its part. The divided task
itself holds no cluster: it is Placed once ``min_replicas`` (or all) replicas are placed,
Running once that many run, Succeeded when every replica succeeded, Failed when a part
failed (the other parts are cancelled), and cancelling it cancels every part. The hub's
task views read ``parts`` (``TaskView.parts``) and ``load`` rebuilds it after a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from fuyao.spec import TaskPart, TaskState
from fuyao.spread import WEIGHTED
from hub.activetask import ActiveTask, Command
from hub.clusters import utcnow
from hub.division.placer import Decide, NewPart, plan
from hub.placement.division import describe
from hub.placement.framework import PlacementRequest
from hub.placement.result import PlacementResult
from hub.placement.scheduler import Scheduler
from hub.queueing.cycle import Cycle
from hub.queueing.quota import demand
from hub.store import EventRecord, TaskRecord
from hub.taskbook import TaskBook

log = logging.getLogger(__name__)
LOAD_CHUNK = 500
LIVE = (TaskState.PLACED, TaskState.RUNNING)


@dataclass
class Part:
    """One cluster's part of a divided task as last seen (kept after the part ends)."""

    id: str
    name: str
    replicas: int
    state: TaskState
    cluster: str | None = None
    generation: int = 0

    @classmethod
    def of(cls, rec: TaskRecord | ActiveTask) -> Part:
        """From a stored or active part."""
        state = rec.state if isinstance(rec.state, TaskState) else TaskState(rec.state)
        replicas = (rec.spec.replicas if isinstance(rec, ActiveTask)
                    else int(rec.spec.get("replicas", 1)))
        return cls(rec.id, rec.name, replicas, state, rec.cluster, rec.generation)


class Division:
    """Divided tasks and their parts."""

    def __init__(self, tasks: TaskBook, poke: Callable[[], None]) -> None:
        self.tasks = tasks
        self.poke = poke
        self.parts: dict[str, list[Part]] = {}      # divided task id -> its parts
        self.orphaned: set[str] = set()             # ended divided tasks: cancel their parts
        self.pending: list[tuple[ActiveTask, list[NewPart]]] = []   # this cycle's new parts
        tasks.on_end.append(self._ended)

    # -- start and views ------------------------------------------------------------------------

    async def load(self) -> None:
        """Rebuild the parts of every active divided task, and find parts whose divided
        task ended (a crash between the two writes) so ``settle`` cancels them."""
        self.parts.clear()
        self.orphaned.clear()
        active = self.tasks.active
        ids = [t.id for t in active.values() if t.parent is None and t.spec.replicas > 1
               and not t.spec.gang]
        for start in range(0, len(ids), LOAD_CHUNK):
            chunk = ids[start:start + LOAD_CHUNK]
            for rec in await self.tasks.writer.read(self.tasks.writer.store.list_tasks,
                                                    parents=chunk):
                assert rec.parent is not None
                self.parts.setdefault(rec.parent, []).append(Part.of(rec))
        for task in active.values():
            if task.parent is not None and task.parent not in active:
                self.orphaned.add(task.parent)
                self.parts.setdefault(task.parent, []).append(Part.of(task))

    def divided(self, task: ActiveTask) -> bool:
        """True once ``task`` has parts (the placement loop leaves it to them)."""
        return task.id in self.parts

    def views(self, task_id: str) -> list[TaskPart]:
        """The parts of a divided task as they are now (``task describe``)."""
        return [TaskPart(name=p.name, cluster=p.cluster, replicas=p.replicas, state=p.state,
                         generation=p.generation) for p in self._fresh(task_id)]

    async def stored_views(self, rec: TaskRecord) -> list[TaskPart]:
        """``views``, read from the store for a divided task that ended."""
        if rec.id in self.parts or rec.parent is not None:
            return self.views(rec.id)
        if rec.spec.get("gang") or int(rec.spec.get("replicas", 1)) <= 1:
            return []
        records = await self.tasks.writer.read(self.tasks.writer.store.list_tasks,
                                               parents=[rec.id])
        return [TaskPart(name=r.name, cluster=r.cluster, replicas=int(r.spec["replicas"]),
                         state=TaskState(r.state), generation=r.generation) for r in records]

    def _fresh(self, task_id: str) -> list[Part]:
        parts = self.parts.get(task_id, [])
        for part in parts:
            live = self.tasks.active.get(part.id)
            if live is not None:
                part.state, part.cluster, part.generation = (live.state, live.cluster,
                                                             live.generation)
        return parts

    def _ended(self, task: ActiveTask) -> None:
        """``TaskBook.on_end``: a divided task or one of its parts ended."""
        if task.id in self.parts:
            self.orphaned.add(task.id)
            self.poke()
        elif task.parent is not None:
            for part in self.parts.get(task.parent, []):
                if part.id == task.id:
                    part.state, part.cluster = task.state, task.cluster
            self.poke()

    # -- a placement cycle -------------------------------------------------------------------------

    @staticmethod
    def wants(task: ActiveTask, result: PlacementResult) -> bool:
        """True for a task to divide: ``gang: false`` with replicas > 1 that no one cluster
        takes whole now, or any such task with ``spread: weighted``."""
        return task.divisible and (result.cluster is None or task.spec.spread == WEIGHTED)

    def place(self, task: ActiveTask, request: PlacementRequest, decide: Decide,
              scheduler: Scheduler, cycle: Cycle) -> PlacementResult | None:
        """Divide a queued task: None when its parts were reserved (stored by ``store``),
        else the result saying why it waits."""
        needed = task.spec.min_replicas or task.spec.replicas
        found = plan(task, request, decide, scheduler, cycle.clusters,
                     most=task.spec.replicas, minimum=needed, first_index=1)
        if isinstance(found, PlacementResult):
            return found
        self._reserved(task, found, cycle)
        return None

    def top_up(self, cycle: Cycle, decide_for: Callable[[ActiveTask], Decide],
               scheduler_for: Callable[[ActiveTask], Scheduler]) -> None:
        """Place more of the replicas that divided tasks still lack, where room appeared."""
        pending = {t.id for t, _ in self.pending}
        for task_id, parts in self.parts.items():
            task = self.tasks.active.get(task_id)
            if task is None or task.state not in LIVE or task_id in pending:
                continue
            left = task.spec.replicas - sum(p.replicas for p in parts
                                            if p.state != TaskState.CANCELLED)
            if left <= 0:
                continue
            found = plan(task, task.request(), decide_for(task), scheduler_for(task),
                         cycle.clusters, most=left, minimum=1, first_index=len(parts) + 1)
            if not isinstance(found, PlacementResult):
                self._reserved(task, found, cycle)

    def _reserved(self, task: ActiveTask, found: list[NewPart], cycle: Cycle) -> None:
        self.pending.append((task, found))
        cycle.admitted.add(task.id)
        cycle.owner.release_hold(task.id)
        for child, result in found:
            if child.queue in cycle.lanes:
                cycle.placed(child, result)
            else:       # a top-up while nothing else of its queue waits
                cycle.owner.models[child.id] = result.model
                cycle.usage.charge(child.queue, result.cluster,
                                   demand(child.request().requests, result.model))

    async def store(self) -> list[NewPart]:
        """Write this cycle's new parts (Queued); answers them, as the active tasks the
        cycle's commit places. If the write fails, their reservations are released."""
        pending, self.pending = self.pending, []
        if not pending:
            return []
        now = utcnow()
        records: list[TaskRecord] = []
        events: list[EventRecord] = []
        for task, found in pending:
            split = {r.cluster or "?": c.spec.replicas for c, r in found}
            for child, result in found:
                records.append(child.to_record())
                events.append(EventRecord(child.id, now, "Submitted",
                                          f"part of {task.name}: {child.spec.replicas} "
                                          f"replica(s) for {result.cluster}"))
            events.append(EventRecord(task.id, now, "Divided",
                                      f"divided across clusters: {describe(split)}"))
        try:
            await self.tasks.add(records, events)
        except Exception:
            log.exception("could not store the parts of %d divided task(s)", len(pending))
            for _, found in pending:
                for child, _ in found:
                    self.tasks.fleet.release(child.id)
            return []
        out: list[NewPart] = []
        for task, found in pending:
            for child, result in found:
                live = self.tasks.active[child.id]
                self.parts.setdefault(task.id, []).append(Part.of(live))
                out.append((live, result))
        return out

    async def settle(self) -> list[Command]:
        """Add the parts up into each divided task; cancel the parts of ended ones."""
        commands: list[Command] = []
        for task_id in list(self.orphaned):
            try:
                for part in self.parts.get(task_id, []):
                    child = self.tasks.active.get(part.id)
                    if child is not None and not child.state.terminal:
                        _, sent = await self.tasks.cancel(child.name, part=True)
                        commands += sent
            except Exception:     # retried next cycle
                log.exception("could not cancel the parts of divided task %s", task_id)
                continue
            self.orphaned.discard(task_id)
            self.parts.pop(task_id, None)
        for task_id in list(self.parts):
            task = self.tasks.active.get(task_id)
            if task is None:
                continue
            try:
                await self._add_up(task, self._fresh(task_id))
            except Exception:     # retried next cycle
                log.exception("could not add up the parts of divided task %s", task.name)
        return commands

    async def _add_up(self, task: ActiveTask, parts: Iterable[Part]) -> None:
        parts = list(parts)
        failed = next((p for p in parts if p.state == TaskState.FAILED), None)
        if failed is not None:
            await self.tasks.end(task, TaskState.FAILED, "Failed",
                                 f"part {failed.name} on {failed.cluster} failed")
            return
        replicas = task.spec.replicas
        done = sum(p.replicas for p in parts if p.state == TaskState.SUCCEEDED)
        if done >= replicas:
            await self.tasks.end(task, TaskState.SUCCEEDED, "Succeeded",
                                 f"all {replicas} replicas succeeded")
            return
        running = sum(p.replicas for p in parts if p.state == TaskState.RUNNING)
        needed = task.spec.min_replicas or replicas
        where: dict[str, int] = {}
        for p in parts:
            if p.state in LIVE and p.cluster:
                where[p.cluster] = where.get(p.cluster, 0) + p.replicas
        waiting = replicas - sum(p.replicas for p in parts if p.state in LIVE) - done
        state = TaskState.RUNNING if running and running + done >= needed else TaskState.PLACED
        message = (f"{running} of {replicas} replicas running, {done} succeeded; divided: "
                   f"{describe(where)}" + (f"; {waiting} waiting" if waiting else ""))
        await self.tasks.mark(task, state, state.value, message)
