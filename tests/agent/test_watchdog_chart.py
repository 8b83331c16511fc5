"""The agent chart's fencing watchdog, rendered by real Helm: its own Deployment running
``fuyao-agent watchdog``, least-privilege RBAC in the task namespace only, and the agent's
right to renew (only) its Lease."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from helm_python.chart import Chart

CHART = Path(__file__).resolve().parents[2] / "charts" / "fuyao-agent"
VALUES = {"cluster": "gpu-east", "hub": "hub.example:8849"}


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    out = Chart.load(CHART).render(values, name="east", namespace="fuyao-system")
    return [doc for text in out.values() for doc in yaml.safe_load_all(text) if doc]


def by(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def test_watchdog_deployment_and_least_privilege_rbac() -> None:
    docs = render(VALUES)
    for doc in docs:
        kubernetes_validate.validate(doc, "1.30", strict=True)
    deployment = by(docs, "Deployment", "east-fuyao-watchdog")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "east-fuyao-watchdog"
    assert pod["containers"][0]["args"] == [
        "watchdog", "--namespace=fuyao-tasks", "--lease-name=fuyao-agent", "--interval=1"]
    role = by(docs, "Role", "east-fuyao-watchdog")
    assert role["metadata"]["namespace"] == "fuyao-tasks"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "resourceNames": ["fuyao-agent"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]}]
    agent_role = by(docs, "Role", "east-fuyao-agent-lease")
    assert {v for r in agent_role["rules"] for v in r["verbs"]} == {"create", "get", "update"}
    agent = by(docs, "Deployment", "east-fuyao-agent")
    assert "--lease-name=fuyao-agent" in agent["spec"]["template"]["spec"]["containers"][0][
        "args"]


def test_watchdog_can_be_turned_off() -> None:
    docs = render(VALUES | {"watchdog": {"enabled": False, "leaseName": "fuyao-agent"}})
    assert not [d for d in docs if "watchdog" in d["metadata"]["name"]]
