"""What arrives in a simulation: trace pod lists, task files or the live queue, and in which order.

Called by ``hub.planning.simulate.engine`` (through ``fuyaoctl simulate`` and
``bench/trace_quality.py``). A pod list (``openb_pod_list_*.csv``) comes in two layouts:
``name,cpu_milli,memory_mib,num_gpu,gpu_milli`` and the same followed by
``gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time``; both are read, and
the times, when present, give each pod its arrival time and duration (``--durations``).
``gpu_milli`` < 1000 with one GPU is a share of one card, ``num_gpu`` > 1 whole cards;
``gpu_spec`` (``V100M16|V100M32``) becomes ``gpu_model`` plus, when every alternative names
its memory, a ``fuyao.io/gpu-memory`` selector. Task files and queued tasks arrive as
``TaskSpec`` models (parsed by the caller) and keep their own selectors and durations.

The arrival order follows the FGD simulator: sort by name, shuffle with the seed, then add
random clones of tasks until the GPU demand reaches ``tune`` x capacity (1.3 in the paper),
so any ``--arrival`` up to ``tune`` can be reached. Python's RNG: the same procedure as the
authors', not the same permutations.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from fuyao.catalog import DEFAULT_CATALOG
from fuyao.errors import InvalidInput
from fuyao.inventory import NodeInfo
from fuyao.selector import Selector, parse_selector
from fuyao.spec import TaskRequests, TaskSpec

WHOLE = 1000
FGD_TUNE = 1.3
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
TIME_COLUMNS = ("creation_time", "deletion_time")
MAX_TASKS = 1_000_000
MAX_FILE_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SimTask:
    """One task as the hub and the member see it, with its trace times when known."""

    name: str
    requests: TaskRequests
    selector: Selector
    gpu_spec: str = ""
    arrival: float | None = None     # seconds on the trace's clock
    duration: float | None = None    # seconds it runs once placed (None: forever)

    @property
    def gpu_milli(self) -> int:
        """GPU demand in milli-devices (what 'arrived workload' counts)."""
        return self.requests.gpu_milli * self.requests.replicas


def gpu_constraint(gpu_spec: str) -> tuple[str | None, str | None]:
    """``gpu_spec`` -> (``TaskSpec.gpu_model``, extra selector) in canonical model names.

    ``V100M16|V100M32`` -> ``("V100", "fuyao.io/gpu-memory in (16Gi, 32Gi)")``; a model given
    without memory (``P100|V100M16``) leaves memory free.
    """
    parts = [p.strip() for p in gpu_spec.split("|") if p.strip()]
    if not parts:
        return None, None
    models: list[str] = []
    memories: list[int | None] = []
    for part in parts:
        model, memory = DEFAULT_CATALOG.canonical(part)
        if model not in models:
            models.append(model)
        memories.append(memory)
    selector = None
    if all(m is not None for m in memories):
        gib = sorted({m // 1024 for m in memories if m is not None})
        selector = f"fuyao.io/gpu-memory in ({', '.join(f'{g}Gi' for g in gib)})"
    return "|".join(models), selector


def task_from_row(row: Mapping[str, str | None], where: str) -> SimTask:
    """One pod-list row as a validated task."""
    try:
        values = {c: int((row.get(c) or "0").strip() or "0") for c in POD_COLUMNS[1:]}
    except ValueError as exc:
        raise InvalidInput(f"{where}: not a whole number: {exc}") from exc
    if any(v < 0 for v in values.values()):
        raise InvalidInput(f"{where}: negative amount")
    num_gpu, gpu_milli = values["num_gpu"], values["gpu_milli"]
    if num_gpu > 1 and gpu_milli != WHOLE:
        raise InvalidInput(f"{where}: {num_gpu} GPUs of {gpu_milli}m: only one GPU can be shared")
    if num_gpu == 1 and not 0 < gpu_milli <= WHOLE:
        raise InvalidInput(f"{where}: one GPU of {gpu_milli}m: expected 1..1000")
    gpu = 0 if num_gpu == 0 else (f"{gpu_milli}m" if num_gpu == 1 else str(num_gpu))
    spec_text = (row.get("gpu_spec") or "").strip()
    model, selector = gpu_constraint(spec_text)
    try:
        spec = TaskSpec(name=(row.get("name") or "").strip(), cpu=f"{values['cpu_milli']}m",
                        memory=f"{values['memory_mib']}Mi", gpu=gpu, gpu_model=model,
                        selector=selector)
    except ValueError as exc:   # pydantic's ValidationError
        raise InvalidInput(f"{where}: {exc}") from exc
    arrival, duration = _times(row, where)
    return SimTask(spec.name, spec.requests(), parse_selector(spec.effective_selector()),
                   spec_text, arrival, duration)


def _times(row: Mapping[str, str | None], where: str) -> tuple[float | None, float | None]:
    texts = [(row.get(c) or "").strip() for c in (*TIME_COLUMNS, "scheduled_time")]
    if not texts[0] or not texts[1]:
        return None, None
    try:
        created, deleted = float(texts[0]), float(texts[1])
        started = float(texts[2]) if texts[2] else created
    except ValueError as exc:
        raise InvalidInput(f"{where}: times must be numbers of seconds: {exc}") from exc
    return created, max(0.0, deleted - max(created, started))


def load_pod_list(path: Path) -> list[SimTask]:
    """Every pod of a pod list, in either layout (see the module docstring)."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise InvalidInput(f"{path}: pod list larger than {MAX_FILE_BYTES >> 20} MiB")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path}: not a UTF-8 text file") from exc
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read pod list: {exc.strerror or exc}") from exc
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in POD_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise InvalidInput(f"{path}: header: missing column(s) {', '.join(missing)} "
                           f"(expected {','.join(POD_COLUMNS)}[,gpu_spec,...])")
    tasks: list[SimTask] = []
    for i, row in enumerate(reader):
        if i >= MAX_TASKS:
            raise InvalidInput(f"{path}: more than {MAX_TASKS} pods")
        tasks.append(task_from_row(row, f"{path}: row {i} (line {i + 2})"))
    if not tasks:
        raise InvalidInput(f"{path}: no pods")
    _unique([t.name for t in tasks], str(path))
    return tasks


