"""Both Helm charts, rendered by the real Helm engine and checked against Kubernetes' schema.

``helm_python`` embeds Helm's Go SDK: ``lint`` is ``helm lint`` and ``Chart.render`` is
``helm template``. Every rendered object is validated (strict: unknown fields fail too)
against the OpenAPI schema of Kubernetes v1.36 with ``kubernetes-validate``, so an object
the API server would refuse fails here. Custom resources (ServiceMonitor) have no schema
there and are checked for their required shape instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml

CHARTS = Path(__file__).resolve().parents[2] / "charts"
KUBE_VERSION = "1.36.0"
CUSTOM = {"ServiceMonitor"}

HUB_MODES: dict[str, dict[str, Any]] = {
    "sqlite": {},
    "sqlite-everything": {
        "advertise": "hub.example.com:8849", "ca": {"existingSecret": "fuyao-ca"},
        "pushCredentialKey": {"existingSecret": "fuyao-push-key"},
        "profile": {"plugins": [{"name": "Headroom", "weight": 2}]},
        "timings": {"heartbeat_grace": "30s"},
        "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
        "ingress": {"enabled": True, "className": "nginx", "tlsSecret": "hub-tls"},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
    },
    "postgresql-3-replicas": {"replicas": 3, "database": {"existingSecret": "fuyao-db"},
                              "ca": {"existingSecret": "fuyao-ca"}},
    "no-persistence": {"persistence": {"enabled": False}},
}
AGENT_MODES: dict[str, dict[str, Any]] = {
    "pull": {"cluster": "gpu-east", "hub": "hub.example.com:8849"},
    "pull-insecure": {"cluster": "gpu-east", "hub": "hub:8849", "tls": False},
    "pull-pvc": {"cluster": "gpu-east", "hub": "hub:8849", "register": "hub:8850",
                 "stateClaim": "fuyao-agent-state"},
}


def render(chart: str, values: dict[str, Any]) -> list[dict[str, Any]]:
    loaded = helm_python.Chart.load(CHARTS / chart)
    try:
        files = loaded.render(values, name="fy", namespace="fuyao-system", is_install=True)
    finally:
        loaded.close()
    objects = []
    for path, text in sorted(files.items()):
        if not path.endswith((".yaml", ".yml")):
            continue
        objects += [doc for doc in yaml.safe_load_all(text) if doc]
    return objects


def check(obj: dict[str, Any]) -> None:
    if obj["kind"] in CUSTOM:
        assert obj["apiVersion"] == "monitoring.coreos.com/v1"
        assert obj["spec"]["endpoints"] and obj["spec"]["selector"]["matchLabels"]
        return
    kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


@pytest.mark.parametrize("chart", ["fuyao-hub", "fuyao-agent"])
def test_charts_lint_clean(chart: str) -> None:
    values = AGENT_MODES["pull"] if chart == "fuyao-agent" else {}
    report = helm_python.lint(CHARTS / chart, values, strict=True, kube_version="v1.36.0")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("values", HUB_MODES.values(), ids=HUB_MODES)
def test_hub_chart_renders_valid_objects(values: dict[str, Any]) -> None:
    objects = render("fuyao-hub", values)
    for obj in objects:
        check(obj)
    deployment = by_kind(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (hub,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert hub["securityContext"]["readOnlyRootFilesystem"] is True
    assert {p["containerPort"] for p in hub["ports"]} == {8848, 8849, 8850, 8851}
    assert {p["port"] for p in by_kind(objects, "Service")["spec"]["ports"]} == {
        8848, 8849, 8850, 8851}
    assert "--register-port=8850" in hub["args"]
    assert hub["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_sqlite_mode_is_one_writer_on_a_claim() -> None:
    objects = render("fuyao-hub", {})
    deployment = by_kind(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    assert by_kind(objects, "PersistentVolumeClaim")["spec"]["resources"]["requests"][
        "storage"] == "5Gi"


def test_postgresql_mode_runs_replicas_from_the_database_secret() -> None:
    objects = render("fuyao-hub", HUB_MODES["postgresql-3-replicas"])
    assert not [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    deployment = by_kind(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    (hub,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--db=$(FUYAO_DB_URL)" in hub["args"]
    assert hub["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "fuyao-db", "key": "url"}
    assert by_kind(objects, "PodDisruptionBudget")["spec"]["minAvailable"] == 1


def test_profile_timings_and_secrets_come_from_values() -> None:
    objects = render("fuyao-hub", HUB_MODES["sqlite-everything"])
    config = yaml.safe_load(by_kind(objects, "ConfigMap")["data"]["hub.yaml"])
    assert config == {"profile": {"plugins": [{"name": "Headroom", "weight": 2}]},
                      "timings": {"heartbeat_grace": "30s"}}
    pod = by_kind(objects, "Deployment")["spec"]["template"]["spec"]
    assert "--secrets-key-file=/etc/fuyao/push-key/key" in pod["containers"][0]["args"]
    assert pod["initContainers"][0]["name"] == "ca"
    assert {v["name"] for v in pod["volumes"]} >= {"ca", "push-key"}
    assert by_kind(objects, "Ingress")["spec"]["rules"][0]["host"] == "fuyao.example.com"


def test_more_than_one_replica_on_sqlite_is_refused() -> None:
    with pytest.raises(helm_python.HelmError, match="replicas > 1 needs PostgreSQL"):
        render("fuyao-hub", {"replicas": 2})


@pytest.mark.parametrize("values", AGENT_MODES.values(), ids=AGENT_MODES)
def test_agent_chart_renders_valid_objects(values: dict[str, Any]) -> None:
    objects = render("fuyao-agent", values)
    for obj in objects:
        check(obj)
    # Two Deployments: the agent and its fencing watchdog (test_watchdog_chart.py).
    deployment = next(o for o in objects if o["kind"] == "Deployment"
                      and o["metadata"]["name"].endswith("-fuyao-agent"))
    (agent,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--cluster=gpu-east" in agent["args"]
    assert ("--ca-cert=/etc/fuyao/join/ca.crt" in agent["args"]) is values.get("tls", True)
    assert ("--register=hub:8850" in agent["args"]) is ("register" in values)
    (state,) = [v for v in deployment["spec"]["template"]["spec"]["volumes"]
                if v["name"] == "state"]
    if "stateClaim" in values:
        assert state["persistentVolumeClaim"] == {"claimName": "fuyao-agent-state"}
    else:
        assert state["emptyDir"] == {}


def test_an_object_the_api_server_would_refuse_fails_the_check() -> None:
    objects = render("fuyao-hub", {})
    broken = by_kind(objects, "Service")
    broken["spec"]["ports"][0]["port"] = "eighty"
    with pytest.raises(kubernetes_validate.ValidationError):
        check(broken)
