"""Which clusters a simulation has: fleet files, a trace node list split K ways, or the live
fleet, with what-if edits (``--add-nodes``, ``--remove-cluster``).

Called by ``fuyaoctl simulate`` and ``bench/trace_quality.py`` through
``hub.planning.simulate``. Nodes are read by the same code a sim member uses
(``fuyao.fleetfile`` + ``fuyao.nodebuild.build_node``), so a node here carries exactly the
labels and devices that member would report. A live fleet arrives as ``NodeInfo`` lists
with their current free amounts (what the hub's fleet view holds).

Splits of one node list into K clusters (``--split``):
``round-robin`` node i -> cluster i mod K, every cluster gets the same hardware mix;
``contiguous`` K consecutive runs of the list, as a site might have grown;
``by-model`` the list ordered by accelerator model (CPU-only nodes first) and cut into K
consecutive runs, so clusters differ by hardware as much as K allows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from fuyao.errors import InvalidInput
from fuyao.fleetfile import load_fleet
from fuyao.inventory import NodeInfo
from fuyao.labels import GPU_MODEL
from fuyao.nodebuild import build_node
from fuyao.spec import check_name

WHOLE = 1000
MAX_CLUSTERS = 1000
MAX_ADDED_NODES = 100_000


class Split(StrEnum):
    """How one node list is divided among member clusters."""

    ROUND_ROBIN = "round-robin"
    CONTIGUOUS = "contiguous"
    BY_MODEL = "by-model"


@dataclass(frozen=True, slots=True)
class SimCluster:
    """One member cluster of a simulation."""

    name: str
    nodes: tuple[NodeInfo, ...]
    weight: int = 1
    headroom: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def gpu_milli(self) -> int:
        """Total GPU capacity in milli-devices."""
        return gpu_milli_of(self.nodes)


def gpu_milli_of(nodes: Iterable[NodeInfo]) -> int:
    """Total GPU capacity of the nodes in milli-devices."""
    return sum(len(n.devices) for n in nodes) * WHOLE


def load_nodes(spec: str) -> list[NodeInfo]:
    """Nodes of ``FILE.csv[:START[:COUNT]]`` or a YAML fleet file, as a member reports them."""
    fleet = load_fleet(spec)
    return [build_node(n.name, n.labels, n.allocatable, unschedulable=n.unschedulable)
            for n in fleet.nodes]


def cluster_names(count: int) -> list[str]:
    """``member-0`` ... ``member-(K-1)``, zero-padded so names sort in order."""
    width = len(str(count - 1))
    return [f"member-{i:0{width}d}" for i in range(count)]


def split_nodes(nodes: Sequence[NodeInfo], clusters: int, how: Split) -> list[SimCluster]:
    """The node list divided into ``clusters`` non-empty members."""
    if not 1 <= clusters <= min(len(nodes), MAX_CLUSTERS):
        raise InvalidInput(f"--clusters: {clusters} must be between 1 and "
                           f"{min(len(nodes), MAX_CLUSTERS)} (the number of nodes)")
    if how is Split.ROUND_ROBIN:
        parts = [list(nodes[i::clusters]) for i in range(clusters)]
    else:
        ordered = list(nodes) if how is Split.CONTIGUOUS else sorted(
            nodes, key=lambda n: (n.labels.get(GPU_MODEL, ""), bool(n.devices)))
        size, extra = divmod(len(ordered), clusters)
        parts, start = [], 0
        for i in range(clusters):
            end = start + size + (1 if i < extra else 0)
            parts.append(ordered[start:end])
            start = end
    return [SimCluster(name, tuple(part))
            for name, part in zip(cluster_names(clusters), parts, strict=True)]


def clusters_from_files(specs: Sequence[str]) -> list[SimCluster]:
    """One cluster per fleet file, ``[NAME=]FILE`` (the name defaults to the file's stem)."""
    out: list[SimCluster] = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = Path(spec.split(":", 1)[0]).stem, spec
        out.append(SimCluster(_name(name, "--fleet"), tuple(load_nodes(path))))
    _unique_names(out)
    return out


def parse_add_nodes(text: str) -> dict[str, str]:
    """``cluster=B,model=H100,count=8[,gpus=8,cpu=96,memory=1024Gi]`` -> checked fields."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or not key or not value:
            raise InvalidInput(f"--add-nodes {text!r}: {part!r} is not KEY=VALUE")
        if key not in ("cluster", "model", "count", "gpus", "cpu", "memory", "name"):
            raise InvalidInput(f"--add-nodes {text!r}: unknown key {key!r} (cluster, model, "
                               "count, gpus, cpu, memory, name)")
        fields[key] = value
    for required in ("cluster", "count"):
        if required not in fields:
            raise InvalidInput(f"--add-nodes {text!r}: {required}= is required")
    return fields


def add_nodes(clusters: Sequence[SimCluster], text: str) -> list[SimCluster]:
    """The clusters with a pool of new, empty nodes added (a new cluster if the name is new)."""
    fields = parse_add_nodes(text)
    cluster = _name(fields["cluster"], "--add-nodes cluster")
    try:
        count = int(fields["count"])
        gpus = int(fields.get("gpus", "8" if "model" in fields else "0"))
    except ValueError as exc:
        raise InvalidInput(f"--add-nodes {text!r}: count and gpus must be whole numbers") \
            from exc
    if not 1 <= count <= MAX_ADDED_NODES or not 0 <= gpus <= 64:
        raise InvalidInput(f"--add-nodes {text!r}: count must be 1..{MAX_ADDED_NODES}, "
                           "gpus 0..64")
    model = fields.get("model", "")
    if gpus and not model:
        raise InvalidInput(f"--add-nodes {text!r}: gpus= needs model=")
    pool = _name(fields.get("name", f"added-{cluster}-{model.lower() or 'cpu'}"),
                 "--add-nodes name")
    allocatable = {"cpu": fields.get("cpu", "96"), "memory": fields.get("memory", "1024Gi"),
                   "pods": "110"}
    labels = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
        labels["nvidia.com/gpu.product"] = model
    existing = {n.name for c in clusters for n in c.nodes}
    new: list[NodeInfo] = []
    i = 0
    while len(new) < count:
        name = f"{pool}-{i}"
        i += 1
        if name not in existing:
            new.append(build_node(name, labels | {"kubernetes.io/hostname": name}, allocatable))
    if not any(c.name == cluster for c in clusters):
        return [*clusters, SimCluster(cluster, tuple(new))]
    return [replace(c, nodes=(*c.nodes, *new)) if c.name == cluster else c for c in clusters]


def remove_cluster(clusters: Sequence[SimCluster], name: str) -> list[SimCluster]:
    """The clusters without ``name`` (which must exist)."""
    if not any(c.name == name for c in clusters):
        known = ", ".join(c.name for c in clusters)
        raise InvalidInput(f"--remove-cluster: no cluster {name!r} (clusters: {known})")
    left = [c for c in clusters if c.name != name]
    if not left:
        raise InvalidInput(f"--remove-cluster {name}: no cluster would be left")
    return left


def _name(name: str, what: str) -> str:
    try:
        return check_name(name.strip(), what)
    except ValueError as exc:
        raise InvalidInput(f"{what}: {exc}") from exc


def _unique_names(clusters: Sequence[SimCluster]) -> None:
    seen: set[str] = set()
    for c in clusters:
        if c.name in seen:
            raise InvalidInput(f"cluster {c.name!r} is given twice")
        seen.add(c.name)