def tasks_from_specs(specs: Iterable[TaskSpec], source: str) -> list[SimTask]:
    """Task-file or queued tasks: their own selectors and ``duration`` (if any)."""
    tasks = [SimTask(s.name, s.requests(), parse_selector(s.effective_selector()), "",
                     None, s.duration_seconds()) for s in specs]
    if not tasks:
        raise InvalidInput(f"{source}: no tasks")
    _unique([t.name for t in tasks], source)
    return tasks


def _unique(names: Sequence[str], source: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InvalidInput(f"{source}: task name {name!r} appears twice")
        seen.add(name)


def arrival_order(tasks: Sequence[SimTask], seed: int, capacity_milli: int,
                  tune: float = FGD_TUNE) -> list[SimTask]:
    """The FGD simulator's order: by name, shuffled, then tuned to ``tune`` x capacity.

    Tuning up appends clones (``<name>-tuned-<i>``) drawn uniformly from the tasks until the
    next one would pass the target; tuning down drops random tasks until it is met.
    """
    rng = random.Random(seed)
    ordered = sorted(tasks, key=lambda t: t.name)
    out = list(ordered)
    rng.shuffle(out)
    target = tune * capacity_milli
    demand = sum(t.gpu_milli for t in out)
    while demand > target and out:
        demand -= out.pop(rng.randrange(len(out))).gpu_milli
    clone = 0
    gpu_tasks = [t for t in ordered if t.gpu_milli]
    while demand < target and gpu_tasks:
        pick = ordered[rng.randrange(len(ordered))]
        if demand + pick.gpu_milli > target:
            break
        out.append(replace(pick, name=f"{pick.name}-tuned-{clone}"))
        demand += pick.gpu_milli
        clone += 1
    return out


def timed_order(tasks: Sequence[SimTask], seed: int) -> list[SimTask]:
    """``--durations``: tasks with trace times in arrival-time order (ties by name); others
    after them in the seeded order, one a second after the last timed arrival."""
    timed = sorted((t for t in tasks if t.arrival is not None),
                   key=lambda t: (t.arrival or 0.0, t.name))
    rest = sorted((t for t in tasks if t.arrival is None), key=lambda t: t.name)
    random.Random(seed).shuffle(rest)
    start = (timed[-1].arrival or 0.0) if timed else 0.0
    return timed + [replace(t, arrival=start + i + 1.0) for i, t in enumerate(rest)]


def check_constraints(tasks: Iterable[SimTask], nodes: Sequence[NodeInfo],
                      raw_models: Mapping[str, str]) -> int:
    """Tasks whose selector admits a different node set than their ``gpu_spec`` means.

    FGD matches a spec against each node's raw model (``V100M32``); ``raw_models`` maps node
    name -> that string (from the node list).
    """
    memo: dict[str, bool] = {}
    wrong = 0
    for task in tasks:
        if not task.gpu_spec:
            continue
        if task.gpu_spec not in memo:
            wanted = set(task.gpu_spec.split("|"))
            memo[task.gpu_spec] = any(
                (raw_models.get(n.name, "") in wanted) != task.selector.matches(n.labels)
                for n in nodes if n.devices)
        wrong += memo[task.gpu_spec]
    return wrong
