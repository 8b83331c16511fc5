"""Capacity-planning models shared by the hub and fuyaoctl: fit, N-1, history, the report.

The hub's planning room (``hub.planning``) computes these with the real placement code on a
copy of its fleet view and serves them under ``/api/v1/capacity/...``; the SDK
(``fuyaoctl.capacity_api``) parses them and the CLI renders them. See docs/capacity.md.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fuyao.spec import Quantity, TaskSpec

FIT_LIMIT_DEFAULT = 10_000
FIT_LIMIT_MAX = 100_000
MAX_SHAPES = 32
GroupBy = Literal["cluster", "model", "site", "queue"]


class FitRequest(BaseModel):
    """A task shape to count: how many more of it would fit right now.

    A ComputeProfile (``profile``) and/or explicit requests, which override the profile's;
    the fields mean what they mean in a task spec. ``limit`` bounds the count (the answer
    says when it was reached).
    """

    model_config = ConfigDict(extra="forbid")

    profile: str | None = Field(default=None, max_length=63)
    gpu: Quantity = 0
    gpu_model: str | None = Field(default=None, max_length=256)
    gpu_memory: Quantity | None = None
    cpu: Quantity = "1"
    memory: Quantity = "1Gi"
    selector: str | None = Field(default=None, max_length=1024)
    replicas: int = Field(default=1, ge=1, le=10_000)
    queue: str = "default"
    priority: int = Field(default=0, ge=-1_000_000, le=1_000_000)
    limit: int = Field(default=FIT_LIMIT_DEFAULT, ge=1, le=FIT_LIMIT_MAX)

    def task_spec(self) -> TaskSpec:
        """The same requests as a task spec, with only the fields given set (so a profile's
        template fills the rest); validates quantities and the selector."""
        given = self.model_dump(include=self.model_fields_set - {"limit"})
        return TaskSpec.model_validate({"name": "capacity-fit", **given})

    @field_validator("queue")
    @classmethod
    def _queue(cls, value: str) -> str:
        from fuyao.spec import check_name

        return check_name(value, "queue")

    @model_validator(mode="after")
    def _as_task(self) -> FitRequest:
        _check(self.task_spec)
        return self


class FitAnswer(BaseModel):
    """How many more tasks of a shape fit now, per cluster and in total, and what stops more."""

    total: int
    clusters: dict[str, int]
    limited_by: dict[str, str] = Field(
        description="per cluster (and 'limit' / 'quota'): why one more does not fit there")
    capped: bool = Field(default=False, description="the count stopped at the request's limit")


class ClusterLoss(BaseModel):
    """What happens if one cluster dies now: can the others take its tasks?"""

    safe: bool
    tasks: int = Field(description="tasks placed on or running in the cluster")
    moved: dict[str, int] = Field(default_factory=dict,
                                  description="tasks the scheduler re-placed, per cluster")
    unplaced: list[str] = Field(default_factory=list, description="tasks that would not fit")
    short: dict[str, float] = Field(
        default_factory=dict,
        description="demand left unplaced: devices per model, 'cpu' cores, 'memory_gib'")
    headroom_needed: float = Field(
        default=0.0,
        description="fraction of every other cluster's capacity its tasks need (floor)")


class NMinusOne(BaseModel):
    """The fleet's N-1 verdict: safe when the loss of any one cluster can be absorbed."""

    safe: bool
    rule: str
    clusters: dict[str, ClusterLoss]
    headroom_recommended: dict[str, float] = Field(
        default_factory=dict,
        description="per cluster: the headroom fraction that covers the loss of any other")


class Shape(BaseModel):
    """One task shape of the distribution fragmentation is measured against."""

    model_config = ConfigDict(extra="forbid")

    gpu: Quantity = 1
    gpu_model: str | None = Field(default=None, max_length=256)
    gpu_memory: Quantity | None = None
    cpu: Quantity = "1"
    memory: Quantity = "1Gi"
    selector: str | None = Field(default=None, max_length=1024)
    weight: float = Field(default=1.0, gt=0, le=1e9)

    def task_spec(self) -> TaskSpec:
        """The shape as a one-replica task spec (validates it)."""
        return TaskSpec(name="shape", gpu=self.gpu, gpu_model=self.gpu_model,
                        gpu_memory=self.gpu_memory, cpu=self.cpu, memory=self.memory,
                        selector=self.selector)

    @model_validator(mode="after")
    def _as_task(self) -> Shape:
        _check(self.task_spec)
        return self


def _check(build: Callable[[], TaskSpec]) -> None:
    """Validate as a task spec: its problems as one ValueError naming each field."""
    try:
        build()
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or 'selector'}: "
                    f"{str(e['msg']).removeprefix('Value error, ')}" for e in exc.errors()]
        raise ValueError("; ".join(problems)) from exc


class ReportRow(BaseModel):
    """Capacity of one group (a cluster, site or queue) for one accelerator model."""

    group: str
    model: str
    nodes: int = 0
    devices_total: float = 0
    devices_allocated: float = 0
    devices_reserved: float = 0
    devices_free: float = 0
    devices_unschedulable: float = Field(
        default=0, description="idle devices on cordoned or NotReady nodes (never free)")
    devices_fragmented: float = Field(
        default=0, description="free devices no common task shape can use (FGD), weighted")
    queued_tasks: int = 0
    queued_devices: float = 0
    cpu_total: float = 0
    cpu_free: float = 0
    memory_total_gib: float = 0
    memory_free_gib: float = 0
    n1_safe: bool | None = Field(default=None, description="by=cluster: may it die safely?")
    gpu_memory_total_gib: float = Field(default=0, description="device memory of the model")
    gpu_memory_allocated_gib: float = Field(
        default=0, description="device memory in use (a shared device in proportion)")
    gpu_memory_free_gib: float = 0


class CapacityReport(BaseModel):
    """``fuyaoctl capacity``: rows by a grouping, fleet totals per model, shapes, N-1."""

    by: GroupBy
    rows: list[ReportRow]
    fleet: list[ReportRow]
    shapes: list[Shape]
    shapes_from: str
    n1_safe: bool


class ReportRequest(BaseModel):
    """``POST /api/v1/capacity/report``: the grouping, and shapes from a file."""

    model_config = ConfigDict(extra="forbid")

    by: GroupBy = "cluster"
    cluster: str | None = None
    shapes: list[Shape] | None = Field(default=None, max_length=MAX_SHAPES)


class CapacityPoint(BaseModel):
    """One history sample of one cluster and model (a downsampled point is an average)."""

    at: datetime
    cluster: str
    model: str
    devices_total: float
    devices_allocated: float
    devices_reserved: float
    devices_free: float
    devices_unschedulable: float = 0
    devices_fragmented: float = 0
    queued_tasks: float = 0
    queued_devices: float = 0
    cpu_total: float = 0
    cpu_allocated: float = 0
    memory_total_gib: float = 0
    memory_allocated_gib: float = 0
