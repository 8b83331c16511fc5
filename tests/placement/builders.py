"""Small builders for nodes, fleets and requests used across the placement tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypedDict, Unpack

from fuyao.inventory import DeviceInfo, NodeInfo, ResourceAmounts
from fuyao.selector import parse_selector
from fuyao.spec import ClusterState, TaskRequests
from hub.fleet import FleetView
from hub.placement import PlacementRequest

GIB = 1024
MODEL_MEMORY_GIB = {"H100": 80, "A100": 80, "V100": 32, "T4": 16}


def node(
    name: str, model: str | None = None, gpus: int = 0, *, cpu: int = 64, memory_gib: int = 512,
    pods: int = 110, free_cpu: int | None = None, free_memory_gib: int | None = None,
    free_pods: int | None = None, device_gib: int | None = None,
    free_milli: Iterable[int] | None = None, labels: Mapping[str, str] | None = None,
    unschedulable: bool = False,
) -> NodeInfo:
    """A node with ``gpus`` devices of ``model``; free amounts default to everything."""
    gib = device_gib if device_gib is not None else MODEL_MEMORY_GIB.get(model or "", 16)
    frees = list(free_milli) if free_milli is not None else [1000] * gpus
    devices = tuple(
        DeviceInfo(f"{name}/gpu{i}", model or "", gib * GIB, frees[i], gib * GIB)
        for i in range(gpus)
    )
    all_labels = {"kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name}
    if model:
        all_labels.update({"fuyao.io/gpu-model": model, "fuyao.io/gpu-memory": f"{gib}Gi",
                           "fuyao.io/gpu-count": str(gpus)})
    all_labels.update(labels or {})
    return NodeInfo(
        name=name, labels=all_labels,
        allocatable=ResourceAmounts(cpu * 1000, memory_gib * GIB, pods),
        free=ResourceAmounts(
            (cpu if free_cpu is None else free_cpu) * 1000,
            (memory_gib if free_memory_gib is None else free_memory_gib) * GIB,
            pods if free_pods is None else free_pods,
        ),
        devices=devices, unschedulable=unschedulable,
    )


def fleet_of(
    clusters: Mapping[str, Iterable[NodeInfo]], *, headroom: float = 0.0,
    weights: Mapping[str, int] | None = None,
    states: Mapping[str, ClusterState] | None = None,
) -> FleetView:
    """A fleet of Ready clusters with these nodes (headroom 0 unless given)."""
    fleet = FleetView()
    for name, nodes in clusters.items():
        fleet.upsert_cluster(
            name, labels={}, weight=(weights or {}).get(name, 1), headroom=headroom,
            state=(states or {}).get(name, ClusterState.READY),
        )
        fleet.replace_nodes(name, nodes)
    return fleet


def requests(
    cpu: float = 1, memory_gib: float = 1, gpu_milli: int = 0, gpu_memory_gib: int = 0,
    replicas: int = 1,
) -> TaskRequests:
    """Per-replica requests in friendly units."""
    return TaskRequests(
        cpu_milli=int(cpu * 1000), memory_mib=int(memory_gib * GIB), gpu_milli=gpu_milli,
        gpu_memory_mib=gpu_memory_gib * GIB, replicas=replicas,
    )


class Reqs(TypedDict, total=False):
    """Keyword arguments of ``requests``."""

    cpu: float
    memory_gib: float
    gpu_milli: int
    gpu_memory_gib: int
    replicas: int


def place(
    task_id: str = "t1", selector: str = "", *, priority: int = 0, failover: bool = False,
    exclude: Iterable[str] = (), **reqs: Unpack[Reqs],
) -> PlacementRequest:
    """A placement request; keyword arguments go to ``requests``."""
    return PlacementRequest(
        task_id=task_id, name=task_id, requests=requests(**reqs),
        selector=parse_selector(selector), priority=priority, failover=failover,
        exclude=frozenset(exclude),
    )
