"""The Pods a task copy becomes in a Kubernetes member, and node affinity from a selector.

Called by ``member_agent.backends.kube.backend`` on ``PlaceTask``. One Pod per replica,
named ``<workload_name>-<replica>`` (``fy-<id8>-<hash>-g<gen>-0``), labelled with the task id,
generation and replica count so the agent can find its copies again after a restart.

Node affinity translates each selector requirement: ``=``/``in`` -> ``In``, ``!=``/``notin``
-> ``NotIn``, ``exists`` -> ``Exists``, ``!key`` -> ``DoesNotExist``; ordered comparisons on
``gpu-count`` -> ``Gt``/``Lt``; any other ordered comparison (catalog ranks on
``gpu-model``/``npu-model`` included) -> ``In`` the values present on the member's nodes that
satisfy it (``>= A100`` on a member with A100 and V100 nodes -> ``In [A100]``; the catalog's
models when the member reports none yet). Requirements on one key merge into one ``In``. The
``fuyao.io/*`` keys are the agent's derived labels, which the kube backend writes onto the
nodes (see ``KubeBackend``), so the member's own scheduler can enforce them.

Accelerators go in ``limits`` (requests equal), whole cards; with HAMi-style sharing
configured, a share asks for one card plus the cores (percent) and memory resources. A
multi-replica copy joins a gang scheduler's PodGroup when one is configured (``pod_group``);
the task's priority maps to the PriorityClass ``fuyao-priority-<n>``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from decimal import Decimal
from typing import Any

from fuyao.catalog import DEFAULT_CATALOG, Catalog
from fuyao.labels import GPU_COUNT, GPU_MODEL, GPU_RESOURCE, NPU_MODEL
from fuyao.selector import Requirement, Selector
from fuyao.wire.v1 import agent_pb2 as pb
from member_agent.backends.base import workload_name
from member_agent.backends.kube.convert import (
    GENERATION_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    REPLICAS_LABEL,
    TASK_ID_LABEL,
)
from member_agent.backends.kube.options import KubeOptions

TASK_ID_ANNOTATION = "fuyao.io/task-id"
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"
REPLICA_LABEL = "fuyao.io/replica"
FAILOVER_LABEL = "fuyao.io/failover"
NO_MATCH = "fuyao-no-node-matches"
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SIMPLE = {"=": "In", "in": "In", "!=": "NotIn", "notin": "NotIn"}


def replica_name(task_id: str, generation: int, replica: int) -> str:
    """The Pod name of one replica of a task copy."""
    return f"{workload_name(task_id, generation)}-{replica}"


def task_label_value(task_id: str) -> str:
    """The task id as a label value, or the id's workload-name stem if it cannot be one."""
    if len(task_id) <= 63 and _LABEL_VALUE.match(task_id):
        return task_id
    return workload_name(task_id, 0).removesuffix("-g0")


def pod_manifests(
    command: pb.PlaceTask,
    namespace: str,
    *,
    selector: Selector,
    node_values: Mapping[str, Collection[str]] | None = None,
    catalog: Catalog = DEFAULT_CATALOG,
    options: KubeOptions | None = None,
    priority_class: str | None = None,
) -> list[dict[str, Any]]:
    """One Pod manifest per replica of the copy."""
    opts = options or KubeOptions()
    workload = command.workload
    replicas = max(1, workload.replicas)
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [_container(workload, opts)]}
    if opts.scheduler_name:
        spec["schedulerName"] = opts.scheduler_name
    if priority_class:
        spec["priorityClassName"] = priority_class
    if workload.gpu_milli > 0 and opts.gpu_tolerations:
        spec["tolerations"] = [{"key": key, "operator": "Exists", "effect": "NoSchedule"}
                               for key in opts.gpu_tolerations]
    affinity = node_affinity(selector, node_values or {}, catalog)
    if affinity is not None:
        spec["affinity"] = {"nodeAffinity": affinity}
    labels = {
        TASK_ID_LABEL: task_label_value(command.task_id),
        GENERATION_LABEL: str(command.generation),
        REPLICAS_LABEL: str(replicas),
        MANAGED_BY_LABEL: MANAGED_BY,
        FAILOVER_LABEL: workload.failover or "restart-elsewhere",   # read by the watchdog
    }
    annotations = {
        TASK_ID_ANNOTATION: command.task_id,
        "fuyao.io/task-name": command.name,
        "fuyao.io/priority": str(workload.priority),
        "fuyao.io/selector": selector_text(selector),
    }
    group = workload_name(command.task_id, command.generation)
    if replicas > 1 and opts.gang == "coscheduling":
        labels[COSCHEDULING_LABEL] = group
    elif replicas > 1 and opts.gang == "volcano":
        annotations[VOLCANO_ANNOTATION] = group
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": replica_name(command.task_id, command.generation, replica),
                "namespace": namespace,
                "labels": labels | {REPLICA_LABEL: str(replica)},
                "annotations": annotations,
            },
            "spec": spec,
        }
        for replica in range(replicas)
    ]


