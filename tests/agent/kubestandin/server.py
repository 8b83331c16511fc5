"""The stand-in's HTTP face: the Kubernetes API paths the agent and the hub call, on 127.0.0.1.

Real HTTP (or HTTPS with a CA of the test's own) for the real ``kubernetes`` client, with
real-shaped JSON and the API server's behaviour where a client can tell: bearer-token
authentication (401), RBAC refusals with the API server's wording (403, per verb and
resource, and ``SelfSubjectAccessReview`` answering the same), list and chunked watch with
``resourceVersion`` (``410 Gone`` as an ``ERROR`` event after ``compact``, ``BOOKMARK``
events only with ``allowWatchBookmarks=true``), pod create with admission (``admission.py``),
ServiceAccounts, Roles, RoleBindings and Deployments (``objects.py``: what the hub installs
in a push member), server-side apply (``application/apply-patch+yaml``, ``fieldManager``
required) and
``dryRun=All`` validating against the v1.36 schema, and pod delete taking the grace period
from the ``DeleteOptions`` body when there is one. State and controllers: ``cluster.py``.
"""

from __future__ import annotations

import copy
import json
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import yaml

from tests.agent.kubestandin.admission import Refused, validate_schema
from tests.agent.kubestandin.cluster import Cluster
from tests.agent.kubestandin.leases import Leases
from tests.agent.kubestandin.objects import RESOURCES as OBJECTS
from tests.agent.kubestandin.objects import Objects

USER = "system:serviceaccount:fuyao-system:fuyao-agent"
_KINDS = {"nodes": "Node", "pods": "Pod", "namespaces": "Namespace",
          "priorityclasses": "PriorityClass", **{r: k for r, (k, _, _) in OBJECTS.items()}}
_GROUPS = {"priorityclasses": "scheduling.k8s.io", "roles": "rbac.authorization.k8s.io",
           "rolebindings": "rbac.authorization.k8s.io", "deployments": "apps"}


