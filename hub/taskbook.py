"""Active tasks in memory, every transition persisted before it is acted on.

``TaskBook`` holds each task that is not yet terminal (Queued, Placed, Running), loaded from
the store at start. Transitions come from the REST API (submit, cancel), the placement loop
(place, record why a task waits), agent reports (Accepted, Bound, Running, Succeeded,
Failed, Unschedulable, Cancelled) and the monitor (failover, spill-over). Each transition
writes its task update and timeline event through the one store writer; commands to agents
are returned to the caller to send only after the write is durable, so a crash never leaves
an agent running something the store does not know about; a transition whose durable write
fails leaves the task as it was.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime

from fuyao.errors import Conflict, FuyaoError, NotFound
from fuyao.spec import TaskSpec, TaskState
from fuyao.wire.v1 import agent_pb2 as pb
from hub.activetask import (
    PHASE_NAMES,
    TERMINAL_PHASES,
    UNBOUND_PHASES,
    ActiveTask,
    Command,
    Snapshot,
    cancel_command,
    place_command,
    restore,
    snapshot,
    task_update,
)
from hub.clusters import utcnow
from hub.fleet import FleetView
from hub.placement import memshare
from hub.placement.result import PlacementResult
from hub.scorerows import placed_scores, score_records
from hub.store import EventRecord, PlacementRecord, TaskRecord, TaskUpdate
from hub.store.records import AuditRecord
from hub.taskids import new_ids
from hub.taskindex import ActiveTasks
from hub.writer import StoreWriter

log = logging.getLogger(__name__)

PLACED, QUEUED = TaskState.PLACED.value, TaskState.QUEUED.value   # as the store keeps them


class Staged:
    """One placement cycle applied in memory, its commit queued (``TaskBook.stage``)."""

    def __init__(self, book: TaskBook, done: asyncio.Future[None] | None,
                 commands: list[Command], undo: list[tuple[ActiveTask, Snapshot]]) -> None:
        self.book, self.done, self.commands, self.undo = book, done, commands, undo

    async def durable(self) -> list[Command]:
        """The PlaceTask commands once the commit is durable; [] if it failed (the placed
        tasks are Queued again, their reservations released)."""
        if self.done is None:
            return self.commands
        try:
            await self.done
        except Exception:
            log.exception("placement commit failed; %d tasks stay queued", len(self.undo))
            for task, snap in self.undo:
                self.book.fleet.release(task.id)
                restore(task, snap)
            return []
        sent = time.monotonic()     # the caller sends the commands right away
        for task, _ in self.undo:
            task.dispatched_at = sent
        return self.commands


def submit_records(specs: Sequence[TaskSpec],
                   owner: str = "") -> tuple[list[TaskRecord], list[EventRecord]]:
    """The store's records of a submit: each spec a new Queued task (a fresh id, stamped
    now) and its ``Submitted`` event (``TaskBook.submit``; ``bench/write_bench.py`` writes
    the same)."""
    now = utcnow()
    records = [
        TaskRecord(
            id=task_id, name=s.name, spec=s.model_dump(mode="json"),
            state=TaskState.QUEUED.value, queue=s.queue, priority=s.priority, seq=0,
            created_at=now, updated_at=now, owner=owner,
        )
        for s, task_id in zip(specs, new_ids(len(specs)), strict=True)
    ]
    events = [EventRecord(r.id, now, "Submitted", f"queued in {r.queue!r}") for r in records]
    return records, events


class TaskBook:
    """The hub's active tasks and their transitions."""

    def __init__(self, writer: StoreWriter, fleet: FleetView) -> None:
        self.writer = writer
        self.fleet = fleet
        self.active = ActiveTasks()     # by id; filed by state, cluster, Unschedulable
        self._by_name: dict[str, str] = {}
        self._saving = 0    # tasks whose re-queue is being written (``saving`` set)
        self.on_end: list[Callable[[ActiveTask], None]] = []   # called once a task ended

    # -- start ------------------------------------------------------------------------------

    async def load(self) -> int:
        """Load every non-terminal task from the store; returns how many."""
        states = [TaskState.QUEUED.value, TaskState.PLACED.value, TaskState.RUNNING.value]
        for rec in await self.writer.read(self.writer.store.list_tasks, states=states):
            self._add(ActiveTask.from_record(rec))
        return len(self.active)

    def reset(self) -> None:
        """Forget every active task (before ``load`` replaces a standby's read cache)."""
        for task in list(self.active.values()):
            self._drop(task)

    def _add(self, task: ActiveTask) -> None:
        self.active[task.id] = task
        self._by_name[task.name] = task.id

    def _drop(self, task: ActiveTask) -> None:
        self.active.pop(task.id, None)
        self._by_name.pop(task.name, None)
        self.fleet.release(task.id)

    def by_name(self, name: str) -> ActiveTask | None:
        """The active task called ``name``, if any."""
        task_id = self._by_name.get(name)
        return None if task_id is None else self.active.get(task_id)

    # -- submit and cancel (REST) ----------------------------------------------------------

    async def submit(self, specs: Sequence[TaskSpec], owner: str = "",
                     audit: AuditRecord | None = None) -> list[TaskRecord]:
        """Store new tasks as Queued (all or none) and make them placeable; ``owner`` is
        the API token that submitted them; ``audit``: the submit's audit record, stored in
        the same transaction."""
        records, events = submit_records(specs, owner)
        return await self.add(records, events, specs, audit=audit)

    async def add(self, records: Sequence[TaskRecord], events: Sequence[EventRecord],
                  specs: Sequence[TaskSpec] | None = None,
                  audit: AuditRecord | None = None) -> list[TaskRecord]:
        """Store new tasks (all or none) and make them active (``submit``; the parts of a
        divided task, ``hub.division``). ``specs``: the validated specs the records' were
        dumped from, one per record, kept instead of validated again (``stored_spec``);
        ``audit``: a record committed with them."""
        stored = await self.writer.add_tasks(records, events, audit=audit)
        at = time.time()    # the submit's durable moment (``hub.stages``: store -> queue)
        kept: Sequence[TaskSpec | None] = [None] * len(stored) if specs is None else specs
        for rec, spec in zip(stored, kept, strict=True):
            task = ActiveTask.from_record(rec, spec)
            task.stored_at = at
            self._add(task)
        return stored

    async def cancel(self, name: str, *, part: bool = False) -> tuple[TaskRecord, list[Command]]:
        """Cancel a task that has not ended; Conflict if it already has, or if it is one
        cluster's part of a divided task (``part``: the division itself cancels it)."""
        task = self.by_name(name)
        if task is None:
            rec = await self.writer.read(self.writer.store.get_task, name)  # NotFound if absent
            raise Conflict(f"task {name!r} already ended ({rec.state}); nothing to cancel")
        if task.parent is not None and not part:
            raise Conflict(f"task {name!r} is one cluster's part of the divided task "
                           f"{name.rsplit('.', 1)[0]!r}: cancel that task")
        commands: list[Command] = []
        if task.cluster is not None:
            commands.append(cancel_command(task.cluster, task.id, task.generation,
                                           "cancelled by user"))
        await self._finish(task, TaskState.CANCELLED, "Cancelled", "cancelled by user")
        return task.to_record(), commands

    # -- placement ---------------------------------------------------------------------------

    def queued(self) -> list[ActiveTask]:
        """Queued tasks in placement order: higher priority first, then submission order."""
        ranked = self.active.ranked()
        return [t for t in ranked if not t.saving] if self._saving else ranked

    def lanes(self) -> dict[str, list[ActiveTask]]:
        """Each queue's Queued tasks in placement order, but the parked ones (set aside) and
        any whose re-queue is being written: a placement cycle's candidates."""
        lanes = self.active.lanes()
        if not self._saving:
            return lanes
        kept = {q: [t for t in ts if not t.saving] for q, ts in lanes.items()}
        return {q: ts for q, ts in kept.items() if ts}

    def positions(self) -> Mapping[str, int]:
        """Each of ``queued()``'s tasks' place in its queue (1 = next)."""
        if not self._saving:
            return self.active.positions()
        out: dict[str, int] = {}
        seen: dict[str, int] = {}
        for task in self.queued():
            out[task.id] = seen[task.queue] = seen.get(task.queue, 0) + 1
        return out

    async def commit(
        self,
        placed: Sequence[tuple[ActiveTask, PlacementResult]],
        waiting: Sequence[tuple[ActiveTask, PlacementResult]],
        held: Sequence[tuple[ActiveTask, str]] = (),
    ) -> list[Command]:
        """Persist one placement cycle in a single commit; returns the PlaceTask commands
        (``stage`` and then ``Staged.durable``)."""
        return await self.stage(placed, waiting, held).durable()

    def stage(
        self,
        placed: Sequence[tuple[ActiveTask, PlacementResult]],
        waiting: Sequence[tuple[ActiveTask, PlacementResult]],
        held: Sequence[tuple[ActiveTask, str]] = (),
    ) -> Staged:
        """Apply one placement cycle in memory and queue its single commit, without waiting:
        the placement loop decides its next cycle while this one's write is in flight.

        ``held``: tasks a queue quota holds back, with the quota's message. The placed
        tasks' resources were reserved in the fleet view by the caller; the PlaceTask
        commands are handed out by ``Staged.durable`` only once the commit is durable, and
        if it fails the reservations are released and the tasks are Queued again.
        """
        now = utcnow()
        updates: list[TaskUpdate] = []
        events: list[EventRecord] = []
        placements: list[PlacementRecord] = []
        commands: list[Command] = []
        undo: list[tuple[ActiveTask, Snapshot]] = []
        for task, result in placed:
            cluster = result.cluster
            assert cluster is not None
            undo.append((task, snapshot(task)))
            # The chosen cluster's total read off the score table (building every cluster's
            # verdict just for this one number took ~8% of the hub in the e2e bench).
            scores, best = placed_scores(result)
            generation, reasons = task.generation + 1, dict[str, str]()
            message = (f"placed on {cluster} (score {best:.1f})" if best is not None
                       else f"placed on {cluster}")
            # Set and written at once (``assign``, the update's dict built here): the same
            # as setting each field and ``task_update``, at a fraction of the calls.
            task.assign({"state": TaskState.PLACED, "cluster": cluster, "node": None,
                         "generation": generation, "failover": False,
                         "unschedulable_since": None, "reasons": reasons, "scores": scores,
                         "message": message, "updated_at": now})
            updates.append(TaskUpdate(task.id, {
                "state": PLACED, "cluster": cluster, "node": None, "generation": generation,
                "reasons": reasons, "scores": scores, "message": message, "updated_at": now}))
            events.append(EventRecord(task.id, now, "Placed", message, cluster, generation))
            placements.append(PlacementRecord(task.id, cluster, generation, now,
                                              list(result.nodes)))
            commands.append(place_command(task, cluster, result.model))
        for task, result in waiting:
            message = result.error.message if result.error else "no cluster available"
            if message == task.message and result.reasons == task.reasons:
                continue    # nothing new to say: no write
            task.reasons = dict(result.reasons)
            task.scores = score_records(result)
            task.message = message
            task.updated_at = now
            updates.append(task_update(task, "reasons", "scores", "message", "updated_at"))
            events.append(EventRecord(task.id, now, "Pending", message))
        for task, message in held:
            if message == task.message:
                continue
            task.reasons, task.scores, task.message, task.updated_at = {}, (), message, now
            updates.append(task_update(task, "reasons", "scores", "message", "updated_at"))
            events.append(EventRecord(task.id, now, "Held", message))
        done = self.writer.enqueue(updates, events, placements) if updates else None
        return Staged(self, done, commands, undo)

    # -- agent reports ----------------------------------------------------------------------

    async def report(self, cluster: str, rep: pb.TaskReport) -> list[Command]:
        """Apply one task report from ``cluster``'s agent; returns commands to send."""
        task = self.active.get(rep.task_id)
        terminal = rep.phase in TERMINAL_PHASES
        if (task is not None and not task.state.terminal and rep.generation < task.generation
                and rep.phase == pb.TASK_PHASE_SUCCEEDED):
            return await self._late_success(task, cluster, rep.generation)
        if (task is None or task.state.terminal or task.cluster != cluster
                or rep.generation < task.generation):
            # A copy the hub no longer wants (ended or ending, moved, or a stale generation).
            if terminal:
                return []
            return [cancel_command(cluster, rep.task_id, rep.generation,
                                   "stale copy: the task ended or moved elsewhere")]
        if rep.generation > task.generation:
            log.warning("task %s: report for future generation %d ignored", task.name,
                        rep.generation)
            return []
        return await self._apply_phase(task, rep)

    async def _late_success(self, task: ActiveTask, cluster: str,
                            generation: int) -> list[Command]:
        """An older copy finished while its cluster was cut off, and the task had been
        re-placed: the work is done, so the task ends Succeeded and the newer copy stops."""
        commands: list[Command] = []
        if task.cluster is not None:
            commands.append(cancel_command(task.cluster, task.id, task.generation,
                                           f"generation {generation} already succeeded"))
        self.fleet.release(task.id)
        await self._finish(task, TaskState.SUCCEEDED, "Succeeded",
                           f"generation {generation} on {cluster} succeeded while {cluster} "
                           "was cut off")
        return commands

    async def _apply_phase(self, task: ActiveTask, rep: pb.TaskReport) -> list[Command]:
        now = utcnow()
        phase = rep.phase
        name = PHASE_NAMES.get(phase, "Unknown")
        detail = rep.reason or ""
        if phase == pb.TASK_PHASE_ACCEPTED:
            await self._event(task, "Accepted", f"{task.cluster} created the workload")
        elif phase in (pb.TASK_PHASE_BOUND, pb.TASK_PHASE_RUNNING):
            self.fleet.release(task.id)     # the member's own accounting now holds it
            task.unschedulable_since = None
            changed = task.node != (rep.node or task.node)
            task.node = rep.node or task.node
            if phase == pb.TASK_PHASE_RUNNING and task.state != TaskState.RUNNING:
                task.state = TaskState.RUNNING
                task.message = f"running on {task.cluster}/{task.node}"
                await self._save(task, now, "Running", task.message, "state", "node", "message",
                                 durable=False)
            elif phase == pb.TASK_PHASE_BOUND and changed:
                await self._save(task, now, "Bound", f"bound to node {task.node}", "node",
                                 durable=False)
        elif phase == pb.TASK_PHASE_UNSCHEDULABLE:
            if task.unschedulable_since is None:
                task.unschedulable_since = time.monotonic()
            message = f"{task.cluster} cannot schedule it yet: {detail}"
            if message != task.message:
                task.message = message
                await self._save(task, now, "Unschedulable", message, "message", durable=False)
        elif phase == pb.TASK_PHASE_SUCCEEDED:   # terminal: durable, so it never runs again
            await self._finish(task, TaskState.SUCCEEDED, name, detail or "completed")
        elif phase == pb.TASK_PHASE_FAILED:
            await self._finish(task, TaskState.FAILED, name, detail or "failed")
        elif phase == pb.TASK_PHASE_CANCELLED:
            # The hub did not ask for this (it would have dropped the task): re-place it.
            # Prefer another cluster: this one may be fenced (its lease expired).
            return await self.requeue(task, f"{task.cluster} cancelled it: {detail}",
                                      failover=True, avoid=task.cluster)
        return []

    # -- failover and spill-over -----------------------------------------------------------------

    async def requeue(self, task: ActiveTask, reason: str, *, failover: bool,
                      avoid: str | None = None, kind: str = "Requeued",
                      grace: int = 0) -> list[Command]:
        """Back to Queued (the next placement gets a new generation); cancels the old copy
        (``grace``: seconds the member gives it to stop; ``kind``: the event's kind).

        A task already ending is left alone. If the write fails the task stays as it was
        and the error is raised: what asked for the re-queue asks again (the next tick, the
        next inventory, the operator's retry).
        """
        return await self.requeue_many([task], reason, failover=failover, avoid=avoid,
                                       kind=kind, grace=grace)

    async def requeue_many(self, tasks: Sequence[ActiveTask], reason: str, *, failover: bool,
                           avoid: str | None = None, kind: str = "Requeued",
                           grace: int = 0) -> list[Command]:
        """``requeue`` for many tasks in ONE store write (a lost cluster's batch): all of
        them are re-queued, or, if the write fails, none (each as it was; the error raised)."""
        commands: list[Command] = []
        moved: list[tuple[ActiveTask, Snapshot]] = []
        updates: list[TaskUpdate] = []
        events: list[EventRecord] = []
        now = utcnow()
        changes = {"state": TaskState.QUEUED, "cluster": None, "node": None,
                   "failover": failover, "unschedulable_since": None, "dispatched_at": None,
                   "message": reason, "saving": True, "updated_at": now}
        stored = {"state": QUEUED, "cluster": None, "node": None, "message": reason,
                  "updated_at": now}
        for task in tasks:
            if task.state.terminal or task.saving:
                continue
            if task.cluster is not None:
                commands.append(cancel_command(task.cluster, task.id, task.generation, reason,
                                               grace))
            moved.append((task, snapshot(task)))
            task.assign(changes)
            updates.append(TaskUpdate(task.id, dict(stored)))
            events.append(EventRecord(task.id, now, kind, reason, None, task.generation))
        if not moved:
            return []
        self._saving += len(moved)
        try:
            await self.writer.apply(updates, events)
        except Exception:
            for task, snap in moved:
                if task.state == TaskState.QUEUED:    # not cancelled meanwhile
                    restore(task, snap)
            raise
        finally:
            self._saving -= len(moved)
            for task, _ in moved:
                task.saving = False
        if avoid:
            for task, _ in moved:
                task.avoid.add(avoid)
        self.fleet.release_many(task.id for task, _ in moved)
        return commands

    async def requeue_cluster(self, cluster: str, reason: str) -> list[Command]:
        """Fail over every task placed on or running in ``cluster``."""
        return await self.requeue_many(self.on_cluster(cluster), reason, failover=True)

    def on_cluster(self, cluster: str) -> list[ActiveTask]:
        """Active tasks placed on or running in ``cluster``."""
        return self.active.on_cluster(cluster)

    def stuck_unschedulable(self, timeout: float) -> list[ActiveTask]:
        """Tasks a member has reported Unschedulable for longer than ``timeout`` seconds."""
        now = time.monotonic()
        return [t for t in self.active.unschedulable()
                if t.unschedulable_since is not None and now - t.unschedulable_since > timeout]

    async def reconcile(self, cluster: str, reports: Iterable[pb.TaskReport],
                        since: float | None = None) -> list[Command]:
        """Compare a full inventory's task list with what the hub expects of ``cluster``.

        ``since``: when the stream that carried the inventory opened (monotonic). A task
        dispatched on that stream after it opened may be missing only because its PlaceTask
        crossed the inventory on the wire; it is not re-placed (the agent still gets it, or
        the stream breaks and the next inventory is compared again).
        """
        commands: list[Command] = []
        seen: set[str] = set()
        for rep in reports:
            task = self.active.get(rep.task_id)
            if task is not None and task.cluster == cluster and rep.generation == task.generation:
                seen.add(task.id)
                if rep.phase in UNBOUND_PHASES and task.state == TaskState.PLACED:
                    await self._hold_again(task)
            commands += await self.report(cluster, rep)
        for task in self.on_cluster(cluster):
            crossed = (since is not None and task.dispatched_at is not None
                       and task.dispatched_at > since)
            if task.id not in seen and not crossed:
                # The member does not know it (lost with the member, or the hub died before
                # the command went out): place it again.
                commands += await self.requeue(task, f"{cluster} does not have it; re-placing",
                                               failover=True)
        return commands

    async def _hold_again(self, task: ActiveTask) -> None:
        """Hold a placed, not yet bound task's nodes again if it holds nothing (as after a hub
        restart): the member's own accounting does not count it until it binds."""
        if self.fleet.reservation(task.id) is not None:
            return
        cluster, generation = task.cluster, task.generation
        history = await self.writer.read(self.writer.store.placements, task.id)
        last = next((p for p in reversed(history) if p.generation == generation), None)
        if (last is None or last.cluster != cluster or cluster is None
                or (task.state, task.cluster, task.generation)
                != (TaskState.PLACED, cluster, generation)
                or self.fleet.reservation(task.id) is not None):
            return      # changed while the placement was read
        try:
            held = memshare.held_requests(self.fleet, cluster, task.spec.requests(), last.nodes)
            self.fleet.reserve(cluster, task.id, held, last.nodes)
        except FuyaoError as exc:
            log.warning("task %s: cannot hold its nodes on %s again: %s", task.name, cluster,
                        exc.message)

    # -- internals ------------------------------------------------------------------------------

    async def _finish(self, task: ActiveTask, state: TaskState, kind: str, message: str) -> None:
        """End the task: terminal in memory at once (reports and re-queues leave it alone),
        dropped once durable; if the write fails it is as it was and the error raised."""
        snap = snapshot(task)
        task.state = state
        task.message = message
        try:
            await self._save(task, utcnow(), kind, message, "state", "message")
        except Exception:
            if task.state == state:
                restore(task, snap)
            raise
        self._drop(task)
        for hook in self.on_end:
            hook(task)

    async def end(self, task: ActiveTask, state: TaskState, kind: str, message: str) -> None:
        """End a divided task by its parts' outcome (``hub.division``)."""
        if not task.state.terminal:
            await self._finish(task, state, kind, message)

    async def mark(self, task: ActiveTask, state: TaskState, kind: str, message: str) -> None:
        """Set a divided task's state and message as its parts add up (``hub.division``)."""
        if (state, message) != (task.state, task.message):
            task.state, task.message = state, message
            await self._save(task, utcnow(), kind, message, "state", "message", durable=False)

    async def fail_waiting(self, task: ActiveTask, kind: str, message: str) -> None:
        """Fail a Queued task that can never run (e.g. a dependency failed); no-op otherwise."""
        if task.state == TaskState.QUEUED and not task.saving:
            await self._finish(task, TaskState.FAILED, kind, message)

    async def note(self, task: ActiveTask, kind: str, message: str) -> None:
        """Say why a Queued task waits (timeline event only when the message changes)."""
        if message != task.message:
            task.message = message
            await self._save(task, utcnow(), kind, message, "message", durable=False)

    async def _event(self, task: ActiveTask, kind: str, message: str) -> None:
        self.writer.enqueue(events=[EventRecord(task.id, utcnow(), kind, message,
                                                task.cluster, task.generation)])

    async def _save(self, task: ActiveTask, now: datetime, kind: str, message: str,
                    *fields: str, durable: bool = True) -> None:
        """Persist a transition; ``durable=False`` queues it without waiting (agent reports,
        which the agent's next full inventory repeats if the hub crashes first)."""
        task.updated_at = now
        done = self.writer.enqueue(
            [task_update(task, *fields, "updated_at")],
            [EventRecord(task.id, now, kind, message, task.cluster, task.generation)],
        )
        if durable:
            await done

    def get_active(self, name: str) -> ActiveTask:
        """An active task by name, or NotFound."""
        task = self.by_name(name)
        if task is None:
            raise NotFound(f"task {name!r} is not active")
        return task
