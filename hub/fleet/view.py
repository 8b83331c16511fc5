"""The hub's live fleet view: every member cluster, its nodes and the hub's reservations.

One instance lives in the hub process and is touched only from its asyncio thread (no
locks). The cluster manager keeps cluster entries in step (``upsert_cluster``,
``set_state``, ``set_cordoned``, ``remove_cluster``); the agent channel feeds inventories
(``replace_nodes`` on connect or resync, ``apply_delta`` after); the placement loop asks the
scheduler (``hub.placement``), which reads ``cluster``/``clusters``, then ``reserve``s the
chosen nodes and ``release``s them when the member reports the task bound or finished.
The REST API reads ``capacity`` and ``summary``.

Accounting: a node's ``free`` as the agent reports it already counts what the member has
bound; hub reservations (placed, not yet bound) are subtracted on top, per node and device.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from fuyao.errors import Conflict, InvalidInput, NotFound
from fuyao.labelsets import OWN_KEYS, expand
from fuyao.spec import CapacityRow, ClusterState, TaskRequests
from fuyao.taints import Taint
from fuyao.wire.v1 import agent_pb2 as pb
from hub.fleet.capacity import capacity_rows
from hub.fleet.cluster import ClusterInfo, MatchMemo
from hub.fleet.fit import plan_holds
from hub.fleet.nodes import Hold, NodeReport, NodeState, refuse_bad_reports

PER_NODE_LABEL_KEYS: Final = OWN_KEYS
"""Labels that differ on every node: left out when grouping nodes by label set."""


@dataclass(frozen=True, slots=True)
class Reservation:
    """Resources the hub holds for a task placed on a cluster but not yet bound there."""

    task_id: str
    cluster: str
    requests: TaskRequests
    nodes: tuple[str, ...]
    model: str | None
    holds: Mapping[str, Hold]


class FleetView:
    """Every member cluster's settings, nodes and index, plus the hub's reservations."""

    def __init__(self, *, per_node_label_keys: Iterable[str] = PER_NODE_LABEL_KEYS) -> None:
        self._clusters: dict[str, ClusterInfo] = {}
        self._ordered: tuple[ClusterInfo, ...] | None = None
        self._reservations: dict[str, Reservation] = {}
        self._ignore = frozenset(per_node_label_keys)
        self._memo = MatchMemo()
        self._changed: dict[str, ClusterInfo] = {}   # every cluster, last changed last
        self._offer = 0     # the newest capacity_version or settings_version of any cluster

    # -- clusters --------------------------------------------------------------------------

    def upsert_cluster(
        self, name: str, *, labels: Mapping[str, str], weight: int, headroom: float,
        state: ClusterState, cordoned: bool = False, taints: tuple[Taint, ...] = (),
    ) -> None:
        """Add a cluster or update its settings; an existing one keeps nodes and reservations."""
        if weight < 0:
            raise InvalidInput(f"cluster {name}: weight {weight} must not be negative")
        if not 0.0 <= headroom < 1.0:
            raise InvalidInput(f"cluster {name}: headroom {headroom} must be in [0, 1)")
        existing = self._clusters.get(name)
        if existing is not None:
            existing._configure(labels, weight, headroom, state, cordoned, taints)
            return
        self._clusters[name] = cluster = ClusterInfo(
            name, labels=labels, weight=weight, headroom=headroom, state=state,
            cordoned=cordoned, ignore_keys=self._ignore, memo=self._memo,
            on_change=self._note,
        )
        cluster.taints = tuple(taints)
        self._note(cluster)
        self._ordered = None

    def remove_cluster(self, name: str) -> None:
        """Forget a cluster, its nodes and the reservations held on it (no-op if unknown)."""
        if self._clusters.pop(name, None) is None:
            return
        del self._changed[name]
        self._ordered = None
        for task_id in [t for t, r in self._reservations.items() if r.cluster == name]:
            del self._reservations[task_id]

    def clear(self) -> None:
        """Forget every cluster and reservation: a planning copy once spent, so that its
        clusters (which call back into the view) are freed by reference counting rather
        than left to the cyclic collector."""
        self._ordered = None
        self._changed.clear()
        self._reservations.clear()
        self._memo.clear()
        while self._clusters:   # one at a time: a thread clearing lets the others run between
            self._clusters.popitem()

    def set_state(self, name: str, state: ClusterState) -> None:
        """Record a health transition (Ready, Unknown, NotReady...)."""
        c = self._get(name)
        c._configure(c.labels, c.weight, c.headroom, state, c.cordoned)

    def set_cordoned(self, name: str, cordoned: bool) -> None:
        """Cordon (no new placements) or uncordon a cluster."""
        c = self._get(name)
        c._configure(c.labels, c.weight, c.headroom, c.state, cordoned)

    def cluster(self, name: str) -> ClusterInfo | None:
        """One cluster (read-only for callers), or None."""
        return self._clusters.get(name)

    def clusters(self) -> list[ClusterInfo]:
        """Every cluster, sorted by name."""
        return list(self.ordered)

    @property
    def per_node_label_keys(self) -> frozenset[str]:
        """The label keys left out when grouping nodes (a copy of the view needs the same)."""
        return self._ignore

    @property
    def ordered(self) -> tuple[ClusterInfo, ...]:
        """Every cluster sorted by name, without copying (the scheduler's hot path)."""
        if self._ordered is None:
            self._ordered = tuple(self._clusters[n] for n in sorted(self._clusters))
        return self._ordered

    @property
    def tick(self) -> int:
        """The newest ``version`` of any cluster: ``changed_since`` this shows later changes."""
        return next(reversed(self._changed.values())).version if self._changed else 0

    @property
    def offer_version(self) -> tuple[tuple[ClusterInfo, ...], int]:
        """Moves whenever what some cluster could offer empty may have changed: a cluster
        joined or left (the ``ordered`` tuple is a new one), or one's ``capacity_version``
        or ``settings_version`` moved. Reservations and reported use leave it alone."""
        return self.ordered, self._offer

    def changed_since(self, tick: int) -> list[ClusterInfo]:
        """The clusters whose ``version`` is above ``tick`` (changed since), newest first.

        Costs one step per cluster returned: the scheduler's caches ask it every decision.
        """
        out: list[ClusterInfo] = []
        for cluster in reversed(self._changed.values()):
            if cluster.version <= tick:
                break
            out.append(cluster)
        return out

    def _note(self, cluster: ClusterInfo) -> None:
        """A cluster changed: move it last (``_changed`` stays in version order)."""
        self._changed.pop(cluster.name, None)
        self._changed[cluster.name] = cluster
        offer = max(cluster.capacity_version, cluster.settings_version)
        if offer > self._offer:
            self._offer = offer

    # -- inventory -------------------------------------------------------------------------

    def replace_nodes(self, cluster: str, nodes: Iterable[NodeReport],
                      label_sets: Sequence[pb.LabelSet] | None = None) -> None:
        """A full inventory: nodes not in it are removed; reservations are kept. The nodes
        may be ``NodeInfo``s or the wire's ``pb.Node``s as received (the agent channel's:
        no ``NodeInfo`` built), which then name sets of ``label_sets`` (``fuyao.labelsets``;
        given for wire nodes only, even empty: a node naming a set beyond it is refused); the
        fleet keeps no reference to them. A report the wire's rules refuse (``InvalidInput``,
        ``fuyao.inventory.device_columns``, ``fuyao.labelsets``) changes nothing."""
        c = self._get(cluster)
        if c.node_count and label_sets is not None:   # a resync: checked before any drop
            nodes, label_sets = expand(list(nodes), label_sets), None   # type: ignore[arg-type]
        fresh = {n.name: n for n in nodes}
        if c.node_count:
            refuse_bad_reports(fresh.values())   # before a node is dropped (a resync: rare)
            for gone in [n.name for n in c.nodes() if n.name not in fresh]:
                c._drop(gone)
        if c.node_count:
            for node in fresh.values():
                c._put(node)
        else:   # a first inventory (or all new): filed in one pass
            c._put_all(fresh, label_sets)

    def file_states(self, cluster: str, states: Iterable[NodeState]) -> None:
        """A planning snapshot's inventory (``hub.planning.snapshot``): node states another
        view filed, shared as they are, into a cluster of this view that has no node yet."""
        self._get(cluster)._put_states(states)

    def apply_delta(
        self, cluster: str, upserted: Iterable[NodeReport], removed: Iterable[str],
    ) -> None:
        """Changed nodes since the last report, and nodes that left. Like ``replace_nodes``,
        the nodes may be ``NodeInfo``s or the wire's ``pb.Node``s as received, and a delta
        with a report the wire's rules refuse changes nothing."""
        c = self._get(cluster)
        upserted = list(upserted)
        refuse_bad_reports(upserted)
        for node in upserted:
            c._put(node)
        for name in removed:
            c._drop(name)

    # -- reservations ----------------------------------------------------------------------

    def reserve(
        self, cluster: str, task_id: str, requests: TaskRequests, nodes: Sequence[str],
        *, model: str | None = None,
    ) -> None:
        """Hold one replica's resources on each of ``nodes`` for ``task_id``.

        Idempotent: the same reservation again is a no-op. ``Conflict`` (nothing changed) if
        the task already holds a different reservation or the nodes no longer have room.
        ``model`` pins the device model (as the fit found it); by default any that fits.
        """
        c = self._get(cluster)
        names = tuple(nodes)
        held = self._reservations.get(task_id)
        if held is not None:
            if (held.cluster, held.requests, held.nodes) == (cluster, requests, names):
                return
            raise Conflict(f"task {task_id} already holds a reservation on cluster "
                           f"{held.cluster}; release it first")
        if len(names) != requests.replicas:
            raise InvalidInput(f"task {task_id}: {len(names)} nodes given for "
                               f"{requests.replicas} replicas")
        plan = plan_holds(c, requests, names, model)
        for node, hold in plan.items():
            c._hold(node, hold, 1)
        self._reservations[task_id] = Reservation(task_id, cluster, requests, names, model, plan)

    def release(self, task_id: str) -> None:
        """Give back what a task holds (no-op if it holds nothing)."""
        held = self._reservations.pop(task_id, None)
        if held is None:
            return
        c = self._clusters.get(held.cluster)
        if c is not None:
            for node, hold in held.holds.items():
                c._hold(node, hold, -1)

    def release_many(self, task_ids: Iterable[str]) -> None:
        """``release`` for many tasks, each node refiled once: a lost cluster's re-queue
        gives back thousands of holds on a few hundred nodes (the holds add up, so their
        sum taken away at once leaves each node as the releases one by one would)."""
        summed: dict[tuple[str, str], Hold] = {}
        for task_id in task_ids:
            held = self._reservations.pop(task_id, None)
            if held is None:
                continue
            for node, hold in held.holds.items():
                total = summed.get((held.cluster, node))
                if total is None:
                    total = summed[(held.cluster, node)] = Hold()
                total.add(hold)
        for (cluster, node), total in summed.items():
            c = self._clusters.get(cluster)
            if c is not None:
                c._hold(node, total, -1)

    def reservation_cluster(self, task_id: str) -> str | None:
        """The cluster a task holds resources on, or None."""
        held = self._reservations.get(task_id)
        return None if held is None else held.cluster

    def reservation(self, task_id: str) -> Reservation | None:
        """A task's reservation, or None."""
        return self._reservations.get(task_id)

    # -- views -----------------------------------------------------------------------------

    def capacity(self, cluster: str | None = None) -> list[CapacityRow]:
        """Capacity rows per (cluster, model), sorted; one cluster's, or [] if unknown."""
        if cluster is not None:
            c = self._clusters.get(cluster)
            return [] if c is None else capacity_rows(c)
        return [row for c in self.ordered for row in capacity_rows(c)]

    def summary(self, cluster: str) -> dict[str, int]:
        """``{"nodes": n, "<model>": devices, ...}`` for the cluster list (zeros if unknown)."""
        c = self._clusters.get(cluster)
        if c is None:
            return {"nodes": 0}
        out = {"nodes": c.node_count}
        totals = c.totals()
        out.update({model: totals[model].devices for model in sorted(totals)
                    if totals[model].devices})
        return out

    def unschedulable_devices(self, cluster: str) -> dict[str, int]:
        """``{"<model>": devices}`` on the cluster's cordoned or NotReady nodes (for the list)."""
        c = self._clusters.get(cluster)
        totals = c.totals() if c is not None else {}
        return {m: totals[m].off_devices for m in sorted(totals) if totals[m].off_devices}

    def _get(self, name: str) -> ClusterInfo:
        c = self._clusters.get(name)
        if c is None:
            raise NotFound(f"cluster {name!r} is not in the fleet")
        return c