class KubeStandIn(Cluster):
    """Cluster state plus an HTTP server answering the API calls the agent makes."""

    def __init__(self, *, run_scheduler: bool = False, token: str | None = None,
                 tls: tuple[str, str] | None = None, bookmark_interval: float = 0.5,
                 namespaces: tuple[str, ...] = ("default", "kube-system")) -> None:
        super().__init__(run_scheduler=run_scheduler)
        self.token = token
        self.denied: set[tuple[str, str]] = set()   # (verb, resource) RBAC forbids
        self.requests: list[tuple[str, str]] = []
        self.leases = Leases()
        self.roles: dict[tuple[str, str], dict[str, Any]] = {}
        self.rolebindings: dict[tuple[str, str], dict[str, Any]] = {}
        self.deployments: dict[tuple[str, str], dict[str, Any]] = {}
        self.objects = Objects({"serviceaccounts": self.accounts, "roles": self.roles,
                                "rolebindings": self.rolebindings,
                                "deployments": self.deployments},
                               self.namespaces, lambda: self.denied, USER, self.record)
        self.bookmarks_sent = 0
        self.bookmark_interval = bookmark_interval
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            self.scheme = "https"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        for name in namespaces:
            self.create_namespace(name)
            self._pending_accounts[name] = 0.0

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> KubeStandIn:  # type: ignore[override]
        super().start()
        self.thread.start()
        return self

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        self.server.shutdown()
        self.server.server_close()

    def pod_names(self, namespace: str = "fuyao-tasks") -> list[str]:
        with self.cond:
            return sorted(name for ns, name in self.pods if ns == namespace)

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        with self.cond:
            return copy.deepcopy(self.pods[(namespace, name)])

    # --- routing -------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, str], body: Any,
               content_type: str = "") -> tuple[int, Any]:
        self.requests.append((method, path))
        try:
            return self._route(method, path, query, body, content_type)
        except Refused as exc:
            return exc.code, status(exc.code, exc.reason, exc.message)
        except Exception as exc:  # a stand-in bug: answer 500 rather than drop the connection
            return 500, status(500, "InternalError", f"stand-in: {exc!r}")

    def _route(self, method: str, path: str, query: dict[str, str], body: Any,
               content_type: str) -> tuple[int, Any]:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            rest = parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            rest = parts[3:]
        else:
            raise Refused(404, "NotFound", "the server could not find the requested resource")
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        resource, name = rest[0], (rest[1] if len(rest) > 1 else None)
        if resource == "selfsubjectaccessreviews" and method == "POST":
            return 201, self._review(body)
        verb = {"GET": "get" if name else "list", "POST": "create", "PATCH": "patch",
                "PUT": "update", "DELETE": "delete"}.get(method, method.lower())
        self._authorize(verb, resource, ns)
        if resource == "leases" and ns is not None:
            return self.leases.serve(method, ns, name, body)
        dry_run = query.get("dryRun") == "All"
        with self.cond:
            if method == "GET":
                return 200, self._get(resource, ns, name)
            if resource in OBJECTS and ns is not None:
                return self.objects.serve(method, resource, ns, name, body)
            if resource == "podgroups" and ns is not None:
                return self._podgroups(method, ns, name, body)
            if method == "POST" and resource == "pods" and ns is not None:
                return 201, self.create_pod(ns, body, dry_run=dry_run)
            if method == "POST" and resource == "namespaces":
                body = {"apiVersion": "v1", "kind": "Namespace", **body}
                validate_schema(body, strict=True)
                return 201, (body if dry_run else self.create_namespace(body["metadata"]["name"]))
            if method == "POST" and resource == "priorityclasses":
                return 201, self._create_class(body, dry_run)
            if method == "PATCH" and name is not None:
                return 200, self._patch(resource, ns, name, body, query, content_type)
            if method == "DELETE" and resource == "pods" and ns is not None and name:
                options = body if isinstance(body, dict) else {}
                grace = options.get("gracePeriodSeconds") if body else _int(
                    query.get("gracePeriodSeconds"))
                return 200, self.delete_pod(ns, name, grace=grace)
        raise Refused(405, "MethodNotAllowed", f"{method} {path} is not served here")

    def _authorize(self, verb: str, resource: str, ns: str | None) -> None:
        if (verb, resource) in self.denied:
            group = _GROUPS.get(resource, "")
            scope = f'in the namespace "{ns}"' if ns else "at the cluster scope"
            raise Refused(403, "Forbidden", f'{resource} is forbidden: User "{USER}" cannot '
                          f'{verb} resource "{resource}" in API group "{group}" {scope}')

    def _review(self, body: dict[str, Any]) -> dict[str, Any]:
        attrs = (body.get("spec") or {}).get("resourceAttributes") or {}
        allowed = (attrs.get("verb"), attrs.get("resource")) not in self.denied
        return {**body, "status": {"allowed": allowed}}

    def _get(self, resource: str, ns: str | None, name: str | None) -> Any:
        items = self._collection(resource, ns)
        if name is None:
            return {"apiVersion": "v1", "kind": _KINDS.get(resource, "Object") + "List",
                    "metadata": {"resourceVersion": str(self.rv)},
                    "items": [copy.deepcopy(i) for i in items]}
        for item in items:
            if item["metadata"]["name"] == name:
                return copy.deepcopy(item)
        raise Refused(404, "NotFound", f'{resource} "{name}" not found')

    def _collection(self, resource: str, ns: str | None) -> list[dict[str, Any]]:
        table: dict[Any, dict[str, Any]] = {
            "nodes": self.nodes, "pods": self.pods, "namespaces": self.namespaces,
            "serviceaccounts": self.accounts, "priorityclasses": self.classes,
            "roles": self.roles, "rolebindings": self.rolebindings,
            "deployments": self.deployments,
        }.get(resource, {})  # type: ignore[assignment]
        return [o for o in table.values()
                if ns is None or o["metadata"].get("namespace") in (None, ns)]

    def _podgroups(self, method: str, ns: str, name: str | None, body: Any) -> tuple[int, Any]:
        """A gang scheduler's PodGroup custom resource (coscheduling or Volcano)."""
        if method == "POST":
            key = (ns, body["metadata"]["name"])
            if key in self.podgroups:
                raise Refused(409, "AlreadyExists", f'podgroups "{key[1]}" already exists')
            obj = copy.deepcopy(body)
            obj["metadata"]["namespace"] = ns
            self.podgroups[key] = obj
            return 201, copy.deepcopy(obj)
        if method == "DELETE" and name is not None:
            if self.podgroups.pop((ns, name), None) is None:
                raise Refused(404, "NotFound", f'podgroups "{name}" not found')
            return 200, status(200, "", "deleted") | {"status": "Success"}
        if method == "GET" and name is not None and (ns, name) in self.podgroups:
            return 200, copy.deepcopy(self.podgroups[(ns, name)])
        raise Refused(404, "NotFound", f'podgroups "{name}" not found')

    def _create_class(self, body: dict[str, Any], dry_run: bool) -> dict[str, Any]:
        validate_schema(body, strict=True)
        name = body["metadata"]["name"]
        if name in self.classes:
            raise Refused(409, "AlreadyExists",
                          f'priorityclasses.scheduling.k8s.io "{name}" already exists')
        obj = copy.deepcopy(body)
        obj["metadata"].setdefault("uid", "pc-" + name)
        if not dry_run:
            self.classes[name] = obj
            self.record("priorityclasses", "ADDED", obj)
        return copy.deepcopy(obj)

    def _patch(self, resource: str, ns: str | None, name: str, body: Any,
               query: dict[str, str], content_type: str) -> dict[str, Any]:
        if content_type.startswith("application/apply-patch"):
            return self._apply(resource, ns, name, body, query)
        target = self._get(resource, ns, name)   # a copy; 404 if missing
        for field in ("labels", "annotations"):
            for key, value in ((body or {}).get("metadata", {}).get(field) or {}).items():
                target["metadata"].setdefault(field, {})
                if value is None:
                    target["metadata"][field].pop(key, None)
                else:
                    target["metadata"][field][key] = value
        if "spec" in (body or {}) and resource == "nodes":
            target["spec"].update(body["spec"])
        validate_schema(target, strict=True)
        if query.get("dryRun") != "All":
            store = self.nodes if resource == "nodes" else self.pods
            store[name if resource == "nodes" else (ns, name)] = target  # type: ignore[index]
            self.record(resource, "MODIFIED", target)
        return copy.deepcopy(target)

    def _apply(self, resource: str, ns: str | None, name: str, body: Any,
               query: dict[str, str]) -> dict[str, Any]:
        """Server-side apply: the object validated strictly; created if missing."""
        obj = yaml.safe_load(body) if isinstance(body, str) else copy.deepcopy(body)
        if not query.get("fieldManager"):
            raise Refused(400, "BadRequest", 'PatchOptions.meta.k8s.io "" is invalid: '
                          "fieldManager: Required value: is required for apply patch")
        validate_schema(obj, strict=True)
        if resource == "pods" and ns is not None:
            existing = self.pods.get((ns, name))
            if existing is None:
                return self.create_pod(ns, obj, dry_run=query.get("dryRun") == "All")
            merged = copy.deepcopy(existing)
            for field in ("labels", "annotations"):
                merged["metadata"].setdefault(field, {}).update(
                    obj["metadata"].get(field) or {})
            if query.get("dryRun") != "All":
                self.pods[(ns, name)] = merged
                self.record("pods", "MODIFIED", merged)
            return copy.deepcopy(merged)
        if resource == "namespaces" and name not in self.namespaces:
            return obj if query.get("dryRun") == "All" else self.create_namespace(name)
        return self._get(resource, ns, name)

    # --- watch ---------------------------------------------------------------------------

    def watch_events(self, kind: str, ns: str | None, since: int | None, timeout: float,
                     bookmarks: bool) -> Iterator[dict[str, Any]]:
        """Events of ``kind`` newer than ``since`` until timeout or close; 410 if compacted."""
        deadline = time.monotonic() + timeout
        next_bookmark = time.monotonic() + self.bookmark_interval
        initial: list[dict[str, Any]] = []
        with self.cond:
            if since is not None and since < self.compacted:
                yield {"type": "ERROR", "object": status(
                    410, "Expired", f"too old resource version: {since} ({self.compacted})")}
                return
            if since is None:   # no resourceVersion: synthetic ADDED for what exists now
                initial = [copy.deepcopy(o) for o in self._collection(kind, ns)]
                since = self.rv
        yield from ({"type": "ADDED", "object": o} for o in initial)
        while True:
            with self.cond:
                fresh = [e for e in self.events if e[0] > since and e[1] == kind
                         and (ns is None or e[3]["metadata"].get("namespace") == ns)]
                if not fresh:
                    now = time.monotonic()
                    if now >= deadline or self.closed:
                        return
                    if bookmarks and now >= next_bookmark:
                        next_bookmark = now + self.bookmark_interval
                        self.bookmarks_sent += 1
                        since = max(since, self.rv)
                        yield {"type": "BOOKMARK", "object": {
                            "kind": _KINDS.get(kind, "Object"), "apiVersion": "v1",
                            "metadata": {"resourceVersion": str(since)}}}
                        continue
                    self.cond.wait(min(deadline - now, 0.1))
                    continue
            for rv, _, event_type, obj in fresh:
                since = rv
                yield {"type": event_type, "object": obj}


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def _int(text: str | None) -> int | None:
    return int(text) if text not in (None, "") else None