def _container(workload: pb.TaskWorkload, opts: KubeOptions) -> dict[str, Any]:
    """The task's container: cpu/memory requests; accelerators in limits (requests equal),
    whole numbers, as the API server demands of extended resources."""
    requests: dict[str, str] = {"cpu": f"{workload.cpu_milli}m",
                                "memory": f"{workload.memory_mib}Mi"}
    limits: dict[str, str] = {}
    if workload.gpu_milli > 0:
        limits[GPU_RESOURCE] = str(max(1, workload.gpu_milli // 1000))
        if workload.gpu_milli < 1000 and opts.sharing:
            # HAMi-style sharing: one card, a slice of its memory and compute.
            limits[opts.gpu_cores_resource] = str(max(1, workload.gpu_milli // 10))
            if workload.gpu_memory_mib:
                limits[opts.gpu_memory_resource] = str(workload.gpu_memory_mib)
        requests.update(limits)
    container: dict[str, Any] = {
        "name": "task",
        "image": workload.image or "busybox:1.36",
        "resources": {"requests": requests, **({"limits": limits} if limits else {})},
    }
    if workload.command:
        container["command"] = list(workload.command)
    return container


def pod_group(command: pb.PlaceTask, namespace: str, opts: KubeOptions) -> dict[str, Any]:
    """The gang scheduler's PodGroup for a multi-replica copy (Volcano or coscheduling)."""
    replicas = max(1, command.workload.replicas)
    name = workload_name(command.task_id, command.generation)
    meta = {"name": name, "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, GENERATION_LABEL: str(command.generation)}}
    if opts.gang == "volcano":
        return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": meta, "spec": {"minMember": replicas}}
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": meta,
            "spec": {"minMember": replicas,
                     "scheduleTimeoutSeconds": max(1, int(opts.gang_timeout))}}


def priority_class_name(priority: int) -> str:
    """``fuyao-priority-<n>`` (``m<n>`` for negative priorities)."""
    return f"fuyao-priority-{priority}" if priority >= 0 else f"fuyao-priority-m{-priority}"


def node_affinity(
    selector: Selector,
    node_values: Mapping[str, Collection[str]],
    catalog: Catalog = DEFAULT_CATALOG,
) -> dict[str, Any] | None:
    """``requiredDuringSchedulingIgnoredDuringExecution`` for a selector; None if it is empty."""
    expressions = _merged(
        [e for r in selector.requirements for e in _expressions(r, node_values, catalog)])
    if not expressions:
        return None
    term = {"matchExpressions": expressions}
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}


def _merged(expressions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One ``In`` per key (the intersection) and no repeated expression, in first-seen order.

    The hub pins the model of its fit (``gpu-model = A100``) next to the task's own
    ``gpu-model >= A100``: the pod carries that once, as ``In [A100]``.
    """
    out: list[dict[str, Any]] = []
    ins: dict[str, dict[str, Any]] = {}
    for expression in expressions:
        key = expression["key"]
        if expression["operator"] == "In" and key in ins:
            kept = [v for v in ins[key]["values"] if v in expression["values"]]
            ins[key]["values"] = kept or [NO_MATCH]
            continue
        if expression in out:
            continue
        expression = dict(expression)
        if expression["operator"] == "In":
            ins[key] = expression
        out.append(expression)
    return out


def selector_text(selector: Selector) -> str:
    """The selector's canonical text with each requirement once (the pod annotation)."""
    seen: list[str] = []
    for requirement in selector.requirements:
        if str(requirement) not in seen:
            seen.append(str(requirement))
    return ", ".join(seen)


def _expressions(
    req: Requirement, node_values: Mapping[str, Collection[str]], catalog: Catalog
) -> list[dict[str, Any]]:
    key, op, values = req.key, req.op, list(req.values)
    if op in _SIMPLE:
        return [{"key": key, "operator": _SIMPLE[op], "values": values}]
    if op == "exists":
        return [{"key": key, "operator": "Exists"}]
    if op == "!exists":
        return [{"key": key, "operator": "DoesNotExist"}]
    if key == GPU_COUNT:
        low, high = _integer_bounds(op, [Decimal(v) for v in values])
        out = []
        if low is not None:
            out.append({"key": key, "operator": "Gt", "values": [str(low - 1)]})
        if high is not None:
            out.append({"key": key, "operator": "Lt", "values": [str(high + 1)]})
        return out
    candidates = set(node_values.get(key, ()))
    if key in (GPU_MODEL, NPU_MODEL) and not candidates:
        candidates = {m.name for m in catalog.models}
    satisfied = sorted(v for v in candidates if req.matches({key: v}))
    return [{"key": key, "operator": "In", "values": satisfied or [NO_MATCH]}]


def _integer_bounds(op: str, bounds: list[Decimal]) -> tuple[int | None, int | None]:
    """Inclusive integer (low, high) for an ordered comparison on a whole-number label."""
    if op == "range":
        return _ceil(bounds[0]), _floor(bounds[1])
    bound = bounds[0]
    return {
        ">=": (_ceil(bound), None),
        ">": (_floor(bound) + 1, None),
        "<=": (None, _floor(bound)),
        "<": (None, _ceil(bound) - 1),
    }[op]


def _ceil(value: Decimal) -> int:
    return int(value.to_integral_value(rounding="ROUND_CEILING"))


def _floor(value: Decimal) -> int:
    return int(value.to_integral_value(rounding="ROUND_FLOOR"))
