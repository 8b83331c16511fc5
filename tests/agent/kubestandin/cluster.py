"""The stand-in's cluster state and control plane: what v1.36 does that a fake easily misses.

``KubeStandIn`` (``server.py``) answers HTTP with this state. A control loop thread plays
the controllers: the ServiceAccount controller (a namespace's ``default`` account appears a
moment after the namespace), the node lifecycle controller (``node.kubernetes.io/not-ready``
taint until the node is Ready, ``node.kubernetes.io/unschedulable`` while cordoned), the
scheduler (``scheduler.py``; only with ``run_scheduler``) and the kubelet (a bound pod
starts; a pod deleted with a grace period is stopped, exit 137, then removed). Tests can
still play scheduler and kubelet by hand (``bind``, ``unschedulable``, ``set_phase``).
Every change is an event with a resourceVersion; ``compact`` drops old events, after which
a watch from before them gets ``410 Gone``.
"""

from __future__ import annotations

import copy
import threading
import time
import uuid
from typing import Any

from tests.agent.kubestandin import scheduler
from tests.agent.kubestandin.admission import Refused, admit_pod

NOW = "2025-01-01T00:00:00Z"
NOT_READY = "node.kubernetes.io/not-ready"
CORDONED = "node.kubernetes.io/unschedulable"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
Key = tuple[str, str]


