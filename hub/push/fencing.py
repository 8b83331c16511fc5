"""Install (and remove) a push member's watchdog: fencing by lease for members the hub runs.

Called by ``hub.push.supervisor.PushAgents`` in a thread (the ``kubernetes`` client blocks):
``install`` at ``cluster join`` after the credentials are verified and before anything is
stored, ``uninstall`` at ``cluster remove`` after the hub's agent for the member stopped.

A push member's agent runs beside the hub, so a partition between the hub's host and the
member is exactly when its task pods must stop: the agent can no longer renew the member's
Lease, and the watchdog installed here - running IN the member, as the chart's does for pull
members - deletes the ``restart-elsewhere`` pods once the Lease expires, before the hub
re-places them (lease + margin). Objects come from ``fuyao.kubefence``; each is created, or
replaced when it already exists (a re-join), the way ``kubectl apply`` would.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.config import ConfigException
from kubernetes.config.kube_config import new_client_from_config_dict

from fuyao.errors import InvalidInput
from fuyao.kubefence import WATCHDOG, watchdog_objects
from hub.push.verify import api_message

log = logging.getLogger(__name__)
TIMEOUT = 10.0
Call = Callable[..., Any]


def install(doc: dict[str, Any], namespace: str, lease_name: str, image: str,
            cluster: str) -> list[str]:
    """Create or replace the watchdog's objects in ``namespace``; ``KIND/NAME`` of each.

    ``InvalidInput`` naming the object and the API server's answer when one is refused;
    what was created before the refusal is removed again (the join changes nothing).
    """
    api = _client(doc)
    done: list[dict[str, Any]] = []
    try:
        _ensure_namespace(api, namespace)
        for obj in watchdog_objects(namespace, lease_name, image=image, cluster=cluster):
            create, replace, _ = _verbs(api, obj["kind"])
            try:
                try:
                    create(namespace, obj, _request_timeout=TIMEOUT)
                except ApiException as exc:
                    if exc.status != 409:
                        raise
                    replace(WATCHDOG, namespace, obj, _request_timeout=TIMEOUT)
            except ApiException as exc:
                _remove(api, namespace, [o["kind"] for o in done])
                raise InvalidInput(f"cannot install the fencing watchdog ({obj['kind']} "
                                   f"{namespace}/{WATCHDOG}): {_reason(exc)}") from exc
            done.append(obj)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise InvalidInput(f"cannot reach the Kubernetes API to install the fencing "
                           f"watchdog: {exc}") from exc
    finally:
        api.close()
    return [f"{o['kind']}/{WATCHDOG}" for o in done]


def uninstall(doc: dict[str, Any], namespace: str) -> bool:
    """Delete the watchdog's objects; False (logged) when the member cannot be reached,
    in which case the watchdog keeps fencing the member's pods as its Lease has expired."""
    try:
        api = _client(doc)
    except InvalidInput as exc:
        log.warning("cannot remove the fencing watchdog: %s", exc.message)
        return False
    try:
        _remove(api, namespace, ["Deployment", "RoleBinding", "Role", "ServiceAccount"])
        return True
    except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
        log.warning("cannot remove the fencing watchdog from %s: %s (it stays and keeps "
                    "deleting restartable task pods while the agent's Lease is expired)",
                    namespace, exc)
        return False
    finally:
        api.close()


def _client(doc: dict[str, Any]) -> Any:
    """An API client for the member (``kubernetes`` is untyped: Any)."""
    try:
        return new_client_from_config_dict(doc)  # type: ignore[no-untyped-call]
    except (ConfigException, ValueError, TypeError) as exc:
        raise InvalidInput(f"the credentials cannot be used: {exc}") from exc


def _ensure_namespace(api: Any, namespace: str) -> None:
    body: Any = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    try:
        client.CoreV1Api(api).create_namespace(body, _request_timeout=TIMEOUT)
    except ApiException as exc:
        if exc.status != 409:
            raise InvalidInput(f"cannot create the task namespace {namespace}: "
                               f"{_reason(exc)}") from exc


def _remove(api: Any, namespace: str, kinds: list[str]) -> None:
    for kind in kinds:
        _, _, delete = _verbs(api, kind)
        try:
            delete(WATCHDOG, namespace, _request_timeout=TIMEOUT)
        except ApiException as exc:
            if exc.status != 404:
                raise


def _verbs(api: Any, kind: str) -> tuple[Call, Call, Call]:
    """(create, replace, delete) of the typed client for one of the watchdog's kinds."""
    core, rbac, apps = (client.CoreV1Api(api), client.RbacAuthorizationV1Api(api),
                        client.AppsV1Api(api))
    table: dict[str, tuple[Call, Call, Call]] = {
        "ServiceAccount": (core.create_namespaced_service_account,
                           core.replace_namespaced_service_account,
                           core.delete_namespaced_service_account),
        "Role": (rbac.create_namespaced_role, rbac.replace_namespaced_role,
                 rbac.delete_namespaced_role),
        "RoleBinding": (rbac.create_namespaced_role_binding,
                        rbac.replace_namespaced_role_binding,
                        rbac.delete_namespaced_role_binding),
        "Deployment": (apps.create_namespaced_deployment, apps.replace_namespaced_deployment,
                       apps.delete_namespaced_deployment),
    }
    return table[kind]


def _reason(exc: ApiException) -> str:
    """The API server's own message, else the HTTP reason, after the status code."""
    return f"{exc.status} {api_message(exc) or exc.reason}"
