"""A placement decision's scratch, shared by its plugins: ``CycleState``.

Part of the placement framework's contract (``hub.placement.framework`` exports it; import
it from there), kept in a module of its own because it is compiled with the engine
(``hub.native``): the fit search's answers (``fits``) are read through it for every cluster
a decision judges, several times, and from compiled code a compiled class's field is read
in place where a Python object's attribute is a lookup through its type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hub.fleet import ClusterInfo, Fit, Miss


class CycleState:
    """Scratch for one placement decision, shared by its plugins (kube-scheduler's CycleState).

    ``fits`` holds the NodeFit search result per cluster so Headroom, the scheduler and the
    reserve step reuse it; ``feasible`` is set before scoring (clusters that passed every
    filter); ``read``/``write`` hold anything else a plugin computes once per decision.
    """

    __slots__ = ("_data", "_feasible", "_list_feasible", "fits", "least_overqualified")

    def __init__(self, least_overqualified: bool = False) -> None:
        self.fits: dict[str, Fit | Miss] = {}
        self.least_overqualified = least_overqualified
        """The profile's ``model_choice``: the fit search's model order inside a cluster."""
        self._feasible: Sequence[ClusterInfo] = ()
        self._list_feasible: Callable[[], Sequence[ClusterInfo]] | None = None
        self._data: dict[str, object] = {}

    @property
    def feasible(self) -> Sequence[ClusterInfo]:
        """The clusters that passed every filter (set before scoring)."""
        if self._list_feasible is not None:
            self._feasible, self._list_feasible = self._list_feasible(), None
        return self._feasible

    @feasible.setter
    def feasible(self, clusters: Sequence[ClusterInfo]) -> None:
        self._feasible, self._list_feasible = clusters, None

    def defer_feasible(self, lister: Callable[[], Sequence[ClusterInfo]]) -> None:
        """Let ``feasible`` be what ``lister`` returns, listed only if a plugin reads it."""
        self._list_feasible = lister

    def read(self, key: str) -> object | None:
        """A value a plugin wrote during this decision, or None."""
        return self._data.get(key)

    def write(self, key: str, value: object) -> None:
        """Keep a value for the rest of this decision."""
        self._data[key] = value
