"""Placement profiles: which plugins run, in which order, with which score weights.

The hub reads a profile from its configuration (``HubConfig.profile``, a mapping as parsed
from YAML) at startup and hands it to the ``Scheduler``::

    filters: [ClusterReady, NodeFit, Headroom]
    scores:
      - {name: ClusterWeight, weight: 2}
      - {name: Headroom, weight: 1}
      - {name: AcceleratorFit, weight: 3}
    reserves: [FleetReservation]

Order and weights come from these lists only - never from dict iteration. A section left
out takes ``DEFAULT_PROFILE``'s; an unknown plugin name, key or a bad weight is
``InvalidInput`` naming it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from fuyao.errors import InvalidInput
from hub.placement.registry import DEFAULT_REGISTRY, Registry

_SECTIONS = ("filters", "scores", "reserves", "model_choice")
LEAST_OVERQUALIFIED = "least-overqualified"
"""Inside a cluster, the lowest-ranked model that fits, then its tightest node."""
TIGHTEST = "tightest"
"""Inside a cluster, the tightest node of any model that fits (packs; the trace policies)."""
MODEL_CHOICES = (LEAST_OVERQUALIFIED, TIGHTEST)


@dataclass(frozen=True, slots=True)
class ScoreEntry:
    """A score plugin and the weight its 0..100 score is multiplied by."""

    name: str
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class Profile:
    """Ordered filter, score (weighted) and reserve plugin names, and the model choice."""

    filters: tuple[str, ...]
    scores: tuple[ScoreEntry, ...]
    reserves: tuple[str, ...] = ("FleetReservation",)
    model_choice: str = LEAST_OVERQUALIFIED

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any] | None, registry: Registry = DEFAULT_REGISTRY,
    ) -> Profile:
        """A profile from a configuration mapping; ``None`` means ``DEFAULT_PROFILE``."""
        if config is None:
            return DEFAULT_PROFILE
        if not isinstance(config, Mapping):
            raise InvalidInput("placement profile must be a mapping of filters/scores/reserves")
        unknown = sorted(str(k) for k in config if k not in _SECTIONS)
        if unknown:
            raise InvalidInput(f"placement profile: unknown key {unknown[0]!r} "
                               f"(expected {', '.join(_SECTIONS)})")
        filters = (_names(config["filters"], "filters", registry)
                   if "filters" in config else DEFAULT_PROFILE.filters)
        scores = (_scores(config["scores"], registry)
                  if "scores" in config else DEFAULT_PROFILE.scores)
        reserves = (_names(config["reserves"], "reserves", registry)
                    if "reserves" in config else DEFAULT_PROFILE.reserves)
        choice = config.get("model_choice", DEFAULT_PROFILE.model_choice)
        if choice not in MODEL_CHOICES:
            raise InvalidInput(f"placement profile: model_choice {choice!r} must be one of "
                               f"{', '.join(MODEL_CHOICES)}")
        return cls(filters, scores, reserves, str(choice))

    @classmethod
    def from_yaml(cls, text: str, registry: Registry = DEFAULT_REGISTRY) -> Profile:
        """A profile from YAML text (the same shape as ``from_config``)."""
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InvalidInput(f"placement profile is not valid YAML: {exc}") from exc
        return cls.from_config(data, registry)

    def to_config(self) -> dict[str, Any]:
        """The configuration mapping this profile reads back from."""
        return {
            "filters": list(self.filters),
            "scores": [{"name": s.name, "weight": s.weight} for s in self.scores],
            "reserves": list(self.reserves),
            "model_choice": self.model_choice,
        }


def _names(value: Any, section: str, registry: Registry) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise InvalidInput(f"placement profile: {section} must be a list of plugin names")
    names = tuple(_known(item, f"{section}[{i}]", registry) for i, item in enumerate(value))
    _no_repeats(names, section)
    return names


def _scores(value: Any, registry: Registry) -> tuple[ScoreEntry, ...]:
    if not isinstance(value, list):
        raise InvalidInput("placement profile: scores must be a list of {name, weight}")
    entries: list[ScoreEntry] = []
    for i, item in enumerate(value):
        where = f"scores[{i}]"
        if isinstance(item, str):
            entries.append(ScoreEntry(_known(item, where, registry)))
            continue
        if not isinstance(item, Mapping) or "name" not in item:
            raise InvalidInput(f"placement profile: {where} must be a plugin name or "
                               "{name, weight}")
        extra = sorted(str(k) for k in item if k not in ("name", "weight"))
        if extra:
            raise InvalidInput(f"placement profile: {where}: unknown key {extra[0]!r}")
        weight = item.get("weight", 1)
        if (isinstance(weight, bool) or not isinstance(weight, int | float)
                or not math.isfinite(weight) or weight < 0):
            raise InvalidInput(f"placement profile: {where}: weight {weight!r} must be a "
                               "number >= 0")
        entries.append(ScoreEntry(_known(item["name"], where, registry), float(weight)))
    _no_repeats(tuple(e.name for e in entries), "scores")
    return tuple(entries)


def _known(name: Any, where: str, registry: Registry) -> str:
    if not isinstance(name, str) or name not in registry:
        raise InvalidInput(f"placement profile: {where}: unknown plugin {name!r} "
                           f"(known: {', '.join(sorted(registry))})")
    return name


def _no_repeats(names: tuple[str, ...], section: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InvalidInput(f"placement profile: {section}: {name} is listed twice")
        seen.add(name)


DEFAULT_PROFILE = Profile(
    filters=("ClusterReady", "ClusterAffinity", "TaintToleration", "NodeFit", "Headroom"),
    scores=(ScoreEntry("ClusterWeight", 2.0), ScoreEntry("Headroom", 1.0),
            ScoreEntry("AcceleratorFit", 3.0), ScoreEntry("LeastOverqualified", 2.0),
            ScoreEntry("ClusterAffinity", 3.0), ScoreEntry("TaintToleration", 3.0)),
    reserves=("FleetReservation",),
    model_choice=LEAST_OVERQUALIFIED,
)
"""Ready clusters whose nodes match and fit, outside the reserve; weight first, then room.

CPU-only work goes where it fits without accelerator nodes whenever such a cluster is
feasible: ClusterWeight (x2) and Headroom (x1) together move a total by at most 300, so
AcceleratorFit's x3 outweighs them (a tie goes to the first name); lower it to trade that
preference against cluster weights. It is neutral for GPU tasks.

LeastOverqualified (x2) keeps a task off better hardware than it asked for when lesser
hardware is free elsewhere (weight 0 switches it off), and ``model_choice:
least-overqualified`` does the same inside a cluster (``tightest`` packs instead);
ClusterAffinity (filter: the task's required ``cluster_selector``; score x3: its
``cluster_preference``) is neutral for tasks that state neither. ``Pack`` is registered but
not listed: a task's ``score_weights`` (or another profile) brings it in to pack instead of
spread.

(NodeFit already rejects clusters where no node matches the selector, with TaskSelector's
reason, so TaskSelector is for profiles that want label matching without capacity.)"""