def _handler(standin: KubeStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, code: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _serve(self, method: str) -> None:
            url = urlparse(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if standin.token is not None and self.headers.get(
                    "Authorization") != f"Bearer {standin.token}":
                self._send(401, status(401, "Unauthorized", "Unauthorized"))
                return
            content_type = self.headers.get("Content-Type") or ""
            body: Any = None
            if raw:
                body = (raw.decode() if content_type.startswith("application/apply-patch")
                        and not raw.lstrip().startswith(b"{") else json.loads(raw))
            if method == "GET" and query.get("watch", "").lower() in ("true", "1"):
                self._watch(url.path, query)
                return
            self._send(*standin.handle(method, url.path, query, body, content_type))

        def _watch(self, path: str, query: dict[str, str]) -> None:
            standin.requests.append(("WATCH", path))
            parts = [p for p in path.split("/") if p]
            kind = parts[-1]
            ns = parts[parts.index("namespaces") + 1] if "namespaces" in parts[:-1] else None
            try:
                standin._authorize("watch", kind, ns)
            except Refused as exc:
                self._send(exc.code, status(exc.code, exc.reason, exc.message))
                return
            rv = query.get("resourceVersion")
            since = int(rv) if rv not in (None, "", "0") else None
            timeout = float(query.get("timeoutSeconds") or 30)
            bookmarks = query.get("allowWatchBookmarks", "").lower() == "true"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for event in standin.watch_events(kind, ns, since, timeout, bookmarks):
                    line = (json.dumps(event) + "\n").encode()
                    self.wfile.write(f"{len(line):X}\r\n".encode() + line + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
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

        def do_PUT(self) -> None:      # Lease renewals (leases.py)
            self._serve("PUT")

    return Handler
