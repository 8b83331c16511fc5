"""The stand-in's plain namespaced objects: ServiceAccounts, Roles, RoleBindings, Deployments.

What the hub does to a push member's API server when it installs the fencing watchdog
(``hub.push.fencing``): create (POST), replace (PUT), get and delete, with the API server's
answers where a client can tell: the namespace must exist (404), the object's namespace and
name must agree with the URL (400), a second create is ``409 AlreadyExists``, a replace of a
missing object ``404 NotFound``, the object is validated against the v1.36 schema (422), and
a Role may not grant what the caller itself is not allowed (RBAC's escalation check, 403).
Nothing runs a Deployment here: tests run its container's command themselves.
Routed by ``server``; state shared with ``cluster`` (ServiceAccounts admit pods).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from typing import Any

from tests.agent.kubestandin.admission import Refused, validate_schema

NOW = "2025-01-01T00:00:00Z"
# resource -> (kind, apiVersion, the qualified name API errors use)
RESOURCES = {
    "serviceaccounts": ("ServiceAccount", "v1", "serviceaccounts"),
    "roles": ("Role", "rbac.authorization.k8s.io/v1", "roles.rbac.authorization.k8s.io"),
    "rolebindings": ("RoleBinding", "rbac.authorization.k8s.io/v1",
                     "rolebindings.rbac.authorization.k8s.io"),
    "deployments": ("Deployment", "apps/v1", "deployments.apps"),
}


class Objects:
    """Create, replace and delete of the namespaced kinds in ``RESOURCES``."""

    def __init__(self, tables: dict[str, dict[tuple[str, str], dict[str, Any]]],
                 namespaces: dict[str, Any], denied: Callable[[], set[tuple[str, str]]],
                 user: str, record: Any) -> None:
        self.tables = tables
        self.namespaces = namespaces
        self.denied = denied
        self.user = user
        self.record = record

    def serve(self, method: str, resource: str, ns: str, name: str | None,
              body: Any) -> tuple[int, Any]:
        """One call on ``.../namespaces/NS/RESOURCE[/NAME]``."""
        kind, api_version, qualified = RESOURCES[resource]
        table = self.tables[resource]
        if method == "DELETE" and name is not None:
            if table.pop((ns, name), None) is None:
                raise Refused(404, "NotFound", f'{qualified} "{name}" not found')
            return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success",
                         "details": {"name": name, "kind": resource}}
        if method not in ("POST", "PUT") or not isinstance(body, dict):
            raise Refused(405, "MethodNotAllowed", f"{method} {resource} is not served here")
        obj = copy.deepcopy(body)
        obj.setdefault("apiVersion", api_version)
        obj.setdefault("kind", kind)
        meta = obj.setdefault("metadata", {})
        if meta.get("namespace", ns) != ns:
            raise Refused(400, "BadRequest", "the namespace of the provided object does not "
                          "match the namespace sent on the request")
        meta["namespace"] = ns
        if method == "PUT" and meta.get("name") != name:
            raise Refused(400, "BadRequest", f'the name of the object ({meta.get("name")}) '
                          f"does not match the name on the URL ({name})")
        validate_schema(obj, strict=False)
        if ns not in self.namespaces:
            raise Refused(404, "NotFound", f'namespaces "{ns}" not found')
        if kind == "Role":
            self._escalation(obj)
        key = (ns, meta["name"])
        if method == "POST":
            if key in table:
                raise Refused(409, "AlreadyExists", f'{qualified} "{key[1]}" already exists')
            meta.update({"uid": str(uuid.uuid4()), "creationTimestamp": NOW})
            table[key] = obj
            self.record(resource, "ADDED", obj)
            return 201, copy.deepcopy(obj)
        if key not in table:
            raise Refused(404, "NotFound", f'{qualified} "{key[1]}" not found')
        meta.update({k: table[key]["metadata"][k] for k in ("uid", "creationTimestamp")})
        table[key] = obj
        self.record(resource, "MODIFIED", obj)
        return 200, copy.deepcopy(obj)

    def _escalation(self, role: dict[str, Any]) -> None:
        """RBAC: a Role may only grant what its creator may already do."""
        for rule in role.get("rules") or []:
            for verb in rule.get("verbs") or []:
                for resource in rule.get("resources") or []:
                    if (verb, resource) in self.denied():
                        raise Refused(403, "Forbidden", (
                            f'roles.rbac.authorization.k8s.io "{role["metadata"]["name"]}" is '
                            f'forbidden: user "{self.user}" is attempting to grant RBAC '
                            f"permissions not currently held: {{Resources:[\"{resource}\"], "
                            f'Verbs:["{verb}"]}}'))
