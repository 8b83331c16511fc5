"""Raw node (labels + allocatable quantities) -> ``NodeInfo``, shared by every caller.

The sim backend calls ``build_node`` for each fleet-file node, the kube backend for each
``V1Node`` and ``fuyaoctl simulate`` for its offline fleets: all go through
``fuyao.labels.normalize_node`` so a simulated member reports exactly what a Kubernetes
member with the same labels would.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fuyao.errors import InvalidInput
from fuyao.inventory import NodeInfo, ResourceAmounts
from fuyao.labels import devices_for, normalize_node
from fuyao.quantity import parse_count, parse_cpu_milli, parse_memory_mib

log = logging.getLogger(__name__)


def parse_allocatable(name: str, allocatable: Mapping[str, str]) -> ResourceAmounts:
    """cpu / memory / pods of a node; an unparseable quantity counts as 0 and is logged."""

    def one(key: str) -> int:
        text = allocatable.get(key)
        if text is None:
            return 0
        try:
            if key == "cpu":
                return parse_cpu_milli(text)
            if key == "memory":
                return parse_memory_mib(text)
            return parse_count(text, what=key)
        except InvalidInput as exc:
            log.warning("node %s: ignoring allocatable %s", name, exc)
            return 0

    return ResourceAmounts(cpu_milli=one("cpu"), memory_mib=one("memory"), pods=one("pods"))


def build_node(
    name: str,
    raw_labels: Mapping[str, str],
    allocatable: Mapping[str, str],
    *,
    unschedulable: bool = False,
    overrides: Mapping[str, str] | None = None,
) -> NodeInfo:
    """A fully free node with normalized labels and one ``DeviceInfo`` per accelerator."""
    normalized = normalize_node(raw_labels, dict(allocatable), overrides=overrides)
    amounts = parse_allocatable(name, allocatable)
    return NodeInfo(
        name=name,
        labels=normalized.labels,
        allocatable=amounts,
        free=amounts,
        devices=devices_for(name, normalized),
        unschedulable=unschedulable,
    )
