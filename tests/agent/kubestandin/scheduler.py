"""kube-scheduler's filters and its "0/N nodes are available" message, for the stand-in.

Called by ``KubeStandIn``'s control loop for each pending pod of a scheduler it plays. The
filters run in kube-scheduler's order, and a node gets the first one that rejects it:
``NodeUnschedulable`` ("node(s) were unschedulable"), ``TaintToleration`` ("node(s) had
untolerated taint(s)"), ``NodeAffinity`` ("node(s) didn't match Pod's node affinity/
selector"), ``NodeResourcesFit`` ("Insufficient <resource>", "Too many pods"). The message
is the reasons' counts sorted as strings (``FitError.Error``), then the preemption
post-filter's verdict: a node rejected only for resources could be freed by preemption
("No preemption victims found for incoming pod", as the stand-in has no lower-priority
victims), the rest are "Preemption is not helpful for scheduling". Among nodes that fit,
the least allocated wins (the default ``NodeResourcesFit`` score), ties by name.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any

from tests.agent.kubestandin.admission import quantity

UNSCHEDULABLE = "node(s) were unschedulable"
TAINTED = "node(s) had untolerated taint(s)"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
_UNRESOLVABLE = (UNSCHEDULABLE, TAINTED, AFFINITY)


def pod_requests(pod: dict[str, Any]) -> dict[str, Decimal]:
    """A pod's requests: the containers' sum, or the largest init container if larger."""
    total: dict[str, Decimal] = {}
    for container in pod["spec"].get("containers") or []:
        for key, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[key] = total.get(key, Decimal(0)) + quantity(value)
    for container in pod["spec"].get("initContainers") or []:
        for key, value in ((container.get("resources") or {}).get("requests") or {}).items():
            total[key] = max(total.get(key, Decimal(0)), quantity(value))
    return total


def holds(pod: dict[str, Any]) -> bool:
    """Bound and not finished: its requests count on its node."""
    return bool(pod["spec"].get("nodeName")) and pod["status"].get("phase") not in (
        "Succeeded", "Failed")


def tolerates(pod: dict[str, Any], taint: dict[str, Any]) -> bool:
    """Some toleration of the pod matches the taint."""
    for tol in pod["spec"].get("tolerations") or []:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists":
            if not tol.get("key") or tol["key"] == taint["key"]:
                return True
        elif tol.get("key") == taint["key"] and tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def _expression(labels: dict[str, str], expr: dict[str, Any]) -> bool:
    key, op, values = expr["key"], expr["operator"], expr.get("values") or []
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and labels[key].lstrip("-").isdigit():
        value, bound = int(labels[key]), int(values[0])
        return value > bound if op == "Gt" else value < bound
    return False


def matches_affinity(pod: dict[str, Any], node: dict[str, Any]) -> bool:
    """``nodeSelector`` and the required node affinity (terms ORed, expressions ANDed)."""
    labels = node["metadata"].get("labels") or {}
    for key, value in (pod["spec"].get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (((pod["spec"].get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if not required:
        return True
    return any(all(_expression(labels, e) for e in term.get("matchExpressions") or [])
               for term in required.get("nodeSelectorTerms") or [])


def free_on(node: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, Decimal]:
    """Allocatable minus the requests of the pods holding resources there; ``pods`` slots."""
    free = {k: quantity(v) for k, v in (node["status"].get("allocatable") or {}).items()}
    for pod in pods:
        for key, value in pod_requests(pod).items():
            free[key] = free.get(key, Decimal(0)) - value
        free["pods"] = free.get("pods", Decimal(0)) - 1
    return free


def filter_node(pod: dict[str, Any], node: dict[str, Any],
                free: dict[str, Decimal]) -> list[str]:
    """The reasons this node rejects the pod; empty if it fits."""
    taints = node["spec"].get("taints") or []
    if node["spec"].get("unschedulable") and not tolerates(
            pod, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}):
        return [UNSCHEDULABLE]
    if any(t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(pod, t)
           for t in taints):
        return [TAINTED]
    if not matches_affinity(pod, node):
        return [AFFINITY]
    reasons = []
    if free.get("pods", Decimal(0)) < 1:
        reasons.append("Too many pods")
    for key, value in sorted(pod_requests(pod).items()):
        if value > 0 and free.get(key, Decimal(0)) < value:
            reasons.append(f"Insufficient {key}")
    return reasons


def fit_message(total: int, rejections: list[list[str]]) -> str:
    """kube-scheduler's ``FitError`` message, with its preemption part."""
    if total == 0:
        return "no nodes available to schedule pods"
    counts = Counter(reason for node in rejections for reason in node)
    main = ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))
    pre = Counter(NOT_HELPFUL if any(r in _UNRESOLVABLE for r in node) else NO_VICTIMS
                  for node in rejections)
    tail = ", ".join(sorted(f"{n} {reason}" for reason, n in pre.items()))
    return (f"0/{total} nodes are available: {main}. "
            f"preemption: 0/{total} nodes are available: {tail}.")


def choose(pod: dict[str, Any], nodes: list[dict[str, Any]],
           bound: dict[str, list[dict[str, Any]]]) -> tuple[str | None, str]:
    """(node name, "") for the least allocated node that fits, else (None, fit message)."""
    fitting: list[tuple[Decimal, str]] = []
    rejections = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        name = node["metadata"]["name"]
        free = free_on(node, bound.get(name, []))
        reasons = filter_node(pod, node, free)
        if reasons:
            rejections.append(reasons)
            continue
        alloc = node["status"].get("allocatable") or {}
        share = sum((1 - free.get(k, Decimal(0)) / quantity(alloc[k]))
                    for k in ("cpu", "memory") if quantity(alloc.get(k, "0")) > 0)
        fitting.append((Decimal(share), name))
    if fitting:
        return min(fitting)[1], ""
    return None, fit_message(len(nodes), rejections)
