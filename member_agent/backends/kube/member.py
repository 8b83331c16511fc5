"""What a task needs in the member before its pods: namespace, ServiceAccount, PriorityClass.

Called by ``KubeBackend.place``. The task namespace is created when missing and then waited
on until its ``default`` ServiceAccount exists (the ServiceAccount admission plugin refuses
pods before that). A task's priority maps to the PriorityClass ``fuyao-priority-<n>``,
created when missing; if RBAC forbids that, the agent says so once in its log and creates
pods without a class from then on. Multi-replica copies get the configured gang scheduler's
PodGroup, deleted again with the copy's pods. Each object is checked once per agent run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fuyao.errors import FuyaoError
from fuyao.wire.v1 import agent_pb2 as pb
from member_agent.backends.base import workload_name
from member_agent.backends.kube.manifest import pod_group, priority_class_name
from member_agent.backends.kube.options import KubeOptions

log = logging.getLogger(__name__)
_MAX_PRIORITY = 1_000_000_000   # user classes may not go above (system classes do)
_GROUP_API = {"volcano": ("scheduling.volcano.sh", "v1beta1"),
              "coscheduling": ("scheduling.x-k8s.io", "v1alpha1")}


def api_reason(exc: ApiException) -> str:
    """``403 Forbidden: <the server's message>``."""
    try:
        message = str(json.loads(exc.body or "{}").get("message", ""))
    except (ValueError, AttributeError):
        message = ""
    head = f"{exc.status} {exc.reason}".strip()
    return f"{head}: {message}" if message else head


class MemberSetup:
    """Namespace, ServiceAccount, PriorityClasses and PodGroups, each ensured once."""

    def __init__(self, api: client.ApiClient, options: KubeOptions) -> None:
        self._core = client.CoreV1Api(api)
        self._scheduling = client.SchedulingV1Api(api)
        self._custom = client.CustomObjectsApi(api)
        self._opts = options
        self._namespace_ready = False
        self._classes: set[str] = set()
        self._classes_forbidden = False

    async def namespace(self) -> None:
        """Create the task namespace if missing; wait for its default ServiceAccount."""
        if self._namespace_ready:
            return
        ns = self._opts.namespace
        try:
            await asyncio.to_thread(self._core.read_namespace, ns)
        except ApiException as exc:
            if exc.status != 404:
                raise FuyaoError(f"reading namespace {ns}: {api_reason(exc)}") from exc
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": ns, "labels": {"app.kubernetes.io/managed-by": "fuyao-agent"}}}
            try:
                await asyncio.to_thread(self._core.create_namespace, cast(Any, body))
                log.info("created namespace %s", ns)
            except ApiException as create_exc:
                if create_exc.status != 409:
                    raise FuyaoError(f"creating namespace {ns}: "
                                     f"{api_reason(create_exc)}") from create_exc
        await self._wait_for_account(ns)
        self._namespace_ready = True

    async def _wait_for_account(self, ns: str) -> None:
        deadline = time.monotonic() + self._opts.account_timeout
        delay = 0.05
        while True:
            try:
                await asyncio.to_thread(self._core.read_namespaced_service_account, "default", ns)
                return
            except ApiException as exc:
                if exc.status != 404:
                    raise FuyaoError(f"reading ServiceAccount {ns}/default: "
                                     f"{api_reason(exc)}") from exc
            if time.monotonic() >= deadline:
                raise FuyaoError(
                    f"namespace {ns} has no default ServiceAccount after "
                    f"{self._opts.account_timeout:.0f}s: pods cannot be created there (is the "
                    "ServiceAccount controller of kube-controller-manager running?)")
            await asyncio.sleep(delay)
            delay = min(1.0, delay * 2)

    async def priority_class(self, priority: int) -> str | None:
        """The PriorityClass for ``priority``, created if missing; None if not allowed."""
        if not self._opts.priority_classes or self._classes_forbidden:
            return None
        name = priority_class_name(priority)
        if name in self._classes:
            return name
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name, "labels": {
                    "app.kubernetes.io/managed-by": "fuyao-agent"}},
                "value": max(-_MAX_PRIORITY, min(_MAX_PRIORITY, priority)),
                "globalDefault": False,
                "description": f"Fuyao task priority {priority}"}
        try:
            await asyncio.to_thread(self._scheduling.create_priority_class, cast(Any, body))
        except ApiException as exc:
            if exc.status == 403:
                self._classes_forbidden = True
                log.warning("cannot create PriorityClass %s (%s); task pods are created "
                            "without a priority class from now on", name, api_reason(exc))
                return None
            if exc.status != 409:
                raise FuyaoError(f"creating PriorityClass {name}: {api_reason(exc)}") from exc
        self._classes.add(name)
        return name

    async def pod_group(self, command: pb.PlaceTask) -> None:
        """The gang scheduler's PodGroup for a multi-replica copy (none in ``agent`` mode)."""
        if self._opts.gang == "agent" or command.workload.replicas <= 1:
            return
        group, version = _GROUP_API[self._opts.gang]
        body: dict[str, Any] = pod_group(command, self._opts.namespace, self._opts)
        try:
            await asyncio.to_thread(self._custom.create_namespaced_custom_object, group,
                                    version, self._opts.namespace, "podgroups", body)
        except ApiException as exc:
            if exc.status != 409:
                raise FuyaoError(f"creating PodGroup {body['metadata']['name']}: "
                                 f"{api_reason(exc)}") from exc

    async def delete_pod_group(self, task_id: str, generation: int) -> None:
        """Delete a copy's PodGroup once its pods are gone (none in ``agent`` mode)."""
        if self._opts.gang == "agent":
            return
        group, version = _GROUP_API[self._opts.gang]
        name = workload_name(task_id, generation)
        try:
            await asyncio.to_thread(self._custom.delete_namespaced_custom_object, group,
                                    version, self._opts.namespace, "podgroups", name)
        except ApiException as exc:
            if exc.status != 404:
                log.warning("deleting PodGroup %s failed: %s", name, api_reason(exc))
