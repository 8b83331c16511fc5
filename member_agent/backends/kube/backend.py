"""The ``kube`` backend: a real Kubernetes member through the official ``kubernetes`` client.

Built by ``member_agent.cli`` (``KubeBackend.from_kubeconfig``) and driven by the connection.
It lists and then watches nodes and pods (``CoreV1Api`` + ``kubernetes.watch.Watch``, each
watch in a daemon thread that posts events to the event loop), keeps a cache, and turns it
into ``NodeInfo`` (``convert.node_info``) and task phases (``convert.copy_phase``). A task copy
becomes one Pod per replica (``manifest.pod_manifests``) in ``namespace``; the member's own
kube-scheduler binds them. Node changes are emitted before the task report they cause: a
pod's watch event first refreshes its node, then its copy.

With ``label_nodes`` (the default) the agent writes its derived ``fuyao.io/*`` labels onto
the nodes, as GPU Feature Discovery writes ``nvidia.com/*``, so node affinity on those keys
works in the member; the keys it wrote are listed in the ``fuyao.io/derived-labels``
annotation and re-derived, never taken as admin overrides.

Before a copy's pods it ensures the namespace, its ServiceAccount, the PriorityClass and a
gang scheduler's PodGroup (``member``); pods that stop for someone else's reasons fail the
copy with the cause (``reasons``); agent-mode gangs not wholly bound by their deadline are
rolled back and reported Unschedulable; finished copies' pods are deleted after a TTL.
Settings: ``options.KubeOptions``. Tested against the v1.36 stand-in in
``tests/agent/kubestandin/`` with the real client; not against a real API server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import urllib3
import yaml
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.config.kube_config import new_client_from_config_dict

from fuyao.aio import cancel_and_wait
from fuyao.errors import FuyaoError, InvalidInput, Transient
from fuyao.inventory import NodeInfo
from fuyao.labels import PREFIX
from fuyao.selector import parse_selector
from fuyao.wire.v1 import agent_pb2 as pb
from member_agent.backends.base import (
    EventSink,
    NodesChanged,
    Phase,
    TaskChanged,
    TaskStatus,
    now_ms,
)
from member_agent.backends.kube import reasons
from member_agent.backends.kube.convert import (
    DERIVED_ANNOTATION,
    GENERATION_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    REPLICAS_LABEL,
    copy_phase,
    node_info,
    raw_labels,
)
from member_agent.backends.kube.manifest import TASK_ID_ANNOTATION, pod_manifests
from member_agent.backends.kube.member import MemberSetup, api_reason
from member_agent.backends.kube.options import KubeOptions

log = logging.getLogger(__name__)
CopyKey = tuple[str, int]
RETAIN_FINISHED_SECONDS = 600.0


class KubeBackend:
    """A Kubernetes member cluster seen through list+watch."""

    name = "kube"

    def __init__(
        self, api: client.ApiClient, options: KubeOptions | None = None, **overrides: Any
    ) -> None:
        opts = replace(options or KubeOptions(), **overrides)
        self.options = opts
        self.api_client = api           # also renews the member's Lease (member_agent.kubelease)
        self._core = client.CoreV1Api(api)
        self._member = MemberSetup(api, opts)
        self.namespace = opts.namespace
        self._label_nodes = opts.label_nodes
        self._watch_timeout = opts.watch_timeout
        self._retry_seconds = opts.retry_seconds
        self._nodes: dict[str, Any] = {}
        self._views: dict[str, NodeInfo] = {}
        self._pods: dict[str, Any] = {}
        self._pods_on: dict[str, set[str]] = {}
        self._copy_pods: dict[CopyKey, set[str]] = {}
        self._reported: dict[CopyKey, TaskStatus] = {}
        self._finished_at: dict[CopyKey, float] = {}
        self._cancelling: dict[CopyKey, str] = {}
        self._sink: EventSink = lambda event: None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watches: list[watch.Watch] = []
        self._patching: dict[str, dict[str, Any]] = {}
        self._finished_pod_ttl = opts.finished_pod_ttl
        self._gang_deadline: dict[CopyKey, float] = {}
        self._placing: set[CopyKey] = set()
        self._rolling_back: dict[CopyKey, str] = {}
        self._last_pod: dict[CopyKey, Any] = {}   # the last pod of a copy seen deleted
        self._gone_nodes: set[str] = set()
        self._sweeper: asyncio.Task[None] | None = None

    @classmethod
    def from_kubeconfig(
        cls, path: Path | None, options: KubeOptions, *, context: str | None = None
    ) -> KubeBackend:
        """Client from a kubeconfig file (``-``: read from stdin, as the hub hands a pushed
        member's credentials), else in-cluster config, else ``~/.kube/config``."""
        try:
            if path is not None and str(path) == "-":
                document = yaml.safe_load(sys.stdin.read())
                if not isinstance(document, dict):
                    raise InvalidInput("the kubeconfig read from stdin is not a mapping")
                api = new_client_from_config_dict(  # type: ignore[no-untyped-call]
                    document, context=context)
                return cls(api, options)
            if path is not None:
                config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=str(path), context=context)
            else:
                try:
                    config.load_incluster_config()  # type: ignore[no-untyped-call]
                except config.ConfigException:
                    config.load_kube_config()  # type: ignore[no-untyped-call]
        except (config.ConfigException, OSError, yaml.YAMLError) as exc:
            raise InvalidInput(f"cannot load Kubernetes credentials: {exc}") from exc
        return cls(client.ApiClient(), options)

    def cluster_labels(self) -> dict[str, str]:
        """None of its own: cluster labels come from ``--cluster-label``."""
        return {}

    # --- lifecycle --------------------------------------------------------------------

    async def start(self, sink: EventSink) -> None:
        """List nodes and pods, then keep them current with two watch threads."""
        self._sink = sink
        self._loop = asyncio.get_running_loop()
        try:
            nodes, node_rv = await asyncio.to_thread(self._list, "nodes")
            pods, pod_rv = await asyncio.to_thread(self._list, "pods")
        except ApiException as exc:
            raise FuyaoError(f"listing nodes and pods: {api_reason(exc)}") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise Transient(f"cannot reach the Kubernetes API: {exc}") from exc
        self._relist_pods(pods)  # pods first, so the first node views count them
        self._relist_nodes(nodes)
        for kind, rv in (("nodes", node_rv), ("pods", pod_rv)):
            thread = threading.Thread(
                target=self._watch_loop, args=(kind, rv), name=f"kube-watch-{kind}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        self._sweeper = asyncio.create_task(self._sweep_loop(), name="kube-finished-pods")

    async def stop(self) -> None:
        """Stop the watches (pods keep running); gives up on a stuck thread after a second."""
        self._stopping.set()
        if self._sweeper is not None:
            await cancel_and_wait([self._sweeper])
        deadline = time.monotonic() + 1.0
        while any(t.is_alive() for t in self._threads) and time.monotonic() < deadline:
            for w in list(self._watches):
                w.stop()  # type: ignore[no-untyped-call]
                response = getattr(w, "_resp", None)  # the watch's urllib3 response, if open
                if response is not None and hasattr(response, "shutdown"):
                    with contextlib.suppress(ValueError, RuntimeError, OSError):
                        response.shutdown()  # unblocks the thread's read (urllib3 >= 2.3)
            await asyncio.sleep(0.02)
        self._threads.clear()

    def nodes(self) -> list[NodeInfo]:
        """Every node as the cache has it."""
        return [self._views[name] for name in sorted(self._views)]

    def tasks(self) -> list[TaskStatus]:
        """Every copy with pods in the namespace, and copies finished in the last ten minutes."""
        cutoff = time.monotonic() - RETAIN_FINISHED_SECONDS
        for key in [k for k, at in self._finished_at.items() if at < cutoff]:
            if key not in self._copy_pods:
                self._reported.pop(key, None)
                self._finished_at.pop(key, None)
        return [self._reported[k] for k in sorted(self._reported)]

    # --- commands ---------------------------------------------------------------------

    async def place(self, command: pb.PlaceTask) -> None:
        """Create the copy's pods; the same id + generation twice is a no-op."""
        key = (command.task_id, command.generation)
        if key in self._reported or key in self._copy_pods or key in self._placing:
            return
        self._placing.add(key)
        try:
            await self._place(key, command)
        finally:
            self._placing.discard(key)

    async def _place(self, key: CopyKey, command: pb.PlaceTask) -> None:
        newest = max((g for t, g in self._all_keys() if t == command.task_id), default=0)
        if newest > command.generation:
            self._report(key, Phase.CANCELLED, reason=f"stale: generation {newest} already placed")
            return
        await self.cancel(command.task_id, command.generation - 1,
                          f"superseded by generation {command.generation}")
        try:
            await self._member.namespace()
            priority_class = await self._member.priority_class(command.workload.priority)
            manifests = pod_manifests(
                command, self.namespace, selector=parse_selector(command.workload.selector),
                node_values=self._node_values(), options=self.options,
                priority_class=priority_class,
            )
            await self._member.pod_group(command)
        except FuyaoError as exc:
            self._report(key, Phase.FAILED, reason=exc.message)
            return
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self._report(key, Phase.FAILED, reason=f"cannot reach the Kubernetes API: {exc}")
            return
        self._report(key, Phase.ACCEPTED)
        for manifest in manifests:
            try:
                created = await asyncio.to_thread(
                    self._core.create_namespaced_pod, self.namespace, cast(Any, manifest)
                )
                if f"{self.namespace}/{manifest['metadata']['name']}" not in self._pods:
                    self._index(created)  # known now, even before the watch reports it
            except ApiException as exc:
                if exc.status == 409:
                    continue  # created before an agent restart: idempotent
                self._report(key, Phase.FAILED, reason=f"creating pod: {api_reason(exc)}")
                await self._delete_pods(key)
                return

    async def cancel(self, task_id: str, generation: int, reason: str = "",
                     grace_seconds: int = 0) -> None:
        """Delete the pods of every live copy with this generation or older (with
        ``grace_seconds`` as their termination grace period when given)."""
        for key in sorted(self._all_keys()):
            status = self._reported.get(key)
            live = status is None or not status.phase.terminal
            if key[0] != task_id or key[1] > generation or not live:
                continue
            self._cancelling[key] = reason or "cancelled by the hub"
            if not self._copy_pods.get(key):
                self._finish_cancel(key)
            await self._delete_pods(key, grace_seconds)
            await self._member.delete_pod_group(*key)

    # --- cache updates (event loop thread) ----------------------------------------------

    def _apply(self, kind: str, event_type: str, obj: Any) -> None:
        try:
            if kind == "nodes":
                self._apply_node(event_type, obj)
            else:
                self._apply_pod(event_type, obj)
        except Exception:
            log.exception("applying %s %s event failed", kind, event_type)

    def _apply_node(self, event_type: str, node: Any) -> None:
        name = node.metadata.name
        if event_type == "DELETED":
            self._gone_nodes.add(name)
            self._nodes.pop(name, None)
            if self._views.pop(name, None) is not None:
                self._sink(NodesChanged(removed=(name,)))
            return
        self._gone_nodes.discard(name)
        self._nodes[name] = node
        self._refresh_nodes({name})

    def _apply_pod(self, event_type: str, pod: Any) -> None:
        pod_key = f"{pod.metadata.namespace}/{pod.metadata.name}"
        old = self._pods.pop(pod_key, None)
        touched = {_node_of(old), _node_of(pod)} - {""}
        for node in touched:
            self._pods_on.get(node, set()).discard(pod_key)
        copy = _copy_key(pod, self.namespace)
        if copy is not None:
            self._copy_pods.setdefault(copy, set()).discard(pod_key)
        if event_type != "DELETED":
            self._index(pod)
        elif copy is not None:
            self._last_pod[copy] = pod
        self._refresh_nodes(touched)
        if copy is not None:
            self._refresh_copy(copy)

    def _relist_nodes(self, nodes: list[Any]) -> None:
        names = {n.metadata.name for n in nodes}
        gone = tuple(sorted(set(self._views) - names))
        for name in gone:
            self._views.pop(name)
        self._nodes = {n.metadata.name: n for n in nodes}
        if gone:
            self._sink(NodesChanged(removed=gone))
        self._refresh_nodes(names)

    def _relist_pods(self, pods: list[Any]) -> None:
        touched = set(self._pods_on)
        copies = set(self._copy_pods)
        self._pods, self._pods_on, self._copy_pods = {}, {}, {}
        for pod in pods:
            self._index(pod)
        touched |= set(self._pods_on)
        self._refresh_nodes(touched & set(self._nodes))
        for copy in sorted(copies | set(self._copy_pods)):
            self._refresh_copy(copy)

    def _index(self, pod: Any) -> None:
        pod_key = f"{pod.metadata.namespace}/{pod.metadata.name}"
        self._pods[pod_key] = pod
        if _node_of(pod):
            self._pods_on.setdefault(_node_of(pod), set()).add(pod_key)
        copy = _copy_key(pod, self.namespace)
        if copy is not None:
            self._copy_pods.setdefault(copy, set()).add(pod_key)

    def _refresh_nodes(self, names: set[str]) -> None:
        """Recompute the nodes' views; emit the ones that changed, in one delta."""
        changed = []
        for name in sorted(names):
            node = self._nodes.get(name)
            if node is None:
                continue
            pods = [self._pods[k] for k in self._pods_on.get(name, ())]
            view = node_info(node, pods, self.options.gpu_cores_resource)
            if self._views.get(name) != view:
                self._views[name] = view
                changed.append(view)
                if self._label_nodes:
                    self._maybe_label(node, view)
        if changed:
            self._sink(NodesChanged(upserted=tuple(changed)))

    def _refresh_copy(self, key: CopyKey) -> None:
        pods = [self._pods[k] for k in sorted(self._copy_pods.get(key, ()))]
        previous = self._reported.get(key)
        if not pods:
            self._copy_pods.pop(key, None)
            last = self._last_pod.pop(key, None)
            self._gang_deadline.pop(key, None)
            if key in self._rolling_back:
                self._report(key, Phase.UNSCHEDULABLE, reason=self._rolling_back.pop(key))
            elif key in self._cancelling:
                self._finish_cancel(key)
            elif previous is not None and not previous.phase.terminal:
                self._vanished(key, previous, last)
            return
        if key in self._cancelling or key in self._rolling_back or (
                previous is not None and previous.phase.terminal):
            return  # our own deletion in progress, or already decided
        replicas = int(pods[0].metadata.labels.get(REPLICAS_LABEL, "1"))
        phase, node, reason = copy_phase(pods, replicas)
        if replicas > 1 and self.options.gang == "agent":
            if phase in (Phase.ACCEPTED, Phase.UNSCHEDULABLE):
                self._gang_deadline.setdefault(key, time.monotonic() + self.options.gang_timeout)
            else:
                self._gang_deadline.pop(key, None)
        if previous is not None and (previous.phase, previous.node) == (phase, node) and (
                phase is not Phase.UNSCHEDULABLE or previous.reason == reason):
            return   # the scheduler's latest message is news; other repeats are not
        if phase is Phase.RUNNING and (previous is None or previous.phase is not Phase.BOUND):
            self._report(key, Phase.BOUND, node=node)
        self._report(key, phase, node=node, reason=reason)

    def _vanished(self, key: CopyKey, previous: TaskStatus, last: Any) -> None:
        """A live copy's pods are gone and the agent did not delete them: say so, once."""
        if last is None:
            reason = "the copy's pods are gone (deleted while the agent was not watching)"
        else:
            node = _node_of(last)
            gone = bool(node) and (node in self._gone_nodes or node not in self._nodes)
            reason = reasons.deleted(last, node_gone=gone)
        self._report(key, Phase.FAILED, node=previous.node, reason=reason)

    def _finish_cancel(self, key: CopyKey) -> None:
        reason = self._cancelling.pop(key)
        previous = self._reported.get(key)
        if previous is None or not previous.phase.terminal:
            self._report(key, Phase.CANCELLED, node=previous.node if previous else "",
                         reason=reason)

    def _report(self, key: CopyKey, phase: Phase, *, node: str = "", reason: str = "") -> None:
        status = TaskStatus(key[0], key[1], phase, node, reason, now_ms())
        self._reported[key] = status
        if phase.terminal:
            self._finished_at[key] = time.monotonic()
        self._sink(TaskChanged(status))

    def _all_keys(self) -> set[CopyKey]:
        return set(self._reported) | set(self._copy_pods)

    def _node_values(self) -> dict[str, set[str]]:
        values: dict[str, set[str]] = {}
        for view in self._views.values():
            for key, value in view.labels.items():
                values.setdefault(key, set()).add(value)
        return values

    # --- finished pods ------------------------------------------------------------------

    async def _sweep_loop(self) -> None:
        """Roll back gangs past their timeout; delete finished copies' pods after the TTL."""
        period = max(0.05, min(1.0, self._finished_pod_ttl / 4, self.options.gang_timeout / 4))
        while True:
            await asyncio.sleep(period)
            try:
                await self.roll_back_gangs()
                await self.sweep_finished()
            except Exception:
                log.exception("sweeping gangs and finished pods failed")

    async def roll_back_gangs(self) -> None:
        """All or nothing: a gang not wholly bound by its deadline loses every replica and
        is reported Unschedulable with the scheduler's messages, so the hub spills over."""
        now = time.monotonic()
        for key in sorted(k for k, at in self._gang_deadline.items() if at <= now):
            del self._gang_deadline[key]
            pods = [self._pods[k] for k in sorted(self._copy_pods.get(key, ()))]
            if not pods or key in self._cancelling:
                continue
            replicas = int(pods[0].metadata.labels.get(REPLICAS_LABEL, "1"))
            bound = sum(1 for p in pods if _node_of(p))
            messages = sorted({c.message for p in pods for c in (
                (p.status.conditions or []) if p.status else [])
                if c.type == "PodScheduled" and c.status == "False" and c.message})
            why = "; ".join(messages) or "no scheduler message"
            self._rolling_back[key] = (
                f"gang of {replicas}: {bound} of {replicas} replicas bound within "
                f"{self.options.gang_timeout:g}s, all rolled back: {why}")
            await self._delete_pods(key)

    async def sweep_finished(self) -> None:
        """Delete the pods of copies that finished more than ``finished_pod_ttl`` ago.

        Kept that long for ``kubectl logs``; the copy's final status stays reported.
        """
        cutoff = time.monotonic() - self._finished_pod_ttl
        for key in sorted(k for k, at in self._finished_at.items() if at <= cutoff):
            if self._copy_pods.get(key):
                await self._delete_pods(key)
                await self._member.delete_pod_group(*key)

    # --- API calls ----------------------------------------------------------------------

    async def _delete_pods(self, key: CopyKey, grace_seconds: int = 0) -> None:
        body = client.V1DeleteOptions(
            propagation_policy="Background",
            grace_period_seconds=grace_seconds if grace_seconds > 0 else None)
        for pod_key in sorted(self._copy_pods.get(key, set())):
            namespace, name = pod_key.split("/", 1)
            try:
                # Options in the body: a real API server takes the grace period from there.
                await asyncio.to_thread(self._core.delete_namespaced_pod, name, namespace,
                                        body=body)
            except ApiException as exc:
                if exc.status != 404:
                    log.warning("deleting pod %s failed: %s", pod_key, api_reason(exc))

    def _maybe_label(self, node: Any, view: NodeInfo) -> None:
        """Patch the derived ``fuyao.io/*`` labels onto the node if they differ."""
        admin = {k for k in raw_labels(node) if k.startswith(PREFIX)}
        derived = {k: v for k, v in view.labels.items() if k.startswith(PREFIX) and k not in admin}
        current = dict(node.metadata.labels or {})
        written = set(filter(None, (node.metadata.annotations or {}).get(DERIVED_ANNOTATION, "")
                             .split(",")))
        patch_labels: dict[str, str | None] = {
            k: v for k, v in derived.items() if current.get(k) != v
        }
        patch_labels.update({k: None for k in written - set(derived) - admin if k in current})
        if not patch_labels and written == set(derived):
            return
        body = {"metadata": {"labels": patch_labels,
                             "annotations": {DERIVED_ANNOTATION: ",".join(sorted(derived))}}}
        name = node.metadata.name
        if self._patching.get(name) == body:
            return  # the same patch is on its way
        self._patching[name] = body
        assert self._loop is not None
        self._loop.create_task(self._patch_node(name, body))

    async def _patch_node(self, name: str, body: dict[str, Any]) -> None:
        try:
            await asyncio.to_thread(self._core.patch_node, name, body)
        except ApiException as exc:
            log.warning("labelling node %s failed (%s); not labelling nodes any more",
                        name, api_reason(exc))
            self._label_nodes = False
        finally:
            if self._patching.get(name) is body:
                del self._patching[name]

    # --- watch threads ----------------------------------------------------------------

    def _list_fn(self, kind: str) -> Callable[..., Any]:
        return (self._core.list_node if kind == "nodes"
                else self._core.list_pod_for_all_namespaces)

    def _list(self, kind: str) -> tuple[list[Any], str]:
        result = self._list_fn(kind)()
        return list(result.items), result.metadata.resource_version

    def _post(self, kind: str, event_type: str, obj: Any) -> None:
        assert self._loop is not None
        if self._stopping.is_set() or self._loop.is_closed():
            return
        if event_type == "RELIST":
            relist = self._relist_nodes if kind == "nodes" else self._relist_pods
            self._loop.call_soon_threadsafe(relist, obj)
        elif event_type in ("ADDED", "MODIFIED", "DELETED"):
            self._loop.call_soon_threadsafe(self._apply, kind, event_type, obj)

    def _watch_loop(self, kind: str, resource_version: str) -> None:
        rv: str | None = resource_version
        while not self._stopping.is_set():
            try:
                if rv is None:
                    items, rv = self._list(kind)
                    self._post(kind, "RELIST", items)
                w = watch.Watch()  # type: ignore[no-untyped-call]
                self._watches.append(w)
                try:
                    events = w.stream(  # type: ignore[no-untyped-call]
                        self._list_fn(kind),
                        resource_version=rv,
                        timeout_seconds=self._watch_timeout,
                        allow_watch_bookmarks=True,
                    )
                    for event in events:
                        if self._stopping.is_set():
                            return
                        self._post(kind, event["type"], event["object"])
                finally:
                    self._watches.remove(w)
                rv = w.resource_version or rv
            except ApiException as exc:
                if self._stopping.is_set():
                    return
                log.warning("watching %s: %s; listing again", kind, api_reason(exc))
                rv = None
                if exc.status != 410:
                    self._stopping.wait(self._retry_seconds)
            except Exception as exc:
                if self._stopping.is_set():
                    return
                log.warning("watching %s failed: %s; listing again", kind, exc)
                rv = None
                self._stopping.wait(self._retry_seconds)


def _node_of(pod: Any) -> str:
    return str(pod.spec.node_name or "") if pod is not None and pod.spec else ""


def _copy_key(pod: Any, namespace: str) -> CopyKey | None:
    """(task id, generation) of a pod this agent created, else None."""
    meta = pod.metadata
    labels = meta.labels or {}
    if meta.namespace != namespace or labels.get(MANAGED_BY_LABEL) != MANAGED_BY:
        return None
    task_id = (meta.annotations or {}).get(TASK_ID_ANNOTATION)
    generation = labels.get(GENERATION_LABEL, "")
    if not task_id or not generation.isdigit():
        return None
    return task_id, int(generation)
