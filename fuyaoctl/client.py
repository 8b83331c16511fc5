"""Python SDK for the Fuyao hub's REST API; the CLI (``cli.py``) is built on it.

::

    from fuyaoctl import Client

    with Client("hub.example:8848", token="...") as hub:
        view = hub.submit_task({"name": "train", "gpu": 8, "gpu_model": "H100"})
        done = hub.wait_for_task(view.name, timeout=600)

Every method returns ``fuyao.spec`` models. Request bodies are validated with those models
before anything is sent (``InvalidInput``). An error the hub answers with is raised as the
``fuyao.errors`` class its ``code`` names; an unreachable hub raises ``Transient`` chained from
the httpx error. The transport is a seam: pass ``http=`` any ``httpx.Client`` (FastAPI's
``TestClient``, or one over ``httpx.MockTransport``). This module never imports ``hub``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, Final, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter, ValidationError

from fuyao.computeprofile import ComputeProfile, ProfileView, parse_profile
from fuyao.errors import (
    ERRORS_BY_CODE,
    ERRORS_BY_STATUS,
    Conflict,
    FuyaoError,
    InvalidInput,
    Transient,
)
from fuyao.identity import (
    JoinTokenRequest,
    JoinTokenView,
    TokenCreated,
    TokenRequest,
    TokenView,
    WhoAmI,
)
from fuyao.insight import CatalogView, DryRunView, ExplainView
from fuyao.inventory import NodeInfo
from fuyao.pushjoin import PushJoinRequest, PushJoinResponse
from fuyao.spec import (
    CLIENT_CONTEXT,
    DEFAULT_HEADROOM,
    AuditEntry,
    CapacityRow,
    ClusterView,
    JoinRequest,
    JoinResponse,
    TaskBatch,
    TaskSpec,
    TaskState,
    TaskView,
)
from fuyao.taints import Taint
from fuyaoctl.capacity_api import CapacityApi
from fuyaoctl.queue_calls import QueueCalls
from fuyaoctl.validation import validate_model

DEFAULT_HUB: Final = "http://127.0.0.1:8848"
HUB_ENV: Final = "FUYAO_HUB"
TOKEN_ENV: Final = "FUYAO_TOKEN"
API: Final = "/api/v1"
TERMINAL_STATES: Final = frozenset(state for state in TaskState if state.terminal)

T = TypeVar("T")
_CLUSTERS = TypeAdapter(list[ClusterView])
_TASKS = TypeAdapter(list[TaskView])
_CAPACITY = TypeAdapter(list[CapacityRow])
_AUDIT = TypeAdapter(list[AuditEntry])
_CLUSTER = TypeAdapter(ClusterView)
_NODES = TypeAdapter(list[NodeInfo])
_TASK = TypeAdapter(TaskView)
_JOIN = TypeAdapter(JoinResponse)
_OBJECT = TypeAdapter(dict[str, Any])
_TOKEN_CREATED = TypeAdapter(TokenCreated)
_TOKEN = TypeAdapter(TokenView)
_TOKENS = TypeAdapter(list[TokenView])
_WHOAMI = TypeAdapter(WhoAmI)
_JOIN_TOKENS = TypeAdapter(list[JoinTokenView])
CONTINUE_HEADER: Final = "X-Continue"
MUTATIONS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_DRY_RUN = TypeAdapter(DryRunView)
_CATALOG = TypeAdapter(CatalogView)
_PROFILE = TypeAdapter(ProfileView)
_PROFILES = TypeAdapter(list[ProfileView])
_EXPLAIN = TypeAdapter(ExplainView)


def normalize_hub(url: str) -> str:
    """``host:port`` -> ``http://host:port``; no trailing slash; InvalidInput if unusable."""
    url = url.strip()
    if "://" not in url:
        url = f"http://{url}"
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise InvalidInput(f"hub URL {url!r} is not a valid URL: {exc}") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InvalidInput(f"hub URL {url!r} must look like http://host:port or host:port")
    return url.rstrip("/")


def task_state(value: TaskState | str) -> TaskState:
    """A task state from its name, any case (``queued`` -> ``Queued``)."""
    for state in TaskState:
        if str(value).lower() == state.value.lower():
            return state
    names = ", ".join(state.value for state in TaskState)
    raise InvalidInput(f"task state {value!r} is not one of {names}")


