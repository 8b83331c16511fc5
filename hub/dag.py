"""Task dependencies (``after: [a, b]``): refused at submit when missing or cyclic, held
until they succeed, failed when one of them fails or is cancelled.

``Hub.submit`` calls ``Dependencies.check`` before anything is stored; the placement loop
asks ``Dependencies.hold`` for each queued task (memory only: no store read on that path)
and skips what is held; ``TaskBook.on_end`` tells this module when a task ends, so the end
state of every task some active task waits for is known without reading the store.
Names are unique for a task's whole life (the store refuses a reused one), so a new batch
can only form a cycle with itself; one with a dependency that already ended badly is
accepted and fails on the next cycle with that reason, as it would have had it waited.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fuyao.errors import InvalidInput, NotFound
from fuyao.spec import TaskSpec, TaskState
from hub.activetask import ActiveTask
from hub.taskbook import TaskBook

KIND_HELD = "WaitingForDependencies"
KIND_FAILED = "DependencyFailed"
REASON_WAITING = "waiting for {deps}"
REASON_FAILED = "dependency {name} {state}: {message}"
REASON_CANCELLED = "dependency {name} was cancelled: {message}"


@dataclass(frozen=True, slots=True)
class Hold:
    """Why a queued task may not be placed now; ``fail`` means it never can be."""

    reason: str
    fail: bool = False


class Dependencies:
    """What each active task waits for, and the end state of the tasks it waits for."""

    def __init__(self, tasks: TaskBook) -> None:
        self.tasks = tasks
        self._ended: dict[str, tuple[TaskState, str]] = {}   # dependency -> (state, message)
        self._wanted: Counter[str] = Counter()               # dependency -> active dependents
        tasks.on_end.append(self._task_ended)

    async def load(self) -> None:
        """After ``TaskBook.load``: learn how the ended dependencies of active tasks ended."""
        for task in self.tasks.active.values():
            self._want(task.spec.after)
        for name in list(self._wanted):
            if self.tasks.by_name(name) is None:
                await self._learn(name)

    async def check(self, specs: Sequence[TaskSpec]) -> None:
        """Refuse (``InvalidInput``) a batch with a missing dependency or a cycle."""
        batch = {s.name: s for s in specs}
        wanted = [name for s in specs for name in s.after]
        self._want(wanted)   # first: a dependency ending while we read is recorded
        try:
            cycle = find_cycle({s.name: s.after for s in specs})
            if cycle:
                raise InvalidInput(f"dependency cycle: {' -> '.join(cycle)}")
            for spec in specs:
                for name in spec.after:
                    if name in batch or self.tasks.by_name(name) is not None:
                        continue
                    try:
                        await self._learn(name)
                    except NotFound:
                        raise InvalidInput(
                            f"task {spec.name}: dependency {name!r} does not exist "
                            "(submit it first, or in the same batch)") from None
        except Exception:
            self._unwant(wanted)
            raise

    def hold(self, task: ActiveTask) -> Hold | None:
        """None when every dependency succeeded; else why the task waits or must fail."""
        after = task.spec.after
        if not after:
            return None
        waiting: list[str] = []
        for name in after:
            active = self.tasks.by_name(name)
            if active is not None:
                waiting.append(f"{name} ({active.state.value})")
                continue
            ended = self._ended.get(name)
            if ended is None:
                waiting.append(f"{name} (unknown)")
            elif ended[0] == TaskState.CANCELLED:
                return Hold(REASON_CANCELLED.format(name=name, message=ended[1]), True)
            elif ended[0] != TaskState.SUCCEEDED:
                return Hold(REASON_FAILED.format(name=name, state=ended[0].value.lower(),
                                                 message=ended[1]), True)
        if not waiting:
            return None
        return Hold(REASON_WAITING.format(deps=", ".join(waiting)))

    def states(self, task: ActiveTask | None, spec: TaskSpec) -> dict[str, str]:
        """Each dependency's state as far as the hub knows (for ``task explain``)."""
        out: dict[str, str] = {}
        for name in spec.after:
            active = self.tasks.by_name(name)
            ended = self._ended.get(name)
            out[name] = (active.state.value if active is not None
                         else ended[0].value if ended is not None else "Unknown")
        return out

    def _want(self, names: Iterable[str]) -> None:
        self._wanted.update(names)

    def _unwant(self, names: Iterable[str]) -> None:
        """Forget what nobody waits for any more."""
        for name in names:
            self._wanted[name] -= 1
            if self._wanted[name] <= 0:
                del self._wanted[name]
                self._ended.pop(name, None)

    def _task_ended(self, task: ActiveTask) -> None:
        if self._wanted.get(task.name):
            self._ended[task.name] = (task.state, task.message)
        self._unwant(task.spec.after)   # it no longer waits

    async def _learn(self, name: str) -> None:
        """Read an ended task's state from the store (NotFound if there is no such task)."""
        rec = await self.tasks.writer.read(self.tasks.writer.store.get_task, name)
        state = TaskState(rec.state)
        if state.terminal:
            self._ended[name] = (state, rec.message)


def find_cycle(graph: dict[str, list[str]]) -> list[str]:
    """A dependency cycle among ``graph``'s nodes as ``[a, b, a]``, or ``[]``; edges to names
    outside the graph are ignored. Iterative DFS, so a 10,000-task chain is fine."""
    state: dict[str, int] = {}   # 1: on the current path, 2: done
    for root in graph:
        if root in state:
            continue
        path: list[str] = []
        stack: list[tuple[str, int]] = [(root, 0)]
        while stack:
            node, i = stack.pop()
            if i == 0:
                state[node] = 1
                path.append(node)
            edges = graph.get(node, [])
            if i < len(edges):
                stack.append((node, i + 1))
                nxt = edges[i]
                if nxt not in graph:
                    continue
                if state.get(nxt) == 1:
                    return [*path[path.index(nxt):], nxt]
                if nxt not in state:
                    stack.append((nxt, 0))
            else:
                state[node] = 2
                path.pop()
    return []
