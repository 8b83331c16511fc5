"""Nearest fit: the smallest change to a request that the real scheduler would place now.

``nearest_fit`` is called by ``hub.explain.report`` (``task explain``, ``task submit
--dry-run``) for a task no cluster takes. It asks ``Scheduler.schedule`` - the same filters,
fit search and headroom rule as the placement loop, on the live fleet view, reserving
nothing - about variants of the request, one dimension at a time:

- fewer replicas (the most that fit, found by bisection),
- fewer GPUs per replica (whole cards; the most that fit, by bisection),
- another accelerator model (each model some cluster has, with the task's other
  requirements kept),
- another queue (when a queue-state function says the queue, not the fleet, holds it).

When a queue quota holds the task (the fleet has room), ``admits`` is the queue's own quota
rule: a variant counts only if the fleet takes it AND the quota admits it, so "fewer
replicas" means the most replicas the quota lets in now.

Each answer that fits is an ``Alternative`` with a cost: the fraction of the request given
up (``1 - kept/asked`` GPUs, or replicas for CPU tasks); a model change gives up no quantity
but different hardware, and costs ``MODEL_COST``. The nearest fit is the cheapest; ties go
in the order above. At most ``~2 log2(n) + models`` schedule calls, all in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from fuyao.catalog import DEFAULT_CATALOG
from fuyao.labels import GPU_MODEL
from fuyao.selector import Requirement, Selector
from fuyao.spec import TaskRequests
from hub.fleet import NO_MODEL, WHOLE
from hub.placement.framework import PlacementRequest
from hub.placement.result import PlacementResult
from hub.placement.scheduler import Scheduler

MODEL_COST = 0.5
"""What a different accelerator model counts as, against giving up a share of the request."""

Schedule = Callable[[PlacementRequest], PlacementResult | None]   # None: no fit
Admits = Callable[[TaskRequests, str | None], bool]   # (variant's requests, chosen model)


@dataclass(frozen=True, slots=True)
class Alternative:
    """A changed request that fits now: what changed, where it would go, and its cost."""

    change: dict[str, Any]
    description: str
    cluster: str
    nodes: tuple[str, ...]
    cost: float

    def to_json(self) -> dict[str, Any]:
        """The JSON shape ``task explain`` shows."""
        return {"change": self.change, "description": self.description,
                "cluster": self.cluster, "nodes": list(self.nodes), "cost": round(self.cost, 3)}


def alternatives(scheduler: Scheduler, req: PlacementRequest,
                 admits: Admits | None = None) -> list[Alternative]:
    """Every single-dimension change that fits now (and that ``admits`` lets in), cheapest
    first."""
    def schedule(variant: PlacementRequest) -> PlacementResult | None:
        result = scheduler.schedule(variant)
        if result.cluster is None:
            return None
        if admits is not None and not admits(variant.requests, result.model):
            return None
        return result

    r = req.requests
    found: list[Alternative] = []
    if r.gpu_milli:
        found += _models(scheduler, schedule, req)
    if r.gpu_milli >= WHOLE and r.gpu_milli // WHOLE > 1 and not r.gpu_mem_mib:
        cards = r.gpu_milli // WHOLE
        best = _most(schedule, req, cards - 1,
                     lambda k: replace(r, gpu_milli=k * WHOLE))
        if best is not None:
            k, result = best
            found.append(_alt({"gpu": k}, f"with {k} GPU{'s' if k > 1 else ''} per replica "
                              f"instead of {cards}", result, 1 - k / cards))
    if r.replicas > 1:
        best = _most(schedule, req, r.replicas - 1, lambda k: replace(r, replicas=k))
        if best is not None:
            k, result = best
            found.append(_alt({"replicas": k}, f"with {k} replica{'s' if k > 1 else ''} "
                              f"instead of {r.replicas}", result, 1 - k / r.replicas))
    found.sort(key=lambda a: a.cost)   # stable: ties keep the order above
    return found


def _most(
    schedule: Schedule, req: PlacementRequest, top: int,
    shape: Callable[[int], Any],
) -> tuple[int, PlacementResult] | None:
    """The largest k in 1..top whose variant fits (fit is monotone in k), with its result."""
    low, high, best = 1, top, None
    while low <= high:
        mid = (low + high) // 2
        result = schedule(_variant(req, requests=shape(mid)))
        if result is not None:
            best, low = (mid, result), mid + 1
        else:
            high = mid - 1
    return best


def _models(
    scheduler: Scheduler, schedule: Schedule, req: PlacementRequest,
) -> list[Alternative]:
    """One alternative per other GPU model in the fleet that would take the task now."""
    kept = tuple(q for q in req.selector.requirements if q.key != GPU_MODEL)
    asked = [q for q in req.selector.requirements if q.key == GPU_MODEL]
    models = sorted({m for c in scheduler.fleet.ordered for m, t in c.totals().items()
                     if m != NO_MODEL and t.devices and _is_gpu(m)})
    out: list[Alternative] = []
    for model in models:
        if asked and all(q.matches({GPU_MODEL: model}) for q in asked):
            continue    # the model was allowed already: not a change
        selector = Selector((*kept, Requirement(GPU_MODEL, "=", (model,))))
        result = schedule(_variant(req, selector=selector))
        if result is not None:
            out.append(_alt({"gpu_model": model}, f"on {model} instead of "
                            f"{_asked(asked)}", result, MODEL_COST))
    return _best_ranked(out)


def _best_ranked(found: list[Alternative]) -> list[Alternative]:
    """The three best-ranked models that fit (a better card before a lesser one)."""
    def rank(alt: Alternative) -> int:
        return -(DEFAULT_CATALOG.rank(str(alt.change["gpu_model"])) or 0)
    return sorted(found, key=rank)[:3]


def _is_gpu(model: str) -> bool:
    entry = DEFAULT_CATALOG.get(model)
    return entry is None or entry.kind == "gpu"


def _asked(asked: list[Requirement]) -> str:
    return ", ".join(str(q) for q in asked) if asked else "any model"


def _variant(req: PlacementRequest, **changes: Any) -> PlacementRequest:
    """The request with ``changes``, as a fresh placement (no failover, nothing excluded)."""
    return replace(req, failover=False, exclude=frozenset(), **changes)


def _alt(change: dict[str, Any], description: str, result: PlacementResult,
         cost: float) -> Alternative:
    assert result.cluster is not None
    return Alternative(change, description, result.cluster, result.nodes, cost)
