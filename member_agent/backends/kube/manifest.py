"""The Pods a task copy becomes in a Kubernetes member, and node affinity from a selector.

Called by ``member_agent.backends.kube.backend`` on ``PlaceTask``. One Pod per replica,
named ``<workload_name>-<replica>`` (``fy-<id8>-<hash>-g<gen>-0``), labelled with the task id,
generation and replica count so the agent can find its copies again after a restart.

Node affinity translates each selector requirement: ``=``/``in`` -> ``In``, ``!=``/``notin``
-> ``NotIn``, ``exists`` -> ``Exists``, ``!key`` -> ``DoesNotExist``; ordered comparisons on
``gpu-count`` -> ``Gt``/``Lt``; ordered comparisons on ``gpu-model``/``npu-model`` -> ``In``
the catalog models that satisfy them (so ``>= A100`` keeps matching H100 nodes added later);
any other ordered comparison -> ``In`` the values present on the member's nodes that satisfy
it. The ``fuyao.io/*`` keys are the agent's derived labels, which the kube backend writes onto
the nodes (see ``KubeBackend``), so the member's own scheduler can enforce them.
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

TASK_ID_ANNOTATION = "fuyao.io/task-id"
REPLICA_LABEL = "fuyao.io/replica"
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
) -> list[dict[str, Any]]:
    """One Pod manifest per replica of the copy."""
    workload = command.workload
    replicas = max(1, workload.replicas)
    requests: dict[str, str] = {
        "cpu": f"{workload.cpu_milli}m",
        "memory": f"{workload.memory_mib}Mi",
    }
    limits: dict[str, str] = {}
    tolerations: list[dict[str, str]] = []
    if workload.gpu_milli > 0:
        # Stock device plugins hand out whole cards: a share still takes one card here.
        cards = str(max(1, workload.gpu_milli // 1000))
        requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = cards
        tolerations.append({"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"})
    container: dict[str, Any] = {
        "name": "task",
        "image": workload.image or "busybox:1.36",
        "resources": {"requests": requests, **({"limits": limits} if limits else {})},
    }
    if workload.command:
        container["command"] = list(workload.command)
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if tolerations:
        spec["tolerations"] = tolerations
    affinity = node_affinity(selector, node_values or {}, catalog)
    if affinity is not None:
        spec["affinity"] = {"nodeAffinity": affinity}
    labels = {
        TASK_ID_LABEL: task_label_value(command.task_id),
        GENERATION_LABEL: str(command.generation),
        REPLICAS_LABEL: str(replicas),
        MANAGED_BY_LABEL: MANAGED_BY,
    }
    annotations = {
        TASK_ID_ANNOTATION: command.task_id,
        "fuyao.io/task-name": command.name,
        "fuyao.io/priority": str(workload.priority),
        "fuyao.io/selector": selector_text(selector),
    }
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
    if key in (GPU_MODEL, NPU_MODEL):
        candidates |= {m.name for m in catalog.models}
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