class Cluster:
    """Objects, the event log and the control loop."""

    def __init__(self, *, run_scheduler: bool = False, account_delay: float = 0.1,
                 kubelet_delay: float = 0.05) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[Key, dict[str, Any]] = {}
        self.namespaces: dict[str, dict[str, Any]] = {}
        self.accounts: dict[Key, dict[str, Any]] = {}
        self.classes: dict[str, dict[str, Any]] = {}
        self.podgroups: dict[Key, dict[str, Any]] = {}   # coscheduling PodGroups
        self.events: list[tuple[int, str, str, dict[str, Any]]] = []
        self.rv = 100
        self.compacted = 0
        self.cond = threading.Condition(threading.RLock())
        self.closed = False
        self.run_scheduler = run_scheduler
        self.scheduler_names = {"default-scheduler"}
        self.account_delay = account_delay
        self.kubelet_delay = kubelet_delay
        self._pending_accounts: dict[str, float] = {}
        self._deleting: dict[Key, float] = {}
        self._loop = threading.Thread(target=self._control_loop, name="standin-control",
                                      daemon=True)

    # --- events -----------------------------------------------------------------------

    def record(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        """Stamp a new resourceVersion on the object and log the event."""
        with self.cond:
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self.events.append((self.rv, kind, event_type, copy.deepcopy(obj)))
            self.cond.notify_all()

    def compact(self) -> None:
        """Forget every event so far, as etcd compaction does: older watches get 410."""
        with self.cond:
            self.compacted = self.rv
            self.events.clear()

    # --- nodes (what kubelets and admins do) ------------------------------------------

    def add_node(self, name: str, labels: dict[str, str], allocatable: dict[str, str],
                 *, ready: bool = True, unschedulable: bool = False,
                 taints: list[dict[str, str]] | None = None) -> None:
        """A kubelet registers its node: admission taints it not-ready until Ready."""
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": str(uuid.uuid4()), "labels": dict(labels),
                         "annotations": {}, "creationTimestamp": NOW},
            "spec": {"unschedulable": unschedulable,
                     "taints": [{"key": NOT_READY, "effect": "NoSchedule"}, *(taints or [])]},
            "status": {
                "allocatable": dict(allocatable), "capacity": dict(allocatable),
                "conditions": [_ready(ready)],
            },
        }
        with self.cond:
            self.nodes[name] = node
            self.record("nodes", "ADDED", node)

    def set_ready(self, name: str, ready: bool) -> None:
        with self.cond:
            node = self.nodes[name]
            node["status"]["conditions"] = [_ready(ready)]
            self.record("nodes", "MODIFIED", node)

    def cordon(self, name: str, cordoned: bool = True) -> None:
        """``kubectl cordon``: spec.unschedulable (the controller adds the taint)."""
        with self.cond:
            node = self.nodes[name]
            node["spec"]["unschedulable"] = cordoned
            self.record("nodes", "MODIFIED", node)

    def remove_node(self, name: str) -> None:
        with self.cond:
            self.record("nodes", "DELETED", self.nodes.pop(name))

    # --- namespaces, pods ---------------------------------------------------------------

    def create_namespace(self, name: str) -> dict[str, Any]:
        with self.cond:
            if name in self.namespaces:
                raise Refused(409, "AlreadyExists", f'namespaces "{name}" already exists')
            ns = {"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": name, "uid": str(uuid.uuid4()), "labels": {
                      "kubernetes.io/metadata.name": name}, "creationTimestamp": NOW},
                  "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
            self.namespaces[name] = ns
            self.record("namespaces", "ADDED", ns)
            self._pending_accounts[name] = time.monotonic() + self.account_delay
            return copy.deepcopy(ns)

    def create_pod(self, ns: str, body: dict[str, Any], *, dry_run: bool = False
                   ) -> dict[str, Any]:
        with self.cond:
            pod = admit_pod(body, ns, namespaces=self.namespaces, accounts=self.accounts,
                            classes=self.classes)
            name = pod["metadata"]["name"]
            if (ns, name) in self.pods:
                raise Refused(409, "AlreadyExists", f'pods "{name}" already exists')
            pod["metadata"].update({"uid": str(uuid.uuid4()), "creationTimestamp": NOW})
            if not dry_run:
                self.pods[(ns, name)] = pod
                self.record("pods", "ADDED", pod)
            return copy.deepcopy(pod)

    def add_pod(self, namespace: str, name: str, node: str, requests: dict[str, str],
                phase: str = "Running") -> None:
        """A pod someone else runs (it uses node capacity too); its namespace just exists."""
        with self.cond:
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4()),
                                "labels": {}, "creationTimestamp": NOW},
                   "spec": {"nodeName": node, "containers": [
                       {"name": "app", "image": "nginx", "resources": {"requests": requests}}]},
                   "status": {"phase": phase}}
            self.pods[(namespace, name)] = pod
            self.record("pods", "ADDED", pod)

    def bind(self, namespace: str, name: str, node: str) -> None:
        """What the scheduler's binding does: spec.nodeName, then PodScheduled=True."""
        with self.cond:
            pod = self.pods[(namespace, name)]
            pod["spec"]["nodeName"] = node          # the Binding subresource
            self.record("pods", "MODIFIED", pod)
            pod["status"]["conditions"] = [c for c in pod["status"].get("conditions") or []
                                           if c["type"] != "PodScheduled"] + [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": NOW}]
            self.record("pods", "MODIFIED", pod)    # then the status update

    def unschedulable(self, namespace: str, name: str, message: str) -> None:
        with self.cond:
            pod = self.pods[(namespace, name)]
            pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                            "reason": "Unschedulable", "message": message,
                                            "lastTransitionTime": NOW}]
            self.record("pods", "MODIFIED", pod)

    def set_phase(self, namespace: str, name: str, phase: str, exit_code: int = 0,
                  reason: str = "") -> None:
        """What the kubelet reports: the phase, and a terminated container when done."""
        with self.cond:
            pod = self.pods[(namespace, name)]
            pod["status"]["phase"] = phase
            state: dict[str, Any] = {"running": {"startedAt": NOW}}
            if phase in ("Succeeded", "Failed"):
                state = {"terminated": {
                    "exitCode": exit_code,
                    "reason": reason or ("Error" if exit_code else "Completed"),
                    "message": "boom" if exit_code and not reason else ""}}
            pod["status"]["containerStatuses"] = [
                {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready":
                 phase == "Running", "restartCount": 0, "state": state}
                for c in pod["spec"]["containers"]]
            self.record("pods", "MODIFIED", pod)

    def delete_pod(self, ns: str, name: str, *, grace: int | None = None,
                   disruption: tuple[str, str] | None = None) -> dict[str, Any]:
        """Delete as the API server does: at once when unbound or with grace 0 (a force
        delete), else mark it (``deletionTimestamp``) and let the kubelet stop it (exit 137,
        phase Failed) before it goes. ``disruption`` = (reason, message) of the
        ``DisruptionTarget`` condition the control plane sets when it deletes a pod itself."""
        with self.cond:
            pod = self.pods.get((ns, name))
            if pod is None:
                raise Refused(404, "NotFound", f'pods "{name}" not found')
            if disruption is not None:
                pod["status"].setdefault("conditions", []).append(
                    {"type": "DisruptionTarget", "status": "True", "reason": disruption[0],
                     "message": disruption[1], "lastTransitionTime": NOW})
            if grace == 0 or not pod["spec"].get("nodeName"):
                del self.pods[(ns, name)]
                self._deleting.pop((ns, name), None)
                self.record("pods", "DELETED", pod)
                return copy.deepcopy(pod)
            if pod["metadata"].get("deletionTimestamp") is None:
                pod["metadata"]["deletionTimestamp"] = NOW
                default = pod["spec"].get("terminationGracePeriodSeconds", 30)
                pod["metadata"]["deletionGracePeriodSeconds"] = (
                    default if grace is None else grace)
                self._deleting[(ns, name)] = time.monotonic() + self.kubelet_delay
                self.record("pods", "MODIFIED", pod)
            return copy.deepcopy(pod)

    # --- the control loop -----------------------------------------------------------------

    def start(self) -> None:
        self._loop.start()

    def _control_loop(self) -> None:
        while True:
            with self.cond:
                if self.closed:
                    return
                self._accounts()
                self._node_taints()
                self._kubelet()
                if self.run_scheduler:
                    self._schedule()
                self.cond.wait(0.03)

    def _accounts(self) -> None:
        now = time.monotonic()
        for ns, due in list(self._pending_accounts.items()):
            if due <= now:
                del self._pending_accounts[ns]
                account = {"apiVersion": "v1", "kind": "ServiceAccount",
                           "metadata": {"name": "default", "namespace": ns,
                                        "uid": str(uuid.uuid4()), "creationTimestamp": NOW}}
                self.accounts[(ns, "default")] = account
                self.record("serviceaccounts", "ADDED", account)

    def _node_taints(self) -> None:
        for node in self.nodes.values():
            taints = node["spec"].get("taints") or []
            wanted = [t for t in taints if t["key"] not in (NOT_READY, CORDONED)]
            if not _is_ready(node):
                wanted.insert(0, {"key": NOT_READY, "effect": "NoSchedule"})
            if node["spec"].get("unschedulable"):
                wanted.append({"key": CORDONED, "effect": "NoSchedule", "timeAdded": NOW})
            if wanted != taints:
                node["spec"]["taints"] = wanted
                self.record("nodes", "MODIFIED", node)

    def _kubelet(self) -> None:
        now = time.monotonic()
        for key, due in list(self._deleting.items()):
            pod = self.pods.get(key)
            if pod is None:
                del self._deleting[key]
            elif due <= now:
                if pod["status"].get("phase") not in ("Succeeded", "Failed"):
                    self.set_phase(*key, "Failed", exit_code=137)
                self.delete_pod(*key, grace=0)
        if not self.run_scheduler:
            return
        for key, pod in list(self.pods.items()):
            if (pod["spec"].get("nodeName") and pod["status"].get("phase") == "Pending"
                    and "deletionTimestamp" not in pod["metadata"]):
                self.set_phase(*key, "Running")

    def _schedule(self) -> None:
        bound: dict[str, list[dict[str, Any]]] = {}
        for pod in self.pods.values():
            if scheduler.holds(pod):
                bound.setdefault(pod["spec"]["nodeName"], []).append(pod)
        pending = sorted(
            (p for p in self.pods.values() if not p["spec"].get("nodeName")
             and p["spec"].get("schedulerName") in self.scheduler_names
             and "deletionTimestamp" not in p["metadata"]),
            key=lambda p: (-p["spec"].get("priority", 0), int(p["metadata"]["resourceVersion"])))
        gangs: dict[Key, list[dict[str, Any]]] = {}
        for pod in pending:
            group = (pod["metadata"].get("labels") or {}).get(GROUP_LABEL)
            key = (pod["metadata"]["namespace"], group or "")
            if group and key in self.podgroups:
                gangs.setdefault(key, []).append(pod)
                continue
            node, message = scheduler.choose(pod, list(self.nodes.values()), bound)
            self._place(pod, node, message, bound)
        for key, pods in gangs.items():
            self._place_gang(pods, self.podgroups[key]["spec"].get("minMember", 1), bound)

    def _place(self, pod: dict[str, Any], node: str | None, message: str,
               bound: dict[str, list[dict[str, Any]]]) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        if node is not None:
            self.bind(ns, name, node)
            bound.setdefault(node, []).append(pod)
            return
        current = next((c for c in pod["status"].get("conditions") or []
                        if c["type"] == "PodScheduled"), None)
        if current is None or current.get("message") != message:
            self.unschedulable(ns, name, message)

    def _place_gang(self, pods: list[dict[str, Any]], min_member: int,
                    bound: dict[str, list[dict[str, Any]]]) -> None:
        """Coscheduling: bind the group's pods only if ``minMember`` of them fit at once."""
        if len(pods) < min_member:   # coscheduling's PreFilter waits for the siblings
            for pod in pods:
                self._place(pod, None, f"pre-filter pod {pod['metadata']['name']} cannot find "
                            f"enough sibling pods, current pods number: {len(pods)}, "
                            f"minMember of group: {min_member}", bound)
            return
        trial = {node: list(held) for node, held in bound.items()}
        chosen: list[tuple[dict[str, Any], str]] = []
        message = ""
        for pod in pods:
            node, why = scheduler.choose(pod, list(self.nodes.values()), trial)
            if node is None:
                message = message or why
                continue
            chosen.append((pod, node))
            trial.setdefault(node, []).append(pod)
        if len(chosen) >= min_member:
            for pod, node in chosen:
                self._place(pod, node, "", bound)
            return
        for pod in pods:
            self._place(pod, None, f"pod group needs {min_member} pods bound together, "
                        f"{len(chosen)} fit: {message}", bound)


def _ready(ready: bool) -> dict[str, str]:
    return {"type": "Ready", "status": "True" if ready else "False",
            "reason": "KubeletReady" if ready else "KubeletNotReady",
            "message": "kubelet is posting ready status" if ready else "container runtime down",
            "lastHeartbeatTime": NOW, "lastTransitionTime": NOW}


def _is_ready(node: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in node["status"].get("conditions") or [])
