"""Named placement profiles: the default and the ones ``fuyaoctl simulate --policy`` compares.

The hub runs one profile (``HubConfig.profile``: a mapping, or one of these names); the
simulator (``hub.planning.simulate``) runs any of them against a fleet and a workload.

- ``default``: ``DEFAULT_PROFILE``.
- ``fgd``: the FGD paper's idea at cluster level: the ``Fragmentation`` filter picks, in each
  cluster, the node whose free GPUs stay most usable for the expected task shapes and the
  score prefers the cluster where that growth of fragmentation is least; CPU-only work
  keeps off accelerator nodes (``AcceleratorFit``). Meant for members running the ``fgd``
  node policy.
- ``random``: a uniformly random feasible cluster (the federation baseline).
- ``static-weight``: Karmada ``staticWeightList`` with capacity weights (``StaticWeight``).
- ``dynamic-weight``: Karmada ``dynamicWeight: AvailableReplicas`` (``DynamicWeight``).

Every profile keeps the default filters (ready, fits, outside the headroom reserve), so they
differ only in which feasible cluster they choose.
"""

from __future__ import annotations

from types import MappingProxyType

from hub.placement.profile import DEFAULT_PROFILE, TIGHTEST, Profile, ScoreEntry

_FILTERS = DEFAULT_PROFILE.filters
_RESERVES = DEFAULT_PROFILE.reserves

FGD_PROFILE = Profile(
    filters=("ClusterReady", "ClusterAffinity", "NodeFit", "Fragmentation", "Headroom"),
    scores=(ScoreEntry("Fragmentation", 1.0), ScoreEntry("AcceleratorFit", 1.0)),
    reserves=_RESERVES,
    model_choice=TIGHTEST,
)
# The trace policies pack inside a cluster as the FGD experiment's members do.
RANDOM_PROFILE = Profile(_FILTERS, (ScoreEntry("RandomCluster"),), _RESERVES, TIGHTEST)
STATIC_WEIGHT_PROFILE = Profile(_FILTERS, (ScoreEntry("StaticWeight"),), _RESERVES, TIGHTEST)
DYNAMIC_WEIGHT_PROFILE = Profile(_FILTERS, (ScoreEntry("DynamicWeight"),), _RESERVES, TIGHTEST)

PROFILES = MappingProxyType({
    "default": DEFAULT_PROFILE,
    "fgd": FGD_PROFILE,
    "random": RANDOM_PROFILE,
    "static-weight": STATIC_WEIGHT_PROFILE,
    "dynamic-weight": DYNAMIC_WEIGHT_PROFILE,
})
"""Profile name -> profile."""
