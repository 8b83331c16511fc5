"""The question the scheduler answers for one task: ``PlacementRequest``.

Part of the placement framework's contract (``hub.placement.framework`` exports it; import
it from there), kept in a module of its own because it is compiled with the engine
(``hub.native``): every filter and score reads the request - its requests, its selector and
the selector's text - for every cluster it judges, and from compiled code a compiled
class's field is read in place where a Python object's attribute is a lookup through its
type and its ``__dict__`` (~150 instructions, ~30 k a steady decision). Run from source it is
the same frozen dataclass.

The texts of the selectors (``selector_key``, ``cluster_key``: part of the scheduler's
cache keys) are rendered on first read and kept; ``flagged`` carries them over to a copy
with other per-attempt flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fuyao.selector import Selector
from fuyao.spec import TaskRequests
from fuyao.taints import Toleration


@dataclass(frozen=True)
class PlacementRequest:
    """One task to place: its per-replica requests, node selector and scheduling flags.

    ``failover`` (a re-placement after a cluster was lost) and ``priority`` at or above the
    scheduler's threshold may use the headroom reserve; ``exclude`` names clusters not to use.
    """

    task_id: str
    name: str
    requests: TaskRequests
    selector: Selector
    priority: int = 0
    failover: bool = False
    exclude: frozenset[str] = frozenset()
    cluster_selector: Selector | None = None                     # required cluster labels
    cluster_preference: tuple[tuple[Selector, int], ...] = ()    # preferred, with weights
    tolerations: tuple[Toleration, ...] = ()                     # cluster taints tolerated
    # the texts below, once rendered (not fields a caller sets, compares or sees)
    _selector_key: str | None = field(default=None, init=False, repr=False, compare=False)
    _cluster_key: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # compiled, a field with no value in ``__init__`` is unset, not its default
        object.__setattr__(self, "_selector_key", None)
        object.__setattr__(self, "_cluster_key", None)

    @property
    def selector_key(self) -> str:
        """The selector's canonical text (rendered once; the index caches by it)."""
        found = self._selector_key
        if found is None:
            found = str(self.selector)
            object.__setattr__(self, "_selector_key", found)
        return found

    @property
    def cluster_key(self) -> str:
        """The cluster-level constraints as text (part of the scheduler's cache shape)."""
        found = self._cluster_key
        if found is None:
            found = _cluster_text(self)
            object.__setattr__(self, "_cluster_key", found)
        return found

    def flagged(self, failover: bool, exclude: frozenset[str]) -> PlacementRequest:
        """This request with other per-attempt flags, its rendered texts carried over (the
        flags are not part of them): a failed-over task's first attempt does not render
        its selectors again."""
        out = PlacementRequest(self.task_id, self.name, self.requests, self.selector,
                               self.priority, failover, exclude, self.cluster_selector,
                               self.cluster_preference, self.tolerations)
        object.__setattr__(out, "_selector_key", self._selector_key)
        object.__setattr__(out, "_cluster_key", self._cluster_key)
        return out

    def __reduce__(self) -> tuple[type[PlacementRequest], tuple[object, ...]]:
        # pickle and copy by the fields (compiled, the frozen dataclass's default way sets
        # attributes one by one, which it refuses); the texts are rendered again on read
        return (PlacementRequest, (self.task_id, self.name, self.requests, self.selector,
                                   self.priority, self.failover, self.exclude,
                                   self.cluster_selector, self.cluster_preference,
                                   self.tolerations))


def _cluster_text(req: PlacementRequest) -> str:
    if req.cluster_selector is None and not req.cluster_preference and not req.tolerations:
        return ""
    prefs = ";".join(f"{w}:{s}" for s, w in req.cluster_preference)
    tols = ";".join(t.model_dump_json() for t in req.tolerations)
    return f"{req.cluster_selector or ''}|{prefs}|{tols}"
