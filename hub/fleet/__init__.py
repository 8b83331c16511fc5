"""The hub's in-memory fleet view: clusters, node inventories, reservations and the index.

``FleetView`` (``view``) is the entry point; ``ClusterInfo`` (``cluster``) is the read-only
per-cluster view the placement plugins and the REST API read; ``find_fit`` (``fit``) is the
index-backed search the NodeFit plugin runs (``fit_models`` says what its answer read).
See docs/concepts/placement.md.
"""

from hub.fleet.cluster import ClusterInfo, Matches, ModelTotals
from hub.fleet.fit import (
    Certificate,
    Fit,
    Miss,
    MissKind,
    certify,
    find_fit,
    find_plain_fit,
    fit_models,
    still_found,
)
from hub.fleet.nodes import NO_MODEL, WHOLE, Hold, NodeState, collector_paused
from hub.fleet.view import PER_NODE_LABEL_KEYS, FleetView, Reservation

__all__ = [
    "NO_MODEL",
    "PER_NODE_LABEL_KEYS",
    "WHOLE",
    "Certificate",
    "ClusterInfo",
    "Fit",
    "FleetView",
    "Hold",
    "Matches",
    "Miss",
    "MissKind",
    "ModelTotals",
    "NodeState",
    "Reservation",
    "certify",
    "collector_paused",
    "find_fit",
    "find_plain_fit",
    "fit_models",
    "still_found",
]
