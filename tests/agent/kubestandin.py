"""A stand-in for the few Kubernetes API endpoints the kube backend calls, on 127.0.0.1.

No API server can run on the test machine, so this serves real-shaped JSON over real HTTP
for the real ``kubernetes`` client: list and watch (chunked, resourceVersion-ordered) of
nodes and pods, create/delete of pods, merge-patch of nodes. The test plays kube-scheduler
and kubelet with ``bind`` / ``set_phase`` / ``unschedulable``, which emit MODIFIED events
like the real control plane would. Not a Kubernetes: no validation, admission or GC.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

NOW = "2025-01-01T00:00:00Z"


class KubeStandIn:
    """Cluster state plus an HTTP server answering the API calls the agent makes."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.events: list[tuple[int, str, str, dict[str, Any]]] = []
        self.requests: list[tuple[str, str]] = []
        self.rv = 100
        self.cond = threading.Condition(threading.RLock())
        self.closed = False
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> KubeStandIn:
        self.thread.start()
        return self

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        self.server.shutdown()
        self.server.server_close()

    # --- what the control plane would do ------------------------------------------------

    def _record(self, kind: str, event_type: str, obj: dict[str, Any]) -> None:
        with self.cond:
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self.events.append((self.rv, kind, event_type, copy.deepcopy(obj)))
            self.cond.notify_all()

    def add_node(self, name: str, labels: dict[str, str], allocatable: dict[str, str],
                 *, ready: bool = True, unschedulable: bool = False) -> None:
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": str(uuid.uuid4()), "labels": dict(labels),
                         "annotations": {}, "creationTimestamp": NOW},
            "spec": {"unschedulable": unschedulable},
            "status": {
                "allocatable": dict(allocatable), "capacity": dict(allocatable),
                "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                "reason": "KubeletReady", "message": "kubelet is ready",
                                "lastHeartbeatTime": NOW, "lastTransitionTime": NOW}],
            },
        }
        self.nodes[name] = node
        self._record("nodes", "ADDED", node)

    def remove_node(self, name: str) -> None:
        self._record("nodes", "DELETED", self.nodes.pop(name))

    def add_pod(self, namespace: str, name: str, node: str, requests: dict[str, str],
                phase: str = "Running") -> None:
        """A pod someone else runs (it uses node capacity too)."""
        pod = _pod(namespace, name, {"containers": [
            {"name": "app", "image": "nginx", "resources": {"requests": requests}}]})
        pod["spec"]["nodeName"] = node
        pod["status"]["phase"] = phase
        self.pods[(namespace, name)] = pod
        self._record("pods", "ADDED", pod)

    def bind(self, namespace: str, name: str, node: str) -> None:
        pod = self.pods[(namespace, name)]
        pod["spec"]["nodeName"] = node
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
        self._record("pods", "MODIFIED", pod)

    def unschedulable(self, namespace: str, name: str, message: str) -> None:
        pod = self.pods[(namespace, name)]
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "reason": "Unschedulable", "message": message}]
        self._record("pods", "MODIFIED", pod)

    def set_phase(self, namespace: str, name: str, phase: str, exit_code: int = 0) -> None:
        pod = self.pods[(namespace, name)]
        pod["status"]["phase"] = phase
        if phase in ("Succeeded", "Failed"):
            pod["status"]["containerStatuses"] = [{
                "name": "task", "image": "busybox", "imageID": "", "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": exit_code, "reason": "Error" if exit_code
                                         else "Completed", "message": "boom" if exit_code
                                         else ""}},
            }]
        self._record("pods", "MODIFIED", pod)

    def delete_pod(self, ns: str, name: str, *, grace: int | None = None,
                   disruption: tuple[str, str] | None = None) -> dict[str, Any]:
        """Delete as the API server does: at once when unbound or with grace 0 (a force
        delete), else mark it (``deletionTimestamp``) and let the kubelet stop it (exit 137,
        phase Failed) before it goes. ``disruption`` = (reason, message) of the
        ``DisruptionTarget`` condition the control plane sets when it deletes a pod itself."""
        pod = self.pods[(ns, name)]
        if disruption is not None:
            pod["status"].setdefault("conditions", []).append(
                {"type": "DisruptionTarget", "status": "True", "reason": disruption[0],
                 "message": disruption[1]})
        if grace == 0 or not pod["spec"].get("nodeName"):
            del self.pods[(ns, name)]
            self._record("pods", "DELETED", pod)
            return copy.deepcopy(pod)
        pod["metadata"]["deletionTimestamp"] = NOW
        pod["metadata"]["deletionGracePeriodSeconds"] = 30 if grace is None else grace
        self._record("pods", "MODIFIED", pod)
        threading.Timer(0.05, self._kubelet_stops, args=(ns, name)).start()
        return copy.deepcopy(pod)

    def _kubelet_stops(self, ns: str, name: str) -> None:
        with self.cond:
            pod = self.pods.get((ns, name))
            if pod is None:
                return
            if pod["status"].get("phase") not in ("Succeeded", "Failed"):
                self.set_phase(ns, name, "Failed", exit_code=137)
            del self.pods[(ns, name)]
            self._record("pods", "DELETED", pod)

    def pod_names(self, namespace: str = "fuyao-tasks") -> list[str]:
        return sorted(name for ns, name in self.pods if ns == namespace)

    # --- HTTP ---------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        self.requests.append((method, path))
        parts = [p for p in path.split("/") if p]
        if parts[:2] != ["api", "v1"]:
            return 404, _status(404, "NotFound", f"no route {path}")
        rest = parts[2:]
        if method == "GET" and rest in (["nodes"], ["pods"]):
            items = self.nodes.values() if rest == ["nodes"] else self.pods.values()
            kind = "NodeList" if rest == ["nodes"] else "PodList"
            return 200, {"apiVersion": "v1", "kind": kind,
                         "metadata": {"resourceVersion": str(self.rv)},
                         "items": [copy.deepcopy(i) for i in items]}
        if method == "PATCH" and len(rest) == 2 and rest[0] == "nodes":
            node = self.nodes.get(rest[1])
            if node is None:
                return 404, _status(404, "NotFound", f'nodes "{rest[1]}" not found')
            for field in ("labels", "annotations"):
                for key, value in body.get("metadata", {}).get(field, {}).items():
                    if value is None:
                        node["metadata"][field].pop(key, None)
                    else:
                        node["metadata"][field][key] = value
            self._record("nodes", "MODIFIED", node)
            return 200, copy.deepcopy(node)
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] == "pods":
            return self._pods_call(method, rest[1], rest[3] if len(rest) > 3 else None, body)
        return 404, _status(404, "NotFound", f"no route {method} {path}")

    def _pods_call(self, method: str, ns: str, name: str | None, body: Any) -> tuple[int, Any]:
        if method == "POST" and name is None:
            pod_name = body["metadata"]["name"]
            if (ns, pod_name) in self.pods:
                return 409, _status(409, "AlreadyExists", f'pods "{pod_name}" already exists')
            pod = _pod(ns, pod_name, body["spec"], body["metadata"])
            self.pods[(ns, pod_name)] = pod
            self._record("pods", "ADDED", pod)
            return 201, copy.deepcopy(pod)
        if method == "DELETE" and name is not None:
            if (ns, name) not in self.pods:
                return 404, _status(404, "NotFound", f'pods "{name}" not found')
            grace = (body or {}).get("gracePeriodSeconds")
            return 200, self.delete_pod(ns, name, grace=grace)
        return 405, _status(405, "MethodNotAllowed", f"{method} not served")

    def watch_events(self, kind: str, since: int, timeout: float) -> Any:
        """Yield events of ``kind`` newer than ``since`` until timeout or close."""
        deadline = time.monotonic() + timeout
        while True:
            with self.cond:
                fresh = [e for e in self.events if e[0] > since and e[1] == kind]
                if not fresh:
                    left = deadline - time.monotonic()
                    if left <= 0 or self.closed:
                        return
                    self.cond.wait(min(left, 0.2))
                    continue
            for rv, _, event_type, obj in fresh:
                since = rv
                yield {"type": event_type, "object": obj}


def _pod(ns: str, name: str, spec: dict[str, Any],
         metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = copy.deepcopy(metadata or {})
    meta.update({"name": name, "namespace": ns, "uid": str(uuid.uuid4()),
                 "creationTimestamp": NOW})
    meta.setdefault("labels", {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(spec),
            "status": {"phase": "Pending"}}


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Status", "status": "Failure", "message": message,
            "reason": reason, "code": code}


def _handler(standin: KubeStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self, method: str) -> None:
            url = urlparse(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            if method == "GET" and query.get("watch", "").lower() in ("true", "1"):
                self._watch(url.path, query)
                return
            code, payload = standin.handle(method, url.path, query, body)
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _watch(self, path: str, query: dict[str, str]) -> None:
            standin.requests.append(("WATCH", path))
            kind = path.rstrip("/").rsplit("/", 1)[-1]
            since = int(query.get("resourceVersion") or 0)
            timeout = float(query.get("timeoutSeconds") or 30)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for event in standin.watch_events(kind, since, timeout):
                    line = (json.dumps(event) + "\n").encode()
                    self.wfile.write(f"{len(line):X}\r\n".encode() + line + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

    return Handler
