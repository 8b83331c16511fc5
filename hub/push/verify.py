"""Check pushed credentials before anything is stored: can they do what the agent does?

Called by ``hub.push.supervisor.PushAgents.join`` (in a thread: the ``kubernetes`` client
blocks). It lists nodes for real (a refusal names the verb: ``list nodes``) and asks the API
server with ``SelfSubjectAccessReview`` for the other verbs the agent needs, so a join with
too little RBAC fails at once with the missing verbs named, not later in the agent's log.
"""

from __future__ import annotations

import json
from typing import Any, cast

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.config import ConfigException
from kubernetes.config.kube_config import new_client_from_config_dict

from fuyao.errors import InvalidInput

TIMEOUT = 10.0
# (verb, resource, API group) the agent needs beyond listing nodes.
NEEDED = (("watch", "nodes", ""), ("list", "pods", ""), ("watch", "pods", ""),
          ("create", "pods", ""), ("delete", "pods", ""), ("create", "namespaces", ""),
          ("create", "leases", "coordination.k8s.io"), ("update", "leases", "coordination.k8s.io"))


def check(doc: dict[str, Any]) -> int:
    """The number of nodes the credentials see; ``InvalidInput`` naming what is missing."""
    try:
        api = new_client_from_config_dict(doc)  # type: ignore[no-untyped-call]
    except (ConfigException, ValueError, TypeError) as exc:
        raise InvalidInput(f"the credentials cannot be used: {exc}") from exc
    server = api.configuration.host
    try:
        nodes = client.CoreV1Api(api).list_node(_request_timeout=TIMEOUT)
        reviews = client.AuthorizationV1Api(api)
        missing = [f"{verb} {resource}" for verb, resource, group in NEEDED
                   if not _allowed(reviews, verb, resource, group)]
    except ApiException as exc:
        raise InvalidInput(_refusal(exc, server)) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise InvalidInput(f"cannot reach the Kubernetes API at {server}: {exc}") from exc
    finally:
        api.close()
    if missing:
        raise InvalidInput(f"the credentials can list nodes at {server} but RBAC does not "
                           f"allow: {', '.join(missing)} (see docs/kubernetes.md, agent RBAC)")
    return len(nodes.items)


def _allowed(reviews: client.AuthorizationV1Api, verb: str, resource: str, group: str) -> bool:
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "resource": resource,
                                            "group": group}}}
    answer = reviews.create_self_subject_access_review(cast(Any, body), _request_timeout=TIMEOUT)
    return bool(answer.status and answer.status.allowed)


def api_message(exc: ApiException) -> str:
    """The API server's own message (its Status body's ``message``), or empty."""
    try:
        return str(json.loads(exc.body or "{}").get("message", ""))
    except (ValueError, AttributeError):
        return ""


def _refusal(exc: ApiException, server: str) -> str:
    message = api_message(exc)
    if exc.status == 401:
        return f"the Kubernetes API at {server} refused the credentials (401 Unauthorized)"
    if exc.status == 403:
        return (f"RBAC denies verb \"list\" on \"nodes\" at {server}: {message or exc.reason} "
                "(the agent needs get/list/watch nodes; see docs/kubernetes.md)")
    return f"the Kubernetes API at {server} answered {exc.status} {exc.reason}: {message}"
