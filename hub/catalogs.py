"""The GPU catalog, operated: models and aliases an operator adds in the hub's config.

``hub.config.HubConfig.catalog`` (YAML ``catalog: {models: [...], aliases: {...}}``) is read
once by ``Hub``: ``OperatedCatalog.install`` extends the process catalog
(``fuyao.catalog.DEFAULT_CATALOG``), so task selectors may name and rank the new models
(``gpu-model >= RTX4090``) and ``fuyaoctl catalog`` lists them.

Decision: **the hub normalizes on receipt**, agents need no configuration. Each node an
agent reports goes through ``normalize``: its accelerator model (the agent's
``fuyao.io/gpu-model``, or the raw GFD/GKE/Ascend product string when an operator alias
names it) is mapped through the hub's catalog, and the labels and devices the hub keeps
say the canonical name. The member still knows its nodes by the names it reported, so
``member_names`` gives the placement pin those names (``hub.activetask.member_selector``):
the hub has already checked the model against the task's selector, and the member binds by
the exact names it knows. Without a ``catalog`` in the config nothing here runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from fuyao.catalog import DEFAULT_CATALOG, AcceleratorModel, Catalog
from fuyao.errors import InvalidInput
from fuyao.inventory import NodeInfo, node_from_proto
from fuyao.labels import ASCEND_CHIP, GFD_PRODUCT, GKE_ACCELERATOR, GPU_MODEL, GPU_VENDOR, NPU_MODEL
from fuyao.quantity import parse_memory_mib
from fuyao.wire.v1 import agent_pb2 as pb
from hub.fleet.nodes import NodeReport

_RAW_KEYS = (GFD_PRODUCT, GKE_ACCELERATOR, ASCEND_CHIP)
_MEMBER_NAMES: dict[str, set[str]] = {}   # canonical model -> names members reported for it


def member_names(model: str) -> tuple[str, ...]:
    """The names members know ``model`` by: the model itself, plus any a hub alias renamed."""
    return (model, *sorted(_MEMBER_NAMES.get(model, ())))


class OperatedCatalog:
    """The operator's additions to the catalog, and the node normalization they imply."""

    def __init__(self, config: Mapping[str, Any] | None, catalog: Catalog = DEFAULT_CATALOG):
        self.catalog = catalog
        self.models, self.aliases = parse_config(config)
        self.active = bool(self.models or self.aliases)

    def install(self) -> Callable[[], None]:
        """Extend the catalog in place; returns what undoes it (for tests)."""
        if not self.active:
            return lambda: None
        return self.catalog.extend(self.models, self.aliases)

    def reports(self, nodes: Sequence[pb.Node]) -> Sequence[NodeReport]:
        """An inventory's nodes as the fleet files them: the wire's messages as received
        when nothing is renamed (no ``NodeInfo`` and ``DeviceInfo``s built, about half the
        agent channel's cost per node), else decoded and ``normalize``d."""
        if not self.active:
            return nodes
        return [self.normalize(node_from_proto(n)) for n in nodes]

    def normalize(self, node: NodeInfo) -> NodeInfo:
        """The node with its accelerator model named as the hub's catalog names it."""
        if not self.active:
            return node
        key = GPU_MODEL if GPU_MODEL in node.labels else NPU_MODEL
        reported = node.labels.get(key)
        if not reported:
            return node
        raw = next((node.labels[k] for k in _RAW_KEYS if k in node.labels), None)
        alias = self.catalog.aliases.get(raw.strip().lower()) if raw else None
        model = alias or self.catalog.canonical(reported)[0]
        if model == reported:
            return node
        _MEMBER_NAMES.setdefault(model, set()).add(reported)
        labels = dict(node.labels)
        labels[key] = model
        entry = self.catalog.get(model)
        if entry is not None:
            labels[GPU_VENDOR] = entry.vendor
        devices = tuple(replace(d, model=model) if d.model == reported else d
                        for d in node.devices)
        return replace(node, labels=labels, devices=devices)


def parse_config(config: Mapping[str, Any] | None) -> tuple[list[AcceleratorModel],
                                                             dict[str, str]]:
    """``{models: [{name, vendor, kind, rank, memory}], aliases: {raw: model}}``, checked."""
    if not config:
        return [], {}
    if not isinstance(config, Mapping) or set(config) - {"models", "aliases"}:
        raise InvalidInput("catalog: expected a mapping with 'models' and/or 'aliases'")
    models = []
    for i, item in enumerate(config.get("models") or []):
        if not isinstance(item, Mapping) or set(item) - {"name", "vendor", "kind", "rank",
                                                          "memory"} or "name" not in item:
            raise InvalidInput(f"catalog: models[{i}] needs name (and vendor, kind, rank, "
                               "memory), nothing else")
        rank = item.get("rank")
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int)
                                 or not 0 < rank <= 10_000):
            raise InvalidInput(f"catalog: models[{i}]: rank {rank!r} must be 1..10000")
        memory = parse_memory_mib(item["memory"]) if item.get("memory") else 0
        models.append(AcceleratorModel(str(item["name"]), str(item.get("vendor", "unknown")),
                                       str(item.get("kind", "gpu")), rank, memory))
    aliases = config.get("aliases") or {}
    if not isinstance(aliases, Mapping):
        raise InvalidInput("catalog: aliases must map raw product strings to models")
    return models, {str(k): str(v) for k, v in aliases.items()}
