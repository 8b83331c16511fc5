"""Cluster placement, modelled on the kube-scheduler framework (see docs/concepts/placement.md).

``framework`` is the contract (Status, PlacementRequest, CycleState, plugin protocols),
``plugins`` holds one plugin per module, ``registry`` names them, ``profile`` orders and
weights them, and ``scheduler`` runs filter -> score -> select over the ``hub.fleet`` view.
The placement loop uses ``Scheduler.schedule`` then ``Scheduler.reserve``.
"""

from hub.placement.framework import (
    SUCCESS,
    Code,
    CycleState,
    FilterPlugin,
    Handle,
    PlacementRequest,
    Plugin,
    PluginFactory,
    ReservePlugin,
    ScoreNormalizer,
    ScorePlugin,
    Status,
)
from hub.placement.profile import DEFAULT_PROFILE, Profile, ScoreEntry
from hub.placement.registry import DEFAULT_REGISTRY, Registry, with_plugins
from hub.placement.result import ClusterVerdict, FitError, PlacementResult, ScoreTable
from hub.placement.scheduler import Scheduler

__all__ = [
    "DEFAULT_PROFILE",
    "DEFAULT_REGISTRY",
    "SUCCESS",
    "ClusterVerdict",
    "Code",
    "CycleState",
    "FilterPlugin",
    "FitError",
    "Handle",
    "PlacementRequest",
    "PlacementResult",
    "Plugin",
    "PluginFactory",
    "Profile",
    "Registry",
    "ReservePlugin",
    "Scheduler",
    "ScoreEntry",
    "ScoreNormalizer",
    "ScorePlugin",
    "ScoreTable",
    "Status",
    "with_plugins",
]
