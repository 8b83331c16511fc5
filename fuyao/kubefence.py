"""The Kubernetes objects that fence a member by lease: the watchdog and its least privilege.

Fencing (docs/concepts/lifecycle.md): the agent renews a Lease in the task namespace only
while it holds a live session with the hub; a watchdog, running in the member apart from the
agent, deletes the pods of ``restart-elsewhere`` tasks once that Lease has expired. A pull
member gets the watchdog from the agent chart (``charts/fuyao-agent/templates/watchdog.yaml``);
a push member gets the same objects from the hub at ``cluster join`` (``hub.push.fencing``),
built here. ``tests/charts`` checks that the chart and this module grant the same rules and
run the same command, so the two cannot drift apart.

Everything lives in the task namespace: the watchdog's ServiceAccount, a Role that may only
read the one Lease and list and delete pods, its RoleBinding and a one-replica Deployment
running ``fuyao-agent watchdog`` from the same image as the agent.
"""

from __future__ import annotations

from typing import Any

from fuyao import __version__

WATCHDOG = "fuyao-watchdog"
DEFAULT_IMAGE = f"ghcr.io/fuyao/fuyao:{__version__}"
MANAGED_BY = "fuyao-hub"


def watchdog_rules(lease_name: str) -> list[dict[str, Any]]:
    """The watchdog's whole permission: get its one Lease; list and delete pods."""
    return [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "resourceNames": [lease_name], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]},
    ]


def watchdog_args(namespace: str, lease_name: str, interval: float = 1.0) -> list[str]:
    """The watchdog container's arguments (its entry point is ``fuyao-agent``)."""
    return ["watchdog", f"--namespace={namespace}", f"--lease-name={lease_name}",
            f"--interval={interval:g}"]


def watchdog_objects(namespace: str, lease_name: str = "fuyao-agent", *,
                     image: str = DEFAULT_IMAGE, interval: float = 1.0,
                     cluster: str = "") -> list[dict[str, Any]]:
    """ServiceAccount, Role, RoleBinding and Deployment of a push member's watchdog, in the
    order they must be created (the Deployment last: its account must exist first)."""
    labels = {"app.kubernetes.io/name": WATCHDOG, "app.kubernetes.io/managed-by": MANAGED_BY}
    if cluster:
        labels["fuyao.io/cluster"] = cluster

    def meta() -> dict[str, Any]:
        return {"name": WATCHDOG, "namespace": namespace, "labels": dict(labels)}

    selector = {"app.kubernetes.io/name": WATCHDOG}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta()},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(),
         "rules": watchdog_rules(lease_name)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": meta(),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": WATCHDOG},
         "subjects": [{"kind": "ServiceAccount", "name": WATCHDOG, "namespace": namespace}]},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(),
         "spec": {
             "replicas": 1,
             "selector": {"matchLabels": dict(selector)},
             "template": {
                 "metadata": {"labels": dict(labels)},
                 "spec": {
                     "serviceAccountName": WATCHDOG,
                     "containers": [{
                         "name": "watchdog", "image": image,
                         "imagePullPolicy": "IfNotPresent",
                         "command": ["fuyao-agent"],
                         "args": watchdog_args(namespace, lease_name, interval),
                         "resources": {"requests": {"cpu": "20m", "memory": "64Mi"},
                                       "limits": {"memory": "128Mi"}},
                     }],
                 },
             },
         }},
    ]
