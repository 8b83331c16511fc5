"""The placement framework's contract: statuses, requests, per-decision state, plugin protocols.

Modelled on kube-scheduler's ``framework/interface.go`` at cluster level: a plugin implements
one or more extension points - ``filter`` (may this cluster take the task?), ``score``
(0..100, higher is better), ``reserve``/``unreserve`` (idempotent). Expected rejections are
``Status`` values with a named reason constant from the plugin's module; an exception inside
a plugin is a bug, which the scheduler (``hub.placement.scheduler``) turns into an ``ERROR``
status naming the plugin. Plugins are built by the registry (``hub.placement.registry``)
from a ``Handle`` and listed, in order and with score weights, by a ``Profile``. The request
they judge, ``PlacementRequest``, and a decision's scratch, ``CycleState``, are defined in
modules compiled with the engine (``hub.placement.request``, ``hub.placement.cyclestate``)
and exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import ClassVar, Final, Protocol, cast

from hub.fleet import ClusterInfo, Fit, FleetView
from hub.placement.cyclestate import CycleState as CycleState  # exported
from hub.placement.request import PlacementRequest as PlacementRequest  # exported

MAX_SCORE: Final = 100.0
MIN_SCORE: Final = 0.0


class Code(Enum):
    """What a plugin says about a cluster."""

    SUCCESS = "Success"
    UNSCHEDULABLE = "Unschedulable"                                  # may fit later
    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"  # waiting will not help
    ERROR = "Error"                                                  # a plugin bug


@dataclass(frozen=True, slots=True)
class Status:
    """A plugin's verdict: a code, a user-facing reason and the plugin that gave it."""

    code: Code
    reason: str = ""
    plugin: str = ""
    ok: bool = field(init=False, repr=False, compare=False)   # code is SUCCESS

    def __post_init__(self) -> None:
        object.__setattr__(self, "ok", self.code is Code.SUCCESS)


SUCCESS = Status(Code.SUCCESS)
"""The one success status (plugins return it instead of building a new one)."""


@dataclass(frozen=True, slots=True)
class Handle:
    """What a plugin factory gets: the fleet view and the scheduler's settings."""

    fleet: FleetView
    headroom_priority: int = 1000


class Depends(IntEnum):
    """What of a cluster a filter's or score's answer reads, besides the request (optional,
    as a plugin's ``depends`` class attribute; without one a plugin is ``ANY``).

    The scheduler re-runs a plugin for a cluster that changed only when what it reads may
    have: a reservation moves a cluster's used amounts (``ANY``: Headroom) but neither its
    settings nor, for most request shapes, the nodes their fit search read. A plugin that
    declares one must not rely on what another plugin wrote into the ``CycleState`` during
    the decision (``fits`` aside): it may run without the others.
    """

    SETTINGS = 0
    """The cluster's own settings only: name, labels, weight, headroom, state, cordon,
    taints (``ClusterInfo.settings_version``)."""
    FIT = 1
    """... and the fit search's answer (``ctx.fits``), as a value."""
    NODES = 2
    """... and anything else read from the nodes that search reads (``fit_models``)."""
    ANY = 3
    """Anything in the cluster: run again whenever its ``version`` moves."""


def depends(plugin: object) -> Depends:
    """A plugin's declared ``depends`` (``Depends.ANY`` when it declares none)."""
    found = getattr(plugin, "depends", Depends.ANY)
    return found if isinstance(found, Depends) else Depends.ANY


Variant = Callable[["PlacementRequest"], Hashable]


def variant_of(plugin: object) -> Variant | None:
    """What a plugin's filter and score read of a request's ``priority`` and ``failover``:
    its ``variant`` method (answers alike for requests it maps alike), None when it declares
    ``variant = None`` (it reads neither), else both as they are.

    The scheduler keeps one verdict table per request shape; priority and failover enter
    the shape only through these, so a task at priority 2000 and a failover re-placement
    share Headroom's "may use the reserve" table, and tables that differ only in some
    plugins' variants re-judge a cluster from one another by re-running just those plugins.
    """
    if not hasattr(plugin, "variant"):
        return _priority_and_failover
    found = getattr(plugin, "variant", None)
    return cast(Variant, found) if callable(found) else None


def _priority_and_failover(req: PlacementRequest) -> Hashable:
    return (req.priority, req.failover)


class Plugin(Protocol):
    """Anything the registry builds; ``name`` is how profiles refer to it."""

    name: ClassVar[str]


class FilterPlugin(Plugin, Protocol):
    """May this cluster take the task? ``SUCCESS`` or a rejection with a reason.

    The answer must depend only on the request and the cluster: the scheduler reuses it
    until the cluster's ``version`` changes. A cluster named in ``req.exclude`` is always
    judged afresh.
    """

    def filter(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> Status:
        """Judge one cluster."""
        ...


class ScorePlugin(Plugin, Protocol):
    """How good is a feasible cluster for the task, from 0 to 100.

    Like filters, a score must depend only on the request and the cluster (the scheduler
    caches it with the filter verdict); a plugin that ranks clusters against each other
    returns a raw value here and also implements ``ScoreNormalizer``.
    """

    def score(self, ctx: CycleState, req: PlacementRequest, cluster: ClusterInfo) -> float:
        """Score one feasible cluster (0..100, or a raw value ``normalize`` maps there)."""
        ...


class ScoreNormalizer(Protocol):
    """Optional second half of a score plugin (kube-scheduler's ``NormalizeScore``)."""

    def normalize(
        self, ctx: CycleState, req: PlacementRequest, clusters: Sequence[str],
        scores: list[float],
    ) -> None:
        """Rewrite the raw scores in place into 0..100 (``scores[i]`` is ``clusters[i]``'s)."""
        ...


class ColumnNormalizer(Protocol):
    """Optional, beside ``ScoreNormalizer``: ``normalize`` maps each raw score on its own
    through a summary of the column's distinct values (ClusterWeight: the largest weight).

    With it the scheduler keeps every cluster's normalized score and total between
    decisions and recomputes them only for the clusters that changed - or for all when the
    summary moved - instead of normalizing the whole column each decision. ``normalize``
    must give exactly ``[normalized(summarize(set(scores)), s) for s in scores]``; both
    must be pure (no randomness, no state): a random normalizer does not implement this.
    """

    def summarize(self, values: Collection[float]) -> Hashable:
        """What the normalized scores depend on besides each raw score (from distinct raws)."""
        ...

    def normalized(self, summary: Hashable, raw: float) -> float:
        """One cluster's score in 0..100 from its raw score and the column's summary."""
        ...


class ReservePlugin(Plugin, Protocol):
    """Claims (and gives back) what a placement needs; both calls are idempotent."""

    def reserve(self, ctx: CycleState, req: PlacementRequest, cluster: str, fit: Fit) -> Status:
        """Claim resources for the chosen cluster and nodes."""
        ...

    def unreserve(self, ctx: CycleState, req: PlacementRequest, cluster: str) -> None:
        """Give back what ``reserve`` claimed (no-op if nothing was)."""
        ...


class PluginFactory(Protocol):
    """Builds a plugin (a plugin class is one)."""

    def __call__(self, handle: Handle) -> Plugin:
        """A new plugin instance for one scheduler."""
        ...
