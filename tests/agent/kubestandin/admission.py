"""What the v1.36 API server checks and fills in before it stores an object.

Called by ``KubeStandIn`` on create, server-side apply and ``dryRun=All``: schema validation
against the Kubernetes OpenAPI schema of v1.36 (``kubernetes-validate``), DNS names, the
rules for extended resources (in ``limits``, requests equal to limits, whole numbers), the
``ServiceAccount`` admission plugin (no pod before its namespace's ``default`` account) and
``Priority`` (the class must exist; ``spec.priority`` comes from it), plus defaulting.
Every refusal is ``Refused(code, reason, message)`` with the message the real server writes.
"""

from __future__ import annotations

import copy
import re
from decimal import Decimal
from typing import Any

import kubernetes_validate
from kubernetes.utils import parse_quantity

SCHEMA_VERSION = "1.36.0"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NATIVE = ("cpu", "memory", "ephemeral-storage", "pods")


class Refused(Exception):
    """The API server says no: HTTP code, Status reason and message."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def invalid(kind: str, name: str, problems: list[str]) -> Refused:
    """422 Invalid, as the API server words it."""
    joined = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
    return Refused(422, "Invalid", f'{kind} "{name}" is invalid: {joined}')


def validate_schema(obj: dict[str, Any], *, strict: bool) -> None:
    """The object against its OpenAPI schema (``strict``: unknown fields too)."""
    name = obj.get("metadata", {}).get("name", "")
    try:
        kubernetes_validate.validate(obj, SCHEMA_VERSION, strict=strict)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.path)
        raise invalid(obj.get("kind", "Object"), name, [f"{path}: {exc.message}"]) from exc
    except kubernetes_validate.SchemaNotFoundError as exc:
        raise Refused(404, "NotFound", f"no kind {obj.get('kind')!r} is registered") from exc
    if not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
        raise invalid(obj.get("kind", "Object"), name, [
            f'metadata.name: Invalid value: "{name}": a lowercase RFC 1123 subdomain must '
            "consist of lower case alphanumeric characters, '-' or '.', and must start and "
            "end with an alphanumeric character"])


def is_extended(resource: str) -> bool:
    """Extended resources are domain-prefixed names outside ``kubernetes.io``."""
    if resource in _NATIVE or resource.startswith("hugepages-") or "/" not in resource:
        return False
    return not resource.split("/", 1)[0].endswith("kubernetes.io")


def resource_problems(pod: dict[str, Any]) -> list[str]:
    """What ``ValidateResourceRequirements`` says about the pod's containers."""
    problems = []
    for field in ("initContainers", "containers"):
        for i, container in enumerate(pod["spec"].get(field) or []):
            res = container.get("resources") or {}
            requests, limits = res.get("requests") or {}, res.get("limits") or {}
            where = f"spec.{field}[{i}].resources"
            for resource in sorted(set(requests) | set(limits)):
                if not is_extended(resource):
                    continue
                for part, values in (("limits", limits), ("requests", requests)):
                    if resource in values and parse_quantity(values[resource]) % 1 != 0:
                        problems.append(f'{where}.{part}[{resource}]: Invalid value: '
                                        f'"{values[resource]}": must be an integer')
                if resource in requests and parse_quantity(requests[resource]) != \
                        parse_quantity(limits.get(resource, "0")):
                    problems.append(
                        f'{where}.requests[{resource}]: Invalid value: "{requests[resource]}": '
                        f"must be equal to {resource} limit of {limits.get(resource, '0')}")
    return problems


def admit_pod(pod: dict[str, Any], ns: str, *, namespaces: dict[str, Any],
              accounts: dict[tuple[str, str], Any], classes: dict[str, Any]) -> dict[str, Any]:
    """Validate, run admission and default a new pod; the stored object."""
    pod = copy.deepcopy(pod)
    pod.setdefault("apiVersion", "v1")
    pod.setdefault("kind", "Pod")
    meta = pod.setdefault("metadata", {})
    name = meta.get("name", "")
    validate_schema(pod, strict=False)
    if ns not in namespaces:
        raise Refused(404, "NotFound", f'namespaces "{ns}" not found')
    if namespaces[ns]["metadata"].get("deletionTimestamp"):
        raise Refused(403, "Forbidden", f'pods "{name}" is forbidden: unable to create new '
                      f"content in namespace {ns} because it is being terminated")
    problems = resource_problems(pod)
    if problems:
        raise invalid("Pod", name, problems)
    spec = pod["spec"]
    account = spec.setdefault("serviceAccountName", "default")
    if (ns, account) not in accounts:
        raise Refused(403, "Forbidden", f'pods "{name}" is forbidden: error looking up service '
                      f'account {ns}/{account}: serviceaccount "{account}" not found')
    class_name = spec.get("priorityClassName")
    if class_name:
        if class_name not in classes:
            raise Refused(403, "Forbidden", f'pods "{name}" is forbidden: no PriorityClass '
                          f"with name {class_name} was found")
        spec["priority"] = classes[class_name]["value"]
    else:
        spec.setdefault("priority", 0)
    for container in spec.get("containers") or []:
        res = container.setdefault("resources", {})
        if res.get("limits"):  # requests default to limits
            res["requests"] = {**res["limits"], **(res.get("requests") or {})}
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("tolerations", [])
    meta["namespace"] = ns
    meta.setdefault("labels", {})
    meta.setdefault("annotations", {})
    pod["status"] = {"phase": "Pending", "conditions": []}
    return pod


def quantity(text: Any) -> Decimal:
    """A Kubernetes quantity as a Decimal (the client's own parser)."""
    return Decimal(parse_quantity(str(text)))
