"""Load a simulated member's nodes from a fleet file (YAML) or a trace node list (CSV).

Called by the sim backend at start, by the agent CLI to validate ``--fleet`` before
connecting, and by ``fuyaoctl simulate`` (``hub.planning.simulate``) for its offline fleets:
shared ground under ``fuyao/`` so all of them read one format one way. Both forms yield raw
Kubernetes-style node labels and allocatable quantities; the backend normalizes them with
``fuyao.labels.normalize_node``, the same code a Kubernetes member uses.

A CSV spec may carry a row slice, ``FILE.csv:START:COUNT`` (0-based data rows, header not
counted; ``FILE.csv:START`` takes the rest), so one trace can be split among clusters.
Every problem raises ``InvalidInput`` naming the file and the path of the bad value.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fuyao.errors import InvalidInput
from fuyao.quantity import parse_count, parse_cpu_milli, parse_memory_mib, parse_quantity
from fuyao.spec import check_labels, check_name

DEFAULT_PODS = "110"
CSV_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
_CSV_SPEC = re.compile(r"^(?P<path>.+\.csv)(?::(?P<start>\d+)(?::(?P<count>\d+))?)?$", re.I)
_TOP_KEYS = {"cluster", "nodePools"}
_CLUSTER_KEYS = {"labels"}
_POOL_KEYS = {"name", "count", "labels", "allocatable", "unschedulable"}


@dataclass(frozen=True, slots=True)
class FleetNode:
    """One node as kubelet would register it: raw labels and allocatable quantities."""

    name: str
    labels: dict[str, str]
    allocatable: dict[str, str]
    unschedulable: bool = False


@dataclass(frozen=True, slots=True)
class Fleet:
    """A simulated member: cluster labels and its nodes."""

    source: str
    nodes: tuple[FleetNode, ...]
    cluster_labels: dict[str, str] = field(default_factory=dict)


def load_fleet(spec: str) -> Fleet:
    """A fleet from ``FILE.yaml`` or ``FILE.csv[:START[:COUNT]]``."""
    match = _CSV_SPEC.match(spec)
    if match:
        start = int(match.group("start") or 0)
        count = int(match.group("count")) if match.group("count") else None
        return load_trace_csv(Path(match.group("path")), start=start, count=count)
    return load_fleet_yaml(Path(spec))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read fleet file: {exc.strerror or exc}") from exc


def _default_labels(name: str, labels: Mapping[str, str]) -> dict[str, str]:
    """Labels kubelet sets on every node, unless the file sets them."""
    base = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    return base | dict(labels)


# --- YAML -----------------------------------------------------------------------------


def load_fleet_yaml(path: Path) -> Fleet:
    """Parse and validate a YAML fleet file (``cluster``, ``nodePools``)."""
    try:
        doc = yaml.safe_load(_read(path))
    except yaml.YAMLError as exc:
        raise InvalidInput(f"{path}: not valid YAML: {exc}") from exc
    where = str(path)
    top = _mapping(doc, where, "(top level)")
    _known_keys(top, _TOP_KEYS, where, "")
    cluster = _mapping(top.get("cluster", {}), where, "cluster")
    _known_keys(cluster, _CLUSTER_KEYS, where, "cluster")
    cluster_labels = _labels(cluster.get("labels", {}), where, "cluster.labels")
    pools = top.get("nodePools")
    if not isinstance(pools, list) or not pools:
        raise InvalidInput(f"{where}: nodePools: must be a non-empty list of node pools")
    nodes: list[FleetNode] = []
    seen: set[str] = set()
    for index, pool in enumerate(pools):
        for node in _pool_nodes(pool, where, f"nodePools[{index}]"):
            if node.name in seen:
                raise InvalidInput(f"{where}: nodePools[{index}]: duplicate node {node.name!r}")
            seen.add(node.name)
            nodes.append(node)
    return Fleet(source=where, nodes=tuple(nodes), cluster_labels=cluster_labels)


def _pool_nodes(raw: Any, where: str, at: str) -> list[FleetNode]:
    pool = _mapping(raw, where, at)
    _known_keys(pool, _POOL_KEYS, where, at)
    for key in ("name", "count", "allocatable"):
        if key not in pool:
            raise InvalidInput(f"{where}: {at}.{key}: required")
    try:
        name = check_name(str(pool["name"]), "pool name")
    except ValueError as exc:
        raise InvalidInput(f"{where}: {at}.name: {exc}") from exc
    count = pool["count"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InvalidInput(f"{where}: {at}.count: {count!r} must be a non-negative integer")
    labels = _labels(pool.get("labels", {}), where, f"{at}.labels")
    allocatable = _allocatable(pool["allocatable"], where, f"{at}.allocatable")
    unschedulable = pool.get("unschedulable", False)
    if not isinstance(unschedulable, bool):
        raise InvalidInput(f"{where}: {at}.unschedulable: {unschedulable!r} must be true/false")
    return [
        FleetNode(
            name=f"{name}-{i}",
            labels=_default_labels(f"{name}-{i}", labels),
            allocatable=dict(allocatable),
            unschedulable=unschedulable,
        )
        for i in range(count)
    ]


def _mapping(raw: Any, where: str, at: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InvalidInput(f"{where}: {at}: must be a mapping, got {type(raw).__name__}")
    return raw


def _known_keys(raw: Mapping[str, Any], known: set[str], where: str, at: str) -> None:
    for key in raw:
        if key not in known:
            prefix = f"{at}." if at else ""
            allowed = ", ".join(sorted(known))
            raise InvalidInput(f"{where}: {prefix}{key}: unknown key (allowed: {allowed})")


def _scalar(value: Any, where: str, at: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidInput(f"{where}: {at}: {value!r} must be a string or number")
    return str(value)


def _labels(raw: Any, where: str, at: str) -> dict[str, str]:
    labels = {str(k): _scalar(v, where, f"{at}.{k}") for k, v in _mapping(raw, where, at).items()}
    try:
        return check_labels(labels)
    except ValueError as exc:
        raise InvalidInput(f"{where}: {at}: {exc}") from exc


def _allocatable(raw: Any, where: str, at: str) -> dict[str, str]:
    values = {str(k): _scalar(v, where, f"{at}.{k}") for k, v in _mapping(raw, where, at).items()}
    for required in ("cpu", "memory"):
        if required not in values:
            raise InvalidInput(f"{where}: {at}.{required}: required")
    values.setdefault("pods", DEFAULT_PODS)
    for key, value in values.items():
        try:
            if key == "cpu":
                parse_cpu_milli(value)
            elif key == "memory":
                parse_memory_mib(value)
            elif key == "pods" or key.endswith("/gpu"):
                parse_count(value, what=key)
            else:
                parse_quantity(value, what=key)
        except InvalidInput as exc:
            raise InvalidInput(f"{where}: {at}.{key}: {exc.message}") from exc
    return values


# --- CSV (trace node lists) -----------------------------------------------------------


def load_trace_csv(path: Path, *, start: int = 0, count: int | None = None) -> Fleet:
    """Nodes from a trace node list (``sn,cpu_milli,memory_mib,gpu,model``), rows sliced."""
    where = str(path)
    reader = csv.DictReader(_read(path).splitlines())
    header = tuple(reader.fieldnames or ())
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise InvalidInput(f"{where}: header: missing column(s) {', '.join(missing)}")
    rows = list(reader)
    end = len(rows) if count is None else start + count
    if start >= len(rows) or end > len(rows) or count == 0:
        raise InvalidInput(
            f"{where}: rows {start}:{end} out of range (the file has {len(rows)} data rows)"
        )
    nodes: list[FleetNode] = []
    seen: set[str] = set()
    for index in range(start, end):
        node = _csv_node(rows[index], where, f"row {index} (line {index + 2})")
        if node.name in seen:
            raise InvalidInput(f"{where}: row {index}: duplicate node {node.name!r}")
        seen.add(node.name)
        nodes.append(node)
    return Fleet(source=f"{where}:{start}:{end - start}", nodes=tuple(nodes))


def _csv_node(row: Mapping[str, str | None], where: str, at: str) -> FleetNode:
    name = (row.get("sn") or "").strip()
    if not name:
        raise InvalidInput(f"{where}: {at}: sn: empty node name")
    numbers: dict[str, int] = {}
    for column in ("cpu_milli", "memory_mib", "gpu"):
        text = (row.get(column) or "").strip()
        try:
            numbers[column] = parse_count(text, what=column)
        except InvalidInput as exc:
            raise InvalidInput(f"{where}: {at}: {exc.message}") from exc
    model = (row.get("model") or "").strip()
    labels = {"nvidia.com/gpu.product": model} if model else {}
    allocatable = {
        "cpu": f"{numbers['cpu_milli']}m",
        "memory": f"{numbers['memory_mib']}Mi",
        "pods": DEFAULT_PODS,
    }
    if numbers["gpu"]:
        allocatable["nvidia.com/gpu"] = str(numbers["gpu"])
    return FleetNode(name=name, labels=_default_labels(name, labels), allocatable=allocatable)
