"""The policies a simulation can run: a hub placement profile plus a member node policy.

Called by ``hub.planning.simulate.engine``. Each name pairs one of the hub's named profiles
(``hub.placement.profiles``) with the member node policy it is meant to run with:

| name | hub: cluster choice | member: node choice |
|---|---|---|
| ``default`` | the hub's default profile (weight, room, CPU work off GPU nodes) | best-fit |
| ``fgd`` | the cluster whose best node fragments least (``Fragmentation``) | fgd |
| ``random`` | a uniformly random feasible cluster | best-fit |
| ``static-weight`` | Karmada ``staticWeightList``, weights = capacity | best-fit |
| ``dynamic-weight`` | Karmada ``dynamicWeight: AvailableReplicas`` | best-fit |

``--member-policy`` overrides the node policy; ``--profile-file`` runs any profile. The
randomized plugins draw from one generator seeded by ``--seed``; ``Fragmentation`` and the
``fgd`` members use the workload's own shape mix (FGD's "typical pods").
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from fuyao.errors import InvalidInput
from fuyao.fragmentation import ShapeMix
from fuyao.nodescheduler import Policy as NodePolicy
from hub.placement import Handle, Profile, Registry, with_plugins
from hub.placement.plugins.fragmentation import Fragmentation
from hub.placement.plugins.random_cluster import RandomCluster
from hub.placement.plugins.static_weight import StaticWeight
from hub.placement.profiles import PROFILES

MEMBER_POLICY = {
    "default": NodePolicy.BEST_FIT, "fgd": NodePolicy.FGD, "random": NodePolicy.BEST_FIT,
    "static-weight": NodePolicy.BEST_FIT, "dynamic-weight": NodePolicy.BEST_FIT,
}
POLICY_NAMES = tuple(MEMBER_POLICY)


@dataclass(frozen=True, slots=True)
class SimPolicy:
    """What decides where tasks go: the hub's profile and the members' node policy."""

    name: str
    profile: Profile
    member: NodePolicy


def policy(name: str, member: str | None = None, profile: Profile | None = None) -> SimPolicy:
    """A named policy (``POLICY_NAMES``), or ``profile`` under ``name``; ``member`` overrides
    the node policy."""
    if profile is None:
        if name not in PROFILES:
            raise InvalidInput(f"--policy: unknown policy {name!r} "
                               f"(known: {', '.join(POLICY_NAMES)})")
        profile = PROFILES[name]
    node = MEMBER_POLICY.get(name, NodePolicy.BEST_FIT)
    if member is not None:
        try:
            node = NodePolicy(member)
        except ValueError as exc:
            raise InvalidInput(f"--member-policy: unknown node policy {member!r} "
                               f"(known: {', '.join(p.value for p in NodePolicy)})") from exc
    return SimPolicy(name, profile, node)


def registry_for(seed: int, mix: ShapeMix) -> Registry:
    """The hub's plugins, with the randomized ones seeded and Fragmentation given the mix."""
    rng = random.Random(seed)

    def random_cluster(handle: Handle) -> RandomCluster:
        return RandomCluster(handle, rng)

    def static_weight(handle: Handle) -> StaticWeight:
        return StaticWeight(handle, rng)

    def fragmentation(handle: Handle) -> Fragmentation:
        return Fragmentation(handle, mix)

    return with_plugins({RandomCluster.name: random_cluster, StaticWeight.name: static_weight,
                         Fragmentation.name: fragmentation})
