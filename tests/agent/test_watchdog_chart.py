"""The agent chart's fencing watchdog, rendered by real Helm: its own Deployment running
``fuyao-agent watchdog``, least-privilege RBAC in the task namespace only, and the agent's
right to renew (only) its Lease."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from helm_python.chart import Chart

from fuyao.kubefence import DEFAULT_IMAGE, WATCHDOG, watchdog_objects, watchdog_rules

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
    # The image's default command is the hub: the watchdog names its own entry point.
    assert pod["containers"][0]["command"] == ["fuyao-agent"]
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


def test_the_hub_installs_the_same_watchdog_in_push_members_as_the_chart() -> None:
    """``fuyao.kubefence`` (what ``cluster join`` in push mode installs) and the chart grant
    the same rules and run the same command: they cannot drift apart."""
    docs = render(VALUES | {"watchdog": {"enabled": True, "leaseName": "fence",
                                         "interval": 2}})
    chart_pod = by(docs, "Deployment", "east-fuyao-watchdog")["spec"]["template"]["spec"]
    chart_role = by(docs, "Role", "east-fuyao-watchdog")
    pushed = {o["kind"]: o for o in watchdog_objects("fuyao-tasks", "fence", interval=2,
                                                     cluster="east")}
    for obj in pushed.values():
        kubernetes_validate.validate(obj, "1.30", strict=True)
        assert obj["metadata"]["namespace"] == "fuyao-tasks"
    assert pushed["Role"]["rules"] == chart_role["rules"] == watchdog_rules("fence")
    container = pushed["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    (chart_container,) = chart_pod["containers"]
    assert (container["command"], container["args"]) == (
        chart_container["command"], chart_container["args"])
    assert container["image"] == chart_container["image"] == DEFAULT_IMAGE
    binding = pushed["RoleBinding"]
    assert binding["roleRef"]["name"] == pushed["Role"]["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": WATCHDOG,
                                    "namespace": "fuyao-tasks"}]
    assert pushed["Deployment"]["spec"]["template"]["spec"]["serviceAccountName"] == WATCHDOG


def test_watchdog_can_be_turned_off() -> None:
    docs = render(VALUES | {"watchdog": {"enabled": False, "leaseName": "fuyao-agent"}})
    assert not [d for d in docs if "watchdog" in d["metadata"]["name"]]
