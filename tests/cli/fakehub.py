"""A small in-memory FAKE of the hub's REST API, for fuyaoctl's tests only (not the real hub).

It answers the REST contract fuyaoctl is written against, validates bodies with the same
``fuyao.spec`` models, answers errors as ``{"error": {"code", "message"}}``, and records
every request so a test can assert that nothing was sent. Plug it into the SDK with
``httpx.Client(transport=httpx.MockTransport(fake.handle))`` (``fake.http()``). Placement is
not simulated: tests set states, reasons and scores directly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from pydantic import TypeAdapter, ValidationError

from fuyao.capacity import CapacityReport, NMinusOne, ReportRow
from fuyao.errors import Conflict, FuyaoError, InvalidInput, NotFound, Unauthenticated
from fuyao.spec import (
    CapacityRow,
    ClusterState,
    ClusterView,
    JoinRequest,
    JoinResponse,
    TaskBatch,
    TaskEvent,
    TaskSpec,
    TaskState,
    TaskView,
    error_body,
)

Handler = Callable[..., Any]
FAKE_CA = "-----BEGIN CERTIFICATE-----\nZmFrZQ==\n-----END CERTIFICATE-----\n"
NOW = datetime(2025, 1, 1, tzinfo=UTC)


class FakeHub:
    """In-memory clusters and tasks behind the REST routes fuyaoctl calls."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token
        self.clusters: dict[str, ClusterView] = {}
        self.tasks: dict[str, TaskView] = {}
        self.capacity_rows: list[CapacityRow] = []
        self.n1 = NMinusOne(safe=True, rule="failover", clusters={})
        self.requests: list[httpx.Request] = []
        self.scripts: dict[str, list[TaskState]] = {}  # states served by successive GETs
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = [
            ("GET", re.compile(r"/healthz"), lambda: {"status": "ok"}),
            ("POST", re.compile(r"/api/v1/clusters"), self._join),
            ("GET", re.compile(r"/api/v1/clusters"), lambda: list(self.clusters.values())),
            ("GET", re.compile(r"/api/v1/clusters/([^/]+)"), self._cluster),
            ("POST", re.compile(r"/api/v1/clusters/([^/]+)/(cordon|uncordon)"), self._cordon),
            ("DELETE", re.compile(r"/api/v1/clusters/([^/]+)"), self._remove),
            ("POST", re.compile(r"/api/v1/tasks"), self._submit),
            ("POST", re.compile(r"/api/v1/tasks:batch"), self._batch),
            ("GET", re.compile(r"/api/v1/tasks"), self._list_tasks),
            ("GET", re.compile(r"/api/v1/tasks/([^/]+)"), self._task),
            ("POST", re.compile(r"/api/v1/tasks/([^/]+)/cancel"), self._cancel),
            ("GET", re.compile(r"/api/v1/capacity"), self._capacity),
            ("GET", re.compile(r"/api/v1/capacity/report"), self._report),
            ("GET", re.compile(r"/api/v1/capacity/n-1"), lambda: self.n1),
        ]

    def http(self) -> httpx.Client:
        """An httpx client whose transport is this fake."""
        return httpx.Client(transport=httpx.MockTransport(self.handle))

    def handle(self, request: httpx.Request) -> httpx.Response:
        """The MockTransport handler: route, run, and turn errors into the REST error body."""
        self.requests.append(request)
        self._request = request
        try:
            if self.token and request.headers.get("authorization") != f"Bearer {self.token}":
                raise Unauthenticated("missing or wrong bearer token")
            for method, pattern, handler in self._routes:
                match = pattern.fullmatch(request.url.path)
                if match and method == request.method:
                    status = 201 if method == "POST" and handler in self._creators() else 200
                    return httpx.Response(status, json=_plain(handler(*match.groups())))
            raise NotFound(f"no route {request.method} {request.url.path}")
        except ValidationError as exc:
            return httpx.Response(400, json=error_body("InvalidInput", str(exc)))
        except FuyaoError as exc:
            return httpx.Response(exc.http_status, json=error_body(exc.code, exc.message))

    # -- seeding -----------------------------------------------------------------------------

    def add_cluster(self, name: str, **fields: Any) -> ClusterView:
        """A cluster as if its agent had connected (Ready unless ``state=`` says otherwise)."""
        defaults: dict[str, Any] = {"state": ClusterState.READY, "labels": {}, "weight": 1,
                                    "headroom": 0.1}
        view = ClusterView(name=name, **{**defaults, **fields})
        self.clusters[name] = view
        return view

    def add_task(self, spec: dict[str, Any], **fields: Any) -> TaskView:
        """A task as if it had been submitted (and, with ``fields``, progressed)."""
        view = self._store(TaskSpec.model_validate(spec))
        self.tasks[view.name] = view.model_copy(update=fields)
        return self.tasks[view.name]

    # -- routes ------------------------------------------------------------------------------

    def _creators(self) -> tuple[Handler, ...]:
        return (self._join, self._submit, self._batch)

    def _body(self) -> Any:
        return json.loads(self._request.content or b"null")

    def _join(self) -> JoinResponse:
        request = JoinRequest.model_validate(self._body())
        if request.name in self.clusters:
            raise Conflict(f"cluster {request.name} already exists")
        self.clusters[request.name] = ClusterView(
            name=request.name, state=ClusterState.JOINING, labels=request.labels,
            weight=request.weight, headroom=request.headroom, joined_at=NOW,
        )
        token = f"fyj_{request.name}_secret"
        return JoinResponse(
            cluster=request.name, token=token,
            expires_at=NOW + timedelta(seconds=request.token_ttl_seconds),
            agent_command=(f"fuyao-agent --hub fake:8849 --cluster {request.name} "
                           f"--token-file {request.name}.token "
                           f"--ca-cert {request.name}-ca.crt"),
            ca_cert=FAKE_CA,
        )

    def _cluster(self, name: str) -> ClusterView:
        if name not in self.clusters:
            raise NotFound(f"cluster {name} not found")
        return self.clusters[name]

    def _cordon(self, name: str, verb: str) -> ClusterView:
        cordoned = verb == "cordon"
        state = ClusterState.CORDONED if cordoned else ClusterState.READY
        self.clusters[name] = self._cluster(name).model_copy(
            update={"cordoned": cordoned, "state": state}
        )
        return self.clusters[name]

    def _remove(self, name: str) -> dict[str, Any]:
        self._cluster(name)
        del self.clusters[name]
        requeued = 0
        for task in list(self.tasks.values()):
            if task.cluster == name and not task.state.terminal:
                self.tasks[task.name] = task.model_copy(update={
                    "state": TaskState.QUEUED, "cluster": None, "node": None,
                    "generation": task.generation + 1,
                })
                requeued += 1
        return {"removed": name, "requeued": requeued}

    def _store(self, spec: TaskSpec) -> TaskView:
        event = TaskEvent(at=NOW, kind="Submitted", message="stored in queue " + spec.queue)
        return TaskView(id=f"t-{len(self.tasks) + 1}", name=spec.name, state=TaskState.QUEUED,
                        queue=spec.queue, priority=spec.priority, spec=spec, created_at=NOW,
                        updated_at=NOW, events=[event])

    def _submit(self) -> TaskView:
        return self._batch_of([TaskSpec.model_validate(self._body())])[0]

    def _batch(self) -> list[TaskView]:
        return self._batch_of(TaskBatch.model_validate(self._body()).tasks)

    def _batch_of(self, specs: list[TaskSpec]) -> list[TaskView]:
        names = [spec.name for spec in specs]
        taken = [name for name in names if name in self.tasks]
        if taken or len(set(names)) != len(names):
            raise Conflict(f"task {(taken or names)[0]} already exists")
        views = [self._store(spec) for spec in specs]
        self.tasks.update((view.name, view) for view in views)
        return views

    def _list_tasks(self) -> list[TaskView]:
        params = self._request.url.params
        state, cluster = params.get("state"), params.get("cluster")
        if state is not None and state not in {s.value for s in TaskState}:
            raise InvalidInput(f"unknown state {state!r}")
        return [
            task.model_copy(update={"events": []}) for task in self.tasks.values()
            if (state is None or task.state == state) and (cluster in (None, task.cluster))
        ]

    def _task(self, name: str) -> TaskView:
        if name not in self.tasks:
            raise NotFound(f"task {name} not found")
        script = self.scripts.get(name)
        if script:
            state = script.pop(0) if len(script) > 1 else script[0]
            self.tasks[name] = self.tasks[name].model_copy(update={"state": state})
        return self.tasks[name]

    def _cancel(self, name: str) -> TaskView:
        task = self._task(name)
        if task.state.terminal:
            raise Conflict(f"task {name} is already {task.state}")
        self.tasks[name] = task.model_copy(update={"state": TaskState.CANCELLED})
        return self.tasks[name]

    def _report(self) -> CapacityReport:
        """The report as the hub would give it, without fragmentation or queued demand."""
        by = self._request.url.params.get("by", "cluster")
        rows = [ReportRow(group=r.cluster, model=r.model, nodes=r.nodes,
                          devices_total=r.devices_total, devices_allocated=r.devices_allocated,
                          devices_reserved=r.devices_reserved, devices_free=r.devices_free,
                          cpu_total=r.cpu_total, cpu_free=r.cpu_free,
                          memory_total_gib=r.memory_total_gib, memory_free_gib=r.memory_free_gib,
                          gpu_memory_total_gib=r.gpu_memory_total_gib,
                          gpu_memory_allocated_gib=r.gpu_memory_allocated_gib,
                          gpu_memory_free_gib=r.gpu_memory_free_gib,
                          n1_safe=self.n1.clusters[r.cluster].safe
                          if r.cluster in self.n1.clusters else None)
                for r in self._capacity()]
        return CapacityReport(by=by, rows=rows, fleet=[], shapes=[], shapes_from="default",
                              n1_safe=self.n1.safe)

    def _capacity(self) -> list[CapacityRow]:
        cluster = self._request.url.params.get("cluster")
        return [row for row in self.capacity_rows if cluster in (None, row.cluster)]


def _plain(value: Any) -> Any:
    return TypeAdapter(Any).dump_python(value, mode="json")
