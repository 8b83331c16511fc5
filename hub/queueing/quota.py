"""Queues in memory and the quota rules: pure functions of queues, usage and a demand.

``QueueState`` is one queue's settings in fixed units (built from a ``QueueRecord``);
``demand`` turns a task's requests into a resource vector; ``Usage`` sums what each queue's
admitted (Placed or Running) tasks use, fleet-wide and per cluster; ``quota_hold`` says
which quota, if any, holds a task back (with borrowing from the other queues' idle quota,
Kueue's cohort rule); ``cluster_holds`` names the clusters whose per-cluster quota it would
exceed. ``hub.queueing.cycle`` and ``hub.queueing.preempt`` call these; the tests drive
them with tables and hypothesis.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fuyao.queues import format_resource, parse_resource
from fuyao.spec import TaskRequests
from hub.store import QueueRecord

Vector = dict[str, int]


@dataclass(frozen=True)
class QueueState:
    """One queue: level, weight, quotas and borrow limits in fixed units."""

    name: str
    priority: int = 0
    weight: int = 1
    limits: Mapping[str, int] = field(default_factory=dict)
    borrow: Mapping[str, int] = field(default_factory=dict)
    cluster_limits: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @classmethod
    def from_record(cls, rec: QueueRecord) -> QueueState:
        """Parse a stored queue's quantities."""
        return cls(
            rec.name, rec.priority, rec.weight,
            {r: parse_resource(r, q) for r, q in rec.quotas.items()},
            {r: parse_resource(r, q) for r, q in rec.borrow.items()},
            {c: {r: parse_resource(r, q) for r, q in m.items()}
             for c, m in rec.cluster_quotas.items()},
        )


def demand(req: TaskRequests, model: str | None = None) -> Vector:
    """What a task uses, all replicas: cpu, memory, gpu (and ``gpu.<model>`` once the fit
    chose a model), gpu-memory (the per-device minimum times its devices; for a task that
    shares a device by memory, the memory it asks)."""
    n = req.replicas
    out: Vector = {"cpu": req.cpu_milli * n, "memory": req.memory_mib * n}
    if req.gpu_milli:
        out["gpu"] = req.gpu_milli * n
        if model:
            out[f"gpu.{model}"] = req.gpu_milli * n
        if req.gpu_memory_mib:
            out["gpu-memory"] = req.gpu_memory_mib * req.gpu_devices * n
    if req.gpu_mem_mib:     # GPU memory sharing: the memory it asks of one device
        out["gpu-memory"] = req.gpu_mem_mib * n
    return out


def add(into: Vector, more: Mapping[str, int], sign: int = 1) -> None:
    """``into += sign * more``, in place."""
    for key, value in more.items():
        into[key] = into.get(key, 0) + sign * value


@dataclass
class Usage:
    """What each queue's admitted tasks use: fleet-wide and per cluster."""

    total: dict[str, Vector] = field(default_factory=dict)
    by_cluster: dict[tuple[str, str], Vector] = field(default_factory=dict)

    def charge(self, queue: str, cluster: str | None, amount: Mapping[str, int],
               sign: int = 1) -> None:
        """Count (or, with ``sign=-1``, uncount) a task's demand."""
        add(self.total.setdefault(queue, {}), amount, sign)
        if cluster is not None:
            add(self.by_cluster.setdefault((queue, cluster), {}), amount, sign)

    def of(self, queue: str) -> Vector:
        """A queue's fleet-wide use (empty if none)."""
        return self.total.get(queue, {})


def _label(resource: str) -> str:
    return resource.replace(".", " ", 1)


def _need(resource: str, demand_of: Mapping[str, int]) -> int:
    return demand_of.get(resource, 0)


def quota_hold(queue: QueueState, queues: Iterable[QueueState], usage: Usage,
               need: Mapping[str, int]) -> str | None:
    """Why ``need`` cannot be admitted to ``queue`` now, or None if it can.

    Within its quota it is admitted; above it, only up to its borrow limit and only while
    the other queues' idle quota of that resource covers the excess. A resource without a
    quota is not limited. A task asking more than quota plus borrow limit on its own is
    told so (it waits until the queue's quota grows; Kueue keeps such workloads pending
    too, rather than refusing them).
    """
    used = usage.of(queue.name)
    for resource in sorted(queue.limits):
        amount = _need(resource, need)
        if not amount:
            continue
        limit = queue.limits[resource]
        now = used.get(resource, 0)
        over = now + amount - limit
        if over <= 0:
            continue
        held = (f"queue {queue.name}: {_label(resource)} quota "
                f"{format_resource(resource, limit)}, in use {format_resource(resource, now)}")
        allowed = queue.borrow.get(resource, 0)
        if over > allowed:
            extra = f" (+{format_resource(resource, allowed)} borrowable)" if allowed else ""
            if amount > limit + allowed:     # it waits until the quota grows, not for use
                extra += (f"; the task asks {format_resource(resource, amount)}, more than "
                          f"the quota{' and borrow limit allow' if allowed else ' allows'}")
            return held + extra
        if over > idle_quota(queue.name, resource, queues, usage):
            return held + "; no idle quota to borrow"
    return None


def idle_quota(owner: str, resource: str, queues: Iterable[QueueState], usage: Usage) -> int:
    """The other queues' unused quota of ``resource`` (what ``owner`` may borrow from):
    their quotas minus their use, borrowers' use included, so no idle quota is lent twice
    (Kueue's cohort: what all queues with a quota use never exceeds their quotas' sum)."""
    idle = 0
    for q in queues:
        if q.name == owner or resource not in q.limits:
            continue
        idle += q.limits[resource] - usage.of(q.name).get(resource, 0)
    return max(0, idle)


def borrowing(queue: QueueState, usage: Usage) -> set[str]:
    """The resources ``queue`` uses beyond its quota now (borrowed)."""
    used = usage.of(queue.name)
    return {r for r, limit in queue.limits.items() if used.get(r, 0) > limit}


def cluster_holds(queue: QueueState, usage: Usage, need: Mapping[str, int],
                  clusters: Iterable[str]) -> dict[str, str]:
    """Clusters where ``need`` would exceed ``queue``'s per-cluster quota, with the reason."""
    out: dict[str, str] = {}
    for cluster in clusters:
        limits = queue.cluster_limits.get(cluster)
        if not limits:
            continue
        used = usage.by_cluster.get((queue.name, cluster), {})
        for resource in sorted(limits):
            amount = _need(resource, need)
            if amount and used.get(resource, 0) + amount > limits[resource]:
                out[cluster] = (
                    f"queue {queue.name}: {_label(resource)} quota on {cluster} "
                    f"{format_resource(resource, limits[resource])}, "
                    f"in use {format_resource(resource, used.get(resource, 0))}")
                break
    return out


def dominant_share(used: Mapping[str, int], totals: Mapping[str, int]) -> float:
    """The largest fraction of any fleet resource ``used`` takes (DRF's dominant share)."""
    best = 0.0
    for resource, total in totals.items():
        if total > 0:
            best = max(best, used.get(resource, 0) / total)
    return best
