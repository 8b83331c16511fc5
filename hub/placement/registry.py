"""Plugin registry: profile names -> factories (kube-scheduler's in-tree registry).

``Profile.from_config`` checks names against a registry and the ``Scheduler`` builds each
named plugin once from it. Tests and extensions pass their own mapping (``with_plugins``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from hub.placement.framework import PluginFactory
from hub.placement.plugins.accelerator_fit import AcceleratorFit
from hub.placement.plugins.cluster_affinity import ClusterAffinity
from hub.placement.plugins.cluster_ready import ClusterReady
from hub.placement.plugins.cluster_weight import ClusterWeight
from hub.placement.plugins.dynamic_weight import DynamicWeight
from hub.placement.plugins.fleet_reservation import FleetReservation
from hub.placement.plugins.fragmentation import Fragmentation
from hub.placement.plugins.headroom import Headroom
from hub.placement.plugins.least_overqualified import LeastOverqualified
from hub.placement.plugins.node_fit import NodeFit
from hub.placement.plugins.pack import Pack
from hub.placement.plugins.random_cluster import RandomCluster
from hub.placement.plugins.static_weight import StaticWeight
from hub.placement.plugins.taint_toleration import TaintToleration
from hub.placement.plugins.task_selector import TaskSelector

Registry = Mapping[str, PluginFactory]

DEFAULT_REGISTRY: Registry = MappingProxyType({
    ClusterReady.name: ClusterReady,
    TaskSelector.name: TaskSelector,
    NodeFit.name: NodeFit,
    Headroom.name: Headroom,
    ClusterWeight.name: ClusterWeight,
    AcceleratorFit.name: AcceleratorFit,
    FleetReservation.name: FleetReservation,
    ClusterAffinity.name: ClusterAffinity,
    LeastOverqualified.name: LeastOverqualified,
    Pack.name: Pack,
    TaintToleration.name: TaintToleration,
    Fragmentation.name: Fragmentation,          # the fgd profile (hub.placement.profiles)
    RandomCluster.name: RandomCluster,          # baselines: random, Karmada static and
    StaticWeight.name: StaticWeight,            # dynamic weights
    DynamicWeight.name: DynamicWeight,
})


def with_plugins(extra: Mapping[str, PluginFactory], base: Registry = DEFAULT_REGISTRY) -> Registry:
    """A registry with ``extra`` added to (or replacing entries of) ``base``."""
    return MappingProxyType({**base, **extra})
