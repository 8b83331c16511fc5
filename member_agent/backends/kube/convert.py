"""Kubernetes objects -> Fuyao views: ``V1Node`` + its pods -> ``NodeInfo``; pods -> a task phase.

Pure functions called by ``member_agent.backends.kube.backend`` on every list and watch event.
Nodes are normalized by ``fuyao.labels.normalize_node`` (through ``build_node``), exactly as
the sim backend does. Free resources are allocatable minus the requests of the node's pods
that still hold resources (not Succeeded/Failed), counted the way kube-scheduler counts them:
per pod, the larger of the sum of its containers and its largest init container. Kubernetes
does not say which GPU a pod holds, so used devices are filled first-fit; shared cards
(time-slicing, HAMi) count the share each pod takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from fuyao.inventory import DeviceInfo, NodeInfo, ResourceAmounts
from fuyao.labels import GPU_RESOURCE, NPU_RESOURCES
from fuyao.nodebuild import build_node
from fuyao.quantity import parse_count, parse_cpu_milli, parse_memory_mib
from member_agent.backends.base import Phase
from member_agent.backends.kube import reasons

TASK_ID_LABEL = "fuyao.io/task-id"
GENERATION_LABEL = "fuyao.io/generation"
REPLICAS_LABEL = "fuyao.io/replicas"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "fuyao-agent"
DERIVED_ANNOTATION = "fuyao.io/derived-labels"
DEVICE_RESOURCES = (GPU_RESOURCE, *NPU_RESOURCES)
TIME_SLICING_REPLICAS = "nvidia.com/gpu.replicas"   # GPU Feature Discovery, time-slicing
_DONE = ("Succeeded", "Failed")


def _str_map(values: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (values or {}).items()}


def raw_labels(node: Any) -> dict[str, str]:
    """A node's labels minus the ``fuyao.io/*`` keys this agent wrote on it itself.

    Labels the agent wrote are listed in the ``fuyao.io/derived-labels`` annotation; they
    are derived again from the vendor labels instead of being taken as admin overrides.
    """
    labels = _str_map(node.metadata.labels)
    annotations = _str_map(node.metadata.annotations)
    for key in filter(None, annotations.get(DERIVED_ANNOTATION, "").split(",")):
        labels.pop(key.strip(), None)
    return labels


def is_ready(node: Any) -> bool:
    """The node's Ready condition is True."""
    for condition in (node.status.conditions or []) if node.status else []:
        if condition.type == "Ready":
            return bool(condition.status == "True")
    return False


def holds_resources(pod: Any) -> bool:
    """Bound to a node and not finished: kube-scheduler counts its requests there."""
    return bool(pod.spec and pod.spec.node_name) and (pod.status is None or
                                                      pod.status.phase not in _DONE)


def pod_requests(pod: Any) -> dict[str, int]:
    """cpu (milli), memory (MiB) and device counts one pod requests (init containers too)."""

    def of(container: Any) -> dict[str, int]:
        requests = _str_map(container.resources.requests if container.resources else None)
        out = {
            "cpu": parse_cpu_milli(requests.get("cpu", "0")),
            "memory": parse_memory_mib(requests.get("memory", "0")),
        }
        for resource in DEVICE_RESOURCES:
            out[resource] = parse_count(requests.get(resource, "0"), what=resource)
        return out

    total: dict[str, int] = {}
    for container in pod.spec.containers or []:
        for key, value in of(container).items():
            total[key] = total.get(key, 0) + value
    for container in pod.spec.init_containers or []:
        for key, value in of(container).items():
            total[key] = max(total.get(key, 0), value)
    return total