class Client(QueueCalls, CapacityApi):
    """A connection to one hub: typed methods over its REST API."""

    def __init__(
        self,
        hub: str | None = None,
        *,
        token: str | None = None,
        timeout: float = 10.0,
        http: httpx.Client | None = None,
    ) -> None:
        if hub is None and http is not None and str(http.base_url):
            hub = str(http.base_url)
        self.hub = normalize_hub(hub or os.environ.get(HUB_ENV) or DEFAULT_HUB)
        self._token = (token if token is not None else os.environ.get(TOKEN_ENV)) or None
        self._owns_http = http is None
        self._http = http if http is not None else httpx.Client(timeout=timeout)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the HTTP connection pool (only if this client created it)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- clusters ----------------------------------------------------------------------------

    def join_cluster(
        self,
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        weight: int = 1,
        headroom: float = DEFAULT_HEADROOM,
        token_ttl_seconds: int | None = None,
    ) -> JoinResponse:
        """Register a cluster; the answer holds its one-time join token and agent command."""
        fields: dict[str, Any] = {
            "name": name, "labels": dict(labels or {}), "weight": weight, "headroom": headroom,
        }
        if token_ttl_seconds is not None:
            fields["token_ttl_seconds"] = token_ttl_seconds
        request = validate_model(JoinRequest, fields, what=f"cluster {name}")
        data = self._call("POST", "/clusters", body=request.model_dump(mode="json"))
        return self._parse(_JOIN, data)

    def push_join_cluster(
        self,
        name: str,
        kubeconfig: str,
        *,
        labels: Mapping[str, str] | None = None,
        weight: int = 1,
        headroom: float = DEFAULT_HEADROOM,
    ) -> PushJoinResponse:
        """Join a cluster in push mode: the hub checks these API credentials, stores them
        encrypted and runs the cluster's agent itself (``fuyao.kubeconfig`` builds them)."""
        request = validate_model(PushJoinRequest, {
            "name": name, "labels": dict(labels or {}), "weight": weight,
            "headroom": headroom, "kubeconfig": kubeconfig}, what=f"cluster {name}")
        data = self._call("POST", "/clusters/push", body=request.model_dump(mode="json"))
        return PushJoinResponse.model_validate(data)

    def list_clusters(self) -> list[ClusterView]:
        """Every member cluster."""
        return self._parse(_CLUSTERS, self._call("GET", "/clusters"))

    def get_cluster(self, name: str) -> ClusterView:
        """One cluster; NotFound if it does not exist."""
        return self._parse(_CLUSTER, self._call("GET", f"/clusters/{_seg(name)}"))

    def cluster_nodes(self, name: str) -> list[NodeInfo]:
        """A cluster's nodes as the hub holds them (labels, allocatable, free, devices)."""
        return self._parse(_NODES, self._call("GET", f"/clusters/{_seg(name)}/nodes"))

    def cordon(self, name: str) -> ClusterView:
        """Stop new placements on a cluster; what runs there keeps running."""
        return self._parse(_CLUSTER, self._call("POST", f"/clusters/{_seg(name)}/cordon"))

    def uncordon(self, name: str) -> ClusterView:
        """Allow new placements on a cordoned cluster again."""
        data = self._call("POST", f"/clusters/{_seg(name)}/uncordon")
        return self._parse(_CLUSTER, data)

    def remove_cluster(self, name: str) -> dict[str, Any]:
        """Remove a cluster: ``{"removed": name, "requeued": <tasks sent back to the queue>}``."""
        data = self._call("DELETE", f"/clusters/{_seg(name)}")
        return self._parse(_OBJECT, data)

    # -- tasks -------------------------------------------------------------------------------

    def submit_task(self, spec: TaskSpec | Mapping[str, Any]) -> TaskView:
        """Submit one task; it is validated here first, then stored ``Queued`` by the hub."""
        task = validate_model(TaskSpec, spec, what=f"task {_name_of(spec)}")
        body = task.model_dump(mode="json", exclude_unset=True)
        return self._parse(_TASK, self._call("POST", "/tasks", body=body))

    def submit_tasks(self, specs: Iterable[TaskSpec | Mapping[str, Any]]) -> list[TaskView]:
        """Submit several tasks at once: the hub stores all of them or none."""
        tasks = [validate_model(TaskSpec, s, what=f"task {_name_of(s)}") for s in specs]
        batch = validate_model(TaskBatch, {"tasks": tasks}, what="task batch")
        body = {"tasks": [t.model_dump(mode="json", exclude_unset=True) for t in batch.tasks]}
        return self._parse(_TASKS, self._call("POST", "/tasks:batch", body=body))

    def dry_run(self, spec: TaskSpec | Mapping[str, Any]) -> DryRunView:
        """Where the hub would place a task now, or why nowhere; stores nothing."""
        task = validate_model(TaskSpec, spec, what=f"task {_name_of(spec)}")
        body = task.model_dump(mode="json", exclude_unset=True)
        return self._parse(_DRY_RUN, self._call("POST", "/tasks:dry-run", body=body))

    def explain_task(self, name: str) -> ExplainView:
        """Why a task waits: reason histogram, queue state, scores and the nearest fit."""
        return self._parse(_EXPLAIN, self._call("GET", f"/tasks/{_seg(name)}/explain"))

    def list_tasks(
        self, *, state: TaskState | str | None = None, cluster: str | None = None,
        limit: int | None = None, continue_: str | None = None,
    ) -> list[TaskView]:
        """Tasks, optionally only those in one state or on one cluster (events omitted).

        Without ``limit`` every page is fetched; with it, one page (see ``list_tasks_page``).
        """
        if limit is not None:
            return self.list_tasks_page(state=state, cluster=cluster, limit=limit,
                                        continue_=continue_)[0]
        views: list[TaskView] = []
        token = continue_
        while True:
            page, token = self.list_tasks_page(state=state, cluster=cluster, continue_=token)
            views += page
            if token is None:
                return views

    def list_tasks_page(
        self, *, state: TaskState | str | None = None, cluster: str | None = None,
        limit: int | None = None, continue_: str | None = None,
    ) -> tuple[list[TaskView], str | None]:
        """One page of tasks and the token for the next page (None on the last one)."""
        params = {}
        if state is not None:
            params["state"] = task_state(state).value
        if cluster is not None:
            params["cluster"] = cluster
        if limit is not None:
            params["limit"] = str(limit)
        if continue_:
            params["continue"] = continue_
        response = self._request("GET", "/tasks", params=params)
        return (self._parse(_TASKS, _json(response, "GET /tasks")),
                response.headers.get(CONTINUE_HEADER))

    def get_task(self, name: str) -> TaskView:
        """One task with its events, per-cluster scores and, when Queued, rejection reasons."""
        return self._parse(_TASK, self._call("GET", f"/tasks/{_seg(name)}"))

    def cancel_task(self, name: str) -> TaskView:
        """Cancel a task wherever it is; a finished task answers Conflict."""
        data = self._call("POST", f"/tasks/{_seg(name)}/cancel")
        return self._parse(_TASK, data)

    def delete_task(self, name: str) -> dict[str, Any]:
        """Delete a task that has ended (its name is free again); Conflict if it has not."""
        return self._parse(_OBJECT, self._call("DELETE", f"/tasks/{_seg(name)}"))

    def wait_for_task(
        self,
        name: str,
        states: Iterable[TaskState | str] = TERMINAL_STATES,
        *,
        timeout: float = 60.0,
        interval: float = 1.0,
    ) -> TaskView:
        """Poll until the task is in one of ``states`` and return it.

        Raises ``Conflict`` if it ends in another terminal state (it can never get there) and
        ``Transient`` if ``timeout`` seconds pass first.
        """
        wanted = {task_state(state) for state in states}
        goal = " or ".join(state for state in TaskState if state in wanted)
        deadline = time.monotonic() + timeout
        while True:
            view = self.get_task(name)
            if view.state in wanted:
                return view
            if view.state.terminal:
                why = f" ({view.message})" if view.message else ""
                raise Conflict(f"task {name} is {view.state}{why}; it will never be {goal}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Transient(
                    f"timed out after {timeout:g}s waiting for task {name} to be {goal}; "
                    f"it is {view.state}"
                )
            time.sleep(min(interval, remaining))

    def set_taints(self, name: str, taints: Iterable[Taint | Mapping[str, Any]]) -> ClusterView:
        """Replace a cluster's taints (``[]`` removes them all)."""
        body = {"taints": [Taint.model_validate(t).model_dump() for t in taints]}
        return self._parse(_CLUSTER, self._call("PUT", f"/clusters/{_seg(name)}/taints",
                                                body=body))

    def catalog(self) -> CatalogView:
        """The hub's accelerator catalog: models (vendor, kind, rank, memory) and aliases."""
        return self._parse(_CATALOG, self._call("GET", "/catalog"))

    # -- profiles ----------------------------------------------------------------------------

    def apply_profile(self, profile: ComputeProfile | Mapping[str, Any]) -> ProfileView:
        """Create or update a ComputeProfile (checked here first); its version moves by one
        when the content changed."""
        checked = profile if isinstance(profile, ComputeProfile) else parse_profile(profile)
        body = checked.model_dump(mode="json")
        return self._parse(_PROFILE, self._call("PUT", f"/profiles/{_seg(checked.name)}",
                                                body=body))

    def list_profiles(self) -> list[ProfileView]:
        """Every ComputeProfile."""
        return self._parse(_PROFILES, self._call("GET", "/profiles"))

    def get_profile(self, name: str) -> ProfileView:
        """One ComputeProfile, with the queued tasks that use it."""
        return self._parse(_PROFILE, self._call("GET", f"/profiles/{_seg(name)}"))

    def delete_profile(self, name: str) -> dict[str, Any]:
        """Delete a ComputeProfile; Conflict naming the queued tasks that still use it."""
        return self._parse(_OBJECT, self._call("DELETE", f"/profiles/{_seg(name)}"))

    # -- fleet -------------------------------------------------------------------------------

    def capacity(self, cluster: str | None = None) -> list[CapacityRow]:
        """Capacity per cluster and accelerator model: total, allocated, reserved, free."""
        params = {} if cluster is None else {"cluster": cluster}
        return self._parse(_CAPACITY, self._call("GET", "/capacity", params=params))

    def audit_log(self, limit: int = 100, *, since: str | None = None,
                  actor: str | None = None, action: str | None = None,
                  target: str | None = None) -> list[AuditEntry]:
        """The newest ``limit`` audited mutations matching the filters, newest first
        (``since``: an ISO time; ``action``: a name or a prefix ending in '.')."""
        given = {"limit": str(limit), "since": since, "actor": actor, "action": action,
                 "target": target}
        params = {k: v for k, v in given.items() if v is not None}
        return self._parse(_AUDIT, self._call("GET", "/audit", params=params))

    # -- identities --------------------------------------------------------------------------

    def create_token(self, name: str, role: str, *, queues: Iterable[str] = (),
                     expires_in_seconds: int | None = None) -> TokenCreated:
        """A new API token (admin only); its secret is shown in the answer and never again."""
        request = validate_model(TokenRequest, {
            "name": name, "role": role, "queues": list(queues),
            "expires_in_seconds": expires_in_seconds}, what=f"token {name}")
        body = request.model_dump(mode="json", exclude_none=True)
        return self._parse(_TOKEN_CREATED, self._call("POST", "/auth/tokens", body=body))

    def list_tokens(self) -> list[TokenView]:
        """Every API token (never the secrets)."""
        return self._parse(_TOKENS, self._call("GET", "/auth/tokens"))

    def revoke_token(self, name: str) -> TokenView:
        """Revoke an API token at once."""
        return self._parse(_TOKEN, self._call("DELETE", f"/auth/tokens/{_seg(name)}"))

    def whoami(self) -> WhoAmI:
        """The name, role and queues of this client's token."""
        return self._parse(_WHOAMI, self._call("GET", "/auth/whoami"))

    def create_join_token(self, cluster: str, *, ttl_seconds: int | None = None) -> JoinResponse:
        """A new one-time join token for an existing cluster (agent credential rotation)."""
        fields = {} if ttl_seconds is None else {"ttl_seconds": ttl_seconds}
        request = validate_model(JoinTokenRequest, fields, what="join token")
        data = self._call("POST", f"/clusters/{_seg(cluster)}/tokens",
                          body=request.model_dump(mode="json"))
        return self._parse(_JOIN, data)

    def list_join_tokens(self, cluster: str) -> list[JoinTokenView]:
        """A cluster's join tokens (never the secrets)."""
        return self._parse(_JOIN_TOKENS, self._call("GET", f"/clusters/{_seg(cluster)}/tokens"))

    def revoke_join_token(self, cluster: str, token_id: str) -> dict[str, Any]:
        """Delete a cluster's unused join token by id."""
        data = self._call("DELETE", f"/clusters/{_seg(cluster)}/tokens/{_seg(token_id)}")
        return self._parse(_OBJECT, data)

    def events(self, *, type: str | None = None, name: str | None = None,
               since: str | None = None, timeout: float = 20.0) -> dict[str, Any]:
        """One long poll of the events endpoint: ``{"events", "next", "truncated", "source"}``.
        ``since``: the ``next`` of a previous answer (omitted: from now)."""
        params = {"timeout": f"{timeout:g}"}
        for key, value in (("type", type), ("name", name), ("since", since)):
            if value is not None:
                params[key] = value
        return self._parse(_OBJECT, self._call("GET", "/events", params=params,
                                               timeout=timeout + 10.0))

    def watch(self, *, type: str | None = None, name: str | None = None,
              since: str | None = None, until: float | None = None,
              poll: float = 20.0) -> Iterator[dict[str, Any]]:
        """Follow events (dicts, oldest first) until ``until`` (a ``time.monotonic()``) or
        forever. A lost hub or a failover is retried every second, resuming after the last
        event seen."""
        cursor = since
        while until is None or time.monotonic() < until:
            wait = poll if until is None else max(0.0, min(poll, until - time.monotonic()))
            try:
                page = self.events(type=type, name=name, since=cursor, timeout=wait)
            except Transient:
                time.sleep(1.0)
                continue
            cursor = page["next"]
            yield from page["events"]

    def hub_status(self) -> dict[str, Any]:
        """The hub replicas on this store: ``{"leader", "epoch", "replicas": [...]}``."""
        return self._parse(_OBJECT, self._call("GET", "/hub/status"))

    def health(self) -> dict[str, Any]:
        """The hub's ``/healthz`` answer, ``{"status": "ok"}`` when it is up."""
        return self._parse(_OBJECT, self._call("GET", "/healthz", api=False))

    # -- plumbing ----------------------------------------------------------------------------

    def _call(self, method: str, path: str, **request: Any) -> Any:
        """``_request`` and its JSON answer."""
        return _json(self._request(method, path, **request), f"{method} {path}")

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        api: bool = True,
        timeout: float | None = None,
    ) -> httpx.Response:
        url = f"{self.hub}{API if api else ''}{path}"
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        if method in MUTATIONS:     # the hub refuses mutations without it (cross-site guard)
            headers["Content-Type"] = "application/json"
        try:
            response = self._http.request(
                method, url, json=body, params=dict(params or {}), headers=headers,
                timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
            )
        except httpx.TimeoutException as exc:
            raise Transient(f"cannot reach the hub at {self.hub}: timed out ({exc})") from exc
        except httpx.TransportError as exc:
            raise Transient(f"cannot reach the hub at {self.hub}: {exc}") from exc
        if not response.is_success:
            raise error_from_response(response)
        return response

    @staticmethod
    def _parse(adapter: TypeAdapter[T], data: Any) -> T:
        try:
            return adapter.validate_python(data, context=CLIENT_CONTEXT)
        except ValidationError as exc:
            raise FuyaoError(f"unexpected answer from the hub: {exc}") from exc


def _json(response: httpx.Response, what: str) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise FuyaoError(f"{what}: the hub answered with a non-JSON body") from exc


def error_from_response(response: httpx.Response) -> FuyaoError:
    """The ``fuyao.errors`` exception for a non-2xx answer: by ``error.code``, else status."""
    code, message = None, None
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        code = body["error"].get("code")
        message = body["error"].get("message")
    elif isinstance(body, dict) and "detail" in body:  # a framework error, not the hub's own
        message = str(body["detail"])
    cls = ERRORS_BY_CODE.get(str(code)) or _by_status(response.status_code)
    reason = response.reason_phrase or "error"
    return cls(message or f"the hub answered {response.status_code} {reason}")


def _by_status(status: int) -> type[FuyaoError]:
    if status == 422:  # request validation by the web framework
        return InvalidInput
    return ERRORS_BY_STATUS.get(status, FuyaoError)


def _seg(name: str) -> str:
    return quote(name, safe="")


def _name_of(spec: TaskSpec | Mapping[str, Any]) -> str:
    if isinstance(spec, TaskSpec):
        return spec.name
    name = spec.get("name") if isinstance(spec, Mapping) else None
    return str(name) if name else "(unnamed)"
