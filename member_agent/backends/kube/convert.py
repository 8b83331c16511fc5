"""Kubernetes objects -> Fuyao views: ``V1Node`` + its pods -> ``NodeInfo``; pods -> a task phase.

Pure functions called by ``member_agent.backends.kube.backend`` on every list and watch event.
Nodes are normalized by ``fuyao.labels.normalize_node`` (through ``build_node``), exactly as
the sim backend does. Free resources are allocatable minus the requests of the node's pods
that still hold resources (not Succeeded/Failed), counted the way kube-scheduler counts them:
per pod, the larger of the sum of its containers and its largest init container. Kubernetes
does not say which GPU a pod holds, so used devices are marked from the first one on.
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


def node_info(node: Any, pods: Iterable[Any]) -> NodeInfo:
    """A ``V1Node`` and the pods bound to it -> the node as the hub sees it."""
    name = node.metadata.name
    allocatable = _str_map(node.status.allocatable if node.status else None)
    unschedulable = bool(node.spec and node.spec.unschedulable) or not is_ready(node)
    base = build_node(name, raw_labels(node), allocatable, unschedulable=unschedulable)
    cpu = memory = count = devices_used = 0
    for pod in pods:
        if not holds_resources(pod):
            continue
        requests = pod_requests(pod)
        cpu += requests["cpu"]
        memory += requests["memory"]
        count += 1
        devices_used += sum(requests[r] for r in DEVICE_RESOURCES)
    alloc = base.allocatable
    free = ResourceAmounts(
        cpu_milli=alloc.cpu_milli - cpu, memory_mib=alloc.memory_mib - memory,
        pods=alloc.pods - count,
    )
    devices = tuple(
        _taken(device) if index < devices_used else device
        for index, device in enumerate(base.devices)
    )
    return replace(base, free=free, devices=devices)


def _taken(device: DeviceInfo) -> DeviceInfo:
    return replace(device, free_milli=0, free_memory_mib=0)


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