def node_info(node: Any, pods: Iterable[Any], cores_resource: str = "") -> NodeInfo:
    """A ``V1Node`` and the pods bound to it -> the node as the hub sees it.

    GPU sharing is counted per card: with time-slicing (GFD label ``nvidia.com/gpu.replicas``
    R > 1) the node advertises R x its cards as ``nvidia.com/gpu`` and each one a pod takes
    is 1/R of a card; with HAMi-style sharing (``cores_resource``, e.g.
    ``nvidia.com/gpucores``, in percent) a pod takes that share of each card it asks for.
    """
    name = node.metadata.name
    allocatable = _str_map(node.status.allocatable if node.status else None)
    labels = raw_labels(node)
    slices = _replicas(labels)
    if slices > 1 and GPU_RESOURCE in allocatable:
        cards = parse_count(allocatable[GPU_RESOURCE], what=GPU_RESOURCE) // slices
        allocatable[GPU_RESOURCE] = str(cards)
    unschedulable = bool(node.spec and node.spec.unschedulable) or not is_ready(node)
    base = build_node(name, labels, allocatable, unschedulable=unschedulable)
    cpu = memory = count = 0
    shares: list[int] = []   # milli-cards each pod takes, one entry per card
    for pod in pods:
        if not holds_resources(pod):
            continue
        requests = pod_requests(pod)
        cpu += requests["cpu"]
        memory += requests["memory"]
        count += 1
        shares += [1000] * sum(requests[r] for r in NPU_RESOURCES)
        gpus = requests[GPU_RESOURCE]
        if slices > 1:
            shares += [1000 // slices] * gpus
        else:
            percent = _limit(pod, cores_resource) if cores_resource else 0
            shares += [min(1000, percent * 10) if percent else 1000] * gpus
    alloc = base.allocatable
    free = ResourceAmounts(
        cpu_milli=alloc.cpu_milli - cpu, memory_mib=alloc.memory_mib - memory,
        pods=alloc.pods - count,
    )
    return replace(base, free=free, devices=_take(base.devices, shares))


def _replicas(labels: Mapping[str, str]) -> int:
    text = labels.get(TIME_SLICING_REPLICAS, "1")
    return int(text) if text.isdigit() and int(text) > 0 else 1


def _limit(pod: Any, resource: str) -> int:
    """The largest whole-number limit of ``resource`` among the pod's containers."""
    best = 0
    for container in pod.spec.containers or []:
        limits = _str_map(container.resources.limits if container.resources else None)
        if resource in limits:
            best = max(best, parse_count(limits[resource], what=resource))
    return best


def _take(devices: tuple[DeviceInfo, ...], shares: list[int]) -> tuple[DeviceInfo, ...]:
    """Devices with ``shares`` taken, largest first, each on the first card it fits.

    Kubernetes does not say which card a pod holds; first fit is what device plugins do.
    """
    free = [d.free_milli for d in devices]
    for share in sorted(shares, reverse=True):
        index = next((i for i, f in enumerate(free) if f >= share), None)
        if index is None:
            index = max(range(len(free)), key=lambda i: free[i], default=None)
        if index is None:
            break
        free[index] = max(0, free[index] - share)
    return tuple(
        replace(d, free_milli=f, free_memory_mib=d.memory_mib * f // 1000) if f != d.free_milli
        else d for d, f in zip(devices, free, strict=True))


def copy_phase(pods: list[Any], replicas: int) -> tuple[Phase, str, str]:
    """(phase, node(s), reason) of one task copy from its replica pods.

    The caller leaves out copies the agent is deleting itself (cancel, clean-up, rollback):
    here a pod being deleted was deleted by someone else.
    """
    failed = [p for p in pods if p.status and p.status.phase == "Failed"]
    if failed:
        return Phase.FAILED, _nodes(pods), reasons.failed(failed[0])
    for pod in pods:
        if pod.metadata.deletion_timestamp is not None:
            return Phase.FAILED, _nodes(pods), reasons.deleted(pod)
        why = reasons.stuck(pod)
        if why:
            return Phase.FAILED, _nodes(pods), why
    if len(pods) >= replicas and all(p.status and p.status.phase == "Succeeded" for p in pods):
        return Phase.SUCCEEDED, _nodes(pods), ""
    if len(pods) >= replicas and all(p.spec.node_name for p in pods):
        running = all(p.status and p.status.phase in ("Running", "Succeeded") for p in pods)
        return (Phase.RUNNING if running else Phase.BOUND), _nodes(pods), ""
    for pod in pods:
        for condition in (pod.status.conditions or []) if pod.status else []:
            if (condition.type == "PodScheduled" and condition.status == "False"
                    and condition.reason == "Unschedulable"):
                return Phase.UNSCHEDULABLE, "", condition.message or "Unschedulable"
    return Phase.ACCEPTED, "", ""


def _nodes(pods: Iterable[Any]) -> str:
    return ",".join(sorted({p.spec.node_name for p in pods if p.spec and p.spec.node_name}))
