"""Per-task score weights: a scheduler per distinct ``score_weights`` override.

A task (usually through its ComputeProfile) may change the weights of the placement
profile's score plugins, or add one it does not list: ``{Headroom: 0, Pack: 3}`` packs
instead of spreading, ``{ClusterWeight: 0}`` ignores the operator's cluster weights.
``Schedulers`` keeps the hub's scheduler (``base``) and builds, once, one ``Scheduler`` per
distinct override over the same fleet view - each with its own verdict caches, so the hot
path stays a dictionary lookup. The placement loop and ``task explain`` ask ``for_weights``;
``Hub.submit`` calls ``check`` so an unknown plugin name is refused (400) before storing.
"""

from __future__ import annotations

from collections.abc import Mapping

from fuyao.errors import InvalidInput
from hub.fleet import FleetView
from hub.placement.profile import Profile, ScoreEntry
from hub.placement.registry import DEFAULT_REGISTRY, Registry
from hub.placement.scheduler import Scheduler

MAX_VARIANTS = 64
"""Distinct overrides kept; past it the oldest is dropped (and rebuilt if asked again)."""

Weights = tuple[tuple[str, float], ...]


class Schedulers:
    """The hub's scheduler plus one variant per score-weight override."""

    def __init__(self, fleet: FleetView, profile: Profile, *, headroom_priority: int = 1000,
                 registry: Registry = DEFAULT_REGISTRY) -> None:
        self.fleet = fleet
        self.profile = profile
        self.headroom_priority = headroom_priority
        self.registry = registry
        self.base = Scheduler(fleet, profile, headroom_priority=headroom_priority,
                              registry=registry)
        self._variants: dict[Weights, Scheduler] = {}

    def check(self, weights: Mapping[str, float]) -> None:
        """``InvalidInput`` unless every name is a known plugin with a score."""
        for name in weights:
            factory = self.registry.get(name)
            known = sorted(n for n, f in self.registry.items()
                           if callable(getattr(f, "score", None)))
            if factory is None or not callable(getattr(factory, "score", None)):
                raise InvalidInput(f"score_weights: {name!r} is not a score plugin "
                                   f"(known: {', '.join(known)})")

    def for_weights(self, weights: Mapping[str, float]) -> Scheduler:
        """The scheduler for this override (``base`` for none)."""
        if not weights:
            return self.base
        key: Weights = tuple(sorted(weights.items()))
        found = self._variants.get(key)
        if found is None:
            self.check(weights)
            if len(self._variants) >= MAX_VARIANTS:
                del self._variants[next(iter(self._variants))]
            found = self._variants[key] = Scheduler(
                self.fleet, with_weights(self.profile, weights),
                headroom_priority=self.headroom_priority, registry=self.registry)
        return found


def with_weights(profile: Profile, weights: Mapping[str, float]) -> Profile:
    """``profile`` with these score weights (plugins it lacks are appended, by name)."""
    listed = {entry.name for entry in profile.scores}
    scores = [ScoreEntry(e.name, float(weights.get(e.name, e.weight))) for e in profile.scores]
    scores += [ScoreEntry(name, float(weights[name])) for name in sorted(weights)
               if name not in listed]
    return Profile(profile.filters, tuple(scores), profile.reserves, profile.model_choice)
