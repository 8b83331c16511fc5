"""API spec models: what users submit and what the hub answers with.

The REST API (hub), the SDK and CLI (fuyaoctl) all use these pydantic models, so a task file
is validated by the same code on both sides. Input models forbid unknown fields; every
quantity is parsed at construction, so a bad value fails before anything is stored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from fuyao.errors import FuyaoError
from fuyao.quantity import (
    parse_cpu_milli,
    parse_duration,
    parse_gpu_milli,
    parse_memory_mib,
)
from fuyao.spread import MAX_SPREAD_WEIGHTS, Spread, check_division, check_weight
from fuyao.taints import Taint, Toleration

NAME_PATTERN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_KEY_PATTERN = re.compile(
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
DEFAULT_HEADROOM = 0.10
MODELS_CHECKED_BY_HUB = "hub"   # validation context {"models": "hub"}: see TaskSpec._selector
CLIENT_CONTEXT = {"models": MODELS_CHECKED_BY_HUB}
MAX_DEPENDENCIES = 100
PLATFORM_PATTERN = re.compile(r"^[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?$")


def check_name(value: str, what: str = "name") -> str:
    """A DNS-1123 label (lowercase letters, digits, '-'), at most 63 characters."""
    if not value or len(value) > 63 or not NAME_PATTERN.match(value):
        raise ValueError(
            f"{what} {value!r} must be 1-63 lowercase letters, digits or '-', "
            "starting and ending with a letter or digit"
        )
    return value


Q = TypeVar("Q")


def _checked(parse: Callable[[Any], object], value: Q, what: str) -> Q:
    """Run a quantity parser for its check only (pydantic names the field in the error)."""
    try:
        parse(value)
    except FuyaoError as exc:
        message = exc.message.split(": ", 1)[-1] if ": " in exc.message else exc.message
        raise ValueError(message) from exc
    return value


def check_platform(value: str) -> str:
    """An OCI platform ``os/arch[/variant]`` such as ``linux/amd64`` or ``linux/arm64/v8``."""
    if len(value) > 63 or not PLATFORM_PATTERN.match(value):
        raise ValueError(f"image platform {value!r} must look like os/arch, e.g. linux/amd64")
    return value


LABEL_VALUE_PATTERN = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
MAX_LABELS = 64
MAX_COMMAND_ARGS = 256
MAX_COMMAND_BYTES = 64 * 1024
MAX_IMAGE_CHARS = 1024
MAX_SELECTOR_CHARS = 4096


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes label key (None if it is one): an optional DNS
    subdomain prefix of at most 253 characters and '/', then a name of at most 63."""
    prefix, _, name = key.rpartition("/")
    if not LABEL_KEY_PATTERN.match(key) or len(name) > 63 or len(prefix) > 253:
        return (f"label key {key[:80]!r} is not a valid label key (an optional DNS prefix "
                "and '/', then at most 63 letters, digits, '-', '_' or '.', alphanumeric at "
                "both ends)")
    return None


def label_value_problem(key: str, value: str) -> str | None:
    """Why ``value`` is not a Kubernetes label value (None if it is one)."""
    if len(value) > 63 or not LABEL_VALUE_PATTERN.match(value):
        return (f"label {key[:80]}: value {value[:80]!r} must be at most 63 letters, digits, "
                "'-', '_' or '.', starting and ending with a letter or digit (or empty)")
    return None


def check_labels(labels: dict[str, str]) -> dict[str, str]:
    """Label keys and values as Kubernetes validates them; at most 64 labels."""
    if len(labels) > MAX_LABELS:
        raise ValueError(f"at most {MAX_LABELS} labels, got {len(labels)}")
    for key, value in labels.items():
        problem = label_key_problem(key) or label_value_problem(key, value)
        if problem:
            raise ValueError(problem)
    return labels


class TaskState(StrEnum):
    """Task lifecycle, as DESIGN.md names it."""

    QUEUED = "Queued"
    PLACED = "Placed"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"

    @property
    def terminal(self) -> bool:
        """True once the task can never run again."""
        return self in (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED)


class ClusterState(StrEnum):
    """Cluster lifecycle, as DESIGN.md names it (``Cordoned`` is shown when an operator cordons)."""

    JOINING = "Joining"
    READY = "Ready"
    UNKNOWN = "Unknown"
    NOT_READY = "NotReady"
    CORDONED = "Cordoned"


@dataclass(frozen=True, slots=True)
class TaskRequests:
    """One replica's requests in fixed units, as placement and the member scheduler read them."""

    cpu_milli: int
    memory_mib: int
    gpu_milli: int
    gpu_memory_mib: int
    replicas: int
    gpu_mem_mib: int = 0    # memory of one shared device (GPU memory sharing), 0 if not

    @property
    def shares_memory(self) -> bool:
        """True when the task asks for an amount of one device's memory (``gpu_mem``)."""
        return self.gpu_mem_mib > 0

    @property
    def gpu_devices(self) -> int:
        """Whole devices one replica needs (a share of one card counts as one device)."""
        return 0 if self.gpu_milli == 0 else max(1, self.gpu_milli // 1000)


Quantity = str | int | float


FailoverPolicy = Literal["restart-elsewhere", "never"]
FAILOVER_RESTART: FailoverPolicy = "restart-elsewhere"
FAILOVER_NEVER: FailoverPolicy = "never"


class ClusterPreference(BaseModel):
    """A preferred set of clusters (a selector over cluster labels) and its weight."""

    model_config = ConfigDict(extra="forbid")

    selector: str = Field(max_length=1000)
    weight: int = Field(default=1, ge=1, le=100)


class TaskSpec(BaseModel):
    """A task as a user submits it (YAML file, CLI flags, REST body, SDK call)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    image: str = "busybox:1.36"
    command: list[str] = Field(default_factory=list)
    cpu: Quantity = "1"
    memory: Quantity = "1Gi"
    gpu: Quantity = 0
    gpu_model: str | None = Field(
        default=None, description="a model (A100), a set (A100|H100) or a bound (>=A100)"
    )
    gpu_memory: Quantity | None = Field(default=None, description="minimum memory per device")
    gpu_mem: Quantity | None = Field(
        default=None, description="GPU memory sharing: this much of one device's memory "
                                  "(8Gi); gpu may add a compute share below 1")
    selector: str | None = Field(default=None, description="node selector expression")
    queue: str = "default"
    priority: int = Field(default=0, ge=-1_000_000, le=1_000_000)
    replicas: int = Field(default=1, ge=1, le=10_000)
    duration: Quantity | None = Field(
        default=None, description="sim members: how long it runs (30s, 5m); none = until cancelled"
    )
    labels: dict[str, str] = Field(default_factory=dict)
    failover: FailoverPolicy = Field(
        default=FAILOVER_RESTART,
        description="when its cluster is lost: re-place it (after the member stopped it) "
                    "or leave it running there",
    )
    profile: str | None = Field(default=None, description="ComputeProfile it is built from")
    profile_version: int | None = Field(
        default=None, ge=1, description="set by the hub: the version of ``profile`` applied")
    gang: bool = Field(default=False, description="all replicas in one cluster or none")
    after: list[str] = Field(default_factory=list, max_length=MAX_DEPENDENCIES,
                             description="tasks that must succeed before this one starts")
    image_platforms: list[str] = Field(default_factory=list, max_length=16,
                                       description="os/arch the image runs on: linux/amd64")
    cluster_selector: str | None = Field(default=None, max_length=1000,
                                         description="required cluster labels (a selector)")
    cluster_preference: list[ClusterPreference] = Field(default_factory=list, max_length=16)
    score_weights: dict[str, float] = Field(
        default_factory=dict, max_length=16,
        description="placement score weights by plugin, e.g. {Headroom: 0, Pack: 3}")
    tolerations: list[Toleration] = Field(default_factory=list, max_length=32,
                                          description="cluster taints the task tolerates")
    preemptible: bool = Field(
        default=True, description="false: never evicted to make room for another task")
    spread: Spread = Field(default="aggregated", description="gang: false: how replicas are "
                           "divided across clusters (aggregated: fewest clusters; weighted)")
    spread_weights: dict[str, int] = Field(
        default_factory=dict, max_length=MAX_SPREAD_WEIGHTS,
        description="spread: weighted: static weight per cluster name")
    spread_dynamic: bool = Field(default=False, description="spread: weighted by how many "
                                 "replicas each cluster can take now")
    min_replicas: int | None = Field(default=None, ge=1, le=10_000,
                                     description="runs once this many replicas run")

    @field_validator("spread_weights")
    @classmethod
    def _spread_weights(cls, value: dict[str, int]) -> dict[str, int]:
        for cluster, weight in value.items():
            check_name(cluster, "cluster")
            check_weight(cluster, weight)
        return value

    @model_validator(mode="after")
    def _division(self) -> TaskSpec:
        check_division(gang=self.gang, replicas=self.replicas, spread=self.spread,
                       weights=self.spread_weights, dynamic=self.spread_dynamic,
                       min_replicas=self.min_replicas)
        return self

    @field_validator("name", "queue")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value)

    @field_validator("profile")
    @classmethod
    def _profile(cls, value: str | None) -> str | None:
        return None if value is None else check_name(value, "profile name")

    @field_validator("after")
    @classmethod
    def _after(cls, value: list[str]) -> list[str]:
        for name in value:
            check_name(name, "dependency")
        if len(set(value)) != len(value):
            raise ValueError("a dependency is listed twice")
        return value

    @field_validator("score_weights")
    @classmethod
    def _weights(cls, value: dict[str, float]) -> dict[str, float]:
        for name, weight in value.items():
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]{0,63}", name):
                raise ValueError(f"{name!r} is not a plugin name")
            if not 0 <= weight <= 1000:
                raise ValueError(f"{name}: weight {weight} must be in 0..1000")
        return value

    @field_validator("image_platforms")
    @classmethod
    def _platforms(cls, value: list[str]) -> list[str]:
        return [check_platform(v) for v in value]

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        return check_labels(value)

    @field_validator("cpu")
    @classmethod
    def _cpu(cls, value: Quantity) -> Quantity:
        return _checked(parse_cpu_milli, value, "cpu")

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: Quantity) -> Quantity:
        return _checked(parse_memory_mib, value, "memory")

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, value: Quantity) -> Quantity:
        return _checked(parse_gpu_milli, value, "gpu")

    @field_validator("gpu_memory")
    @classmethod
    def _gpu_memory(cls, value: Quantity | None) -> Quantity | None:
        return None if value is None else _checked(parse_memory_mib, value, "gpu_memory")

    @field_validator("gpu_mem")
    @classmethod
    def _gpu_mem(cls, value: Quantity | None) -> Quantity | None:
        if value is None:
            return None
        _checked(parse_memory_mib, value, "gpu_mem")
        if parse_memory_mib(value) <= 0:
            raise ValueError("must be more than 0")
        return value

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: Quantity | None) -> Quantity | None:
        return None if value is None else _checked(parse_duration, value, "duration")

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("image must not be empty")
        if len(value) > MAX_IMAGE_CHARS or any(c.isspace() or not c.isprintable()
                                                for c in value):
            raise ValueError(f"image must be at most {MAX_IMAGE_CHARS} characters without "
                             "spaces or control characters")
        return value

    @field_validator("cpu", "memory", "gpu", "gpu_memory", "gpu_mem", "duration", mode="before")
    @classmethod
    def _not_bool(cls, value: object) -> object:
        if isinstance(value, bool):   # JSON true would otherwise read as 1
            raise ValueError(f"{str(value).lower()} is not a quantity (e.g. 500m, 4, 16Gi)")
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str]) -> list[str]:
        size = sum(len(arg.encode()) for arg in value)
        if len(value) > MAX_COMMAND_ARGS or size > MAX_COMMAND_BYTES:
            raise ValueError(f"command must have at most {MAX_COMMAND_ARGS} arguments and "
                             f"{MAX_COMMAND_BYTES} bytes in all (got {len(value)}, {size})")
        return value

    @field_validator("selector", "gpu_model")
    @classmethod
    def _bounded_text(cls, value: str | None) -> str | None:
        if value is not None and len(value) > MAX_SELECTOR_CHARS:
            raise ValueError(f"at most {MAX_SELECTOR_CHARS} characters")
        return value

    @model_validator(mode="after")
    def _shared_memory(self) -> TaskSpec:
        if self.gpu_mem is not None and parse_gpu_milli(self.gpu) >= 1000:
            raise ValueError("gpu_mem asks for part of one device's memory: gpu must be 0 or "
                             "a compute share below 1 (0.25, 250m)")
        return self

    @model_validator(mode="after")
    def _selector(self, info: ValidationInfo) -> TaskSpec:
        from fuyao.selector import CATALOG_PROBLEMS, parse_selector

        try:
            try:
                parse_selector(self.effective_selector())
            except FuyaoError as exc:
                # The client (fuyaoctl, SDK) knows only the built-in catalog; the hub's
                # operator may have added models: it leaves ranking them to the hub.
                if (info.context or {}).get("models") != MODELS_CHECKED_BY_HUB \
                        or not any(p in exc.message for p in CATALOG_PROBLEMS):
                    raise
            for text in (self.cluster_selector or "",
                         *(p.selector for p in self.cluster_preference)):
                parse_selector(text)
        except FuyaoError as exc:
            raise ValueError(exc.message) from exc
        return self

    def requests(self) -> TaskRequests:
        """Per-replica requests in fixed units."""
        return TaskRequests(
            cpu_milli=parse_cpu_milli(self.cpu),
            memory_mib=parse_memory_mib(self.memory),
            gpu_milli=parse_gpu_milli(self.gpu),
            gpu_memory_mib=0 if self.gpu_memory is None else parse_memory_mib(self.gpu_memory),
            replicas=self.replicas,
            gpu_mem_mib=0 if self.gpu_mem is None else parse_memory_mib(self.gpu_mem),
        )

    def duration_seconds(self) -> float:
        """Run time for sim members; 0 means until cancelled."""
        return 0.0 if self.duration is None else parse_duration(self.duration)

    def effective_selector(self) -> str:
        """The node selector the task needs: ``selector``, ``gpu_model`` and the
        architectures of ``image_platforms`` joined with ','."""
        parts = [self.selector.strip()] if self.selector and self.selector.strip() else []
        if self.image_platforms:
            arches = sorted({p.split("/")[1] for p in self.image_platforms})
            parts.append(f"kubernetes.io/arch in ({', '.join(arches)})")
        if self.gpu_model:
            model = self.gpu_model.strip()
            if model.startswith((">=", "<=", ">", "<", "=", "!=")):
                parts.append(f"fuyao.io/gpu-model {model}")
            elif "|" in model:
                names = ", ".join(m.strip() for m in model.split("|"))
                parts.append(f"fuyao.io/gpu-model in ({names})")
            else:
                parts.append(f"fuyao.io/gpu-model = {model}")
        return ", ".join(parts)


class TaskBatch(BaseModel):
    """Several tasks submitted at once: all are stored, or none."""

    model_config = ConfigDict(extra="forbid")

    tasks: list[TaskSpec] = Field(min_length=1, max_length=10_000)


class TaskEvent(BaseModel):
    """One line of a task's timeline."""

    at: datetime
    kind: str
    message: str
    cluster: str | None = None
    generation: int = 0


class ClusterScore(BaseModel):
    """How one cluster fared for a task in the last placement cycle."""

    cluster: str
    feasible: bool
    score: float | None = None
    reason: str | None = None
    plugin_scores: dict[str, float] = Field(default_factory=dict)


class TaskPart(BaseModel):
    """One cluster's part of a task divided across clusters (a workload there)."""

    name: str
    cluster: str | None = None
    replicas: int
    state: TaskState
    generation: int = 0


class TaskView(BaseModel):
    """A task as the API shows it."""

    id: str
    name: str
    state: TaskState
    cluster: str | None = None
    node: str | None = None
    generation: int = 0
    queue: str = "default"
    priority: int = 0
    message: str = ""
    spec: TaskSpec
    owner: str = Field(default="", description="the API token that submitted it")
    created_at: datetime
    updated_at: datetime
    reasons: dict[str, str] = Field(
        default_factory=dict, description="when Queued: why each cluster was rejected"
    )
    scores: list[ClusterScore] = Field(default_factory=list)
    events: list[TaskEvent] = Field(default_factory=list)
    eviction_rate: float | None = Field(
        default=None, description="failover: at most this many tasks/s re-placed per lost cluster"
    )
    queue_position: int | None = Field(
        default=None, description="when Queued: 1 = next of its queue to be tried")
    held_by: str | None = Field(
        default=None, description="when Queued: the queue quota holding it, if one is, or "
        "'parked: ...' when no cluster could take it even with nothing running")
    parts: list[TaskPart] = Field(
        default_factory=list, description="divided across clusters: one part per workload")
    parent: str | None = Field(default=None, description="a part: the divided task's name")

    @field_validator("spec", mode="wrap")
    @classmethod
    def _spec_as_given(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> TaskSpec:
        """A ``TaskSpec`` is taken as it is: it was validated when it was made, and
        pydantic would otherwise run its model validators again for every view holding it
        (the hub builds one view per task of a submit's answer). Anything else - the SDK
        reading a view's JSON - is validated in full."""
        if type(value) is TaskSpec:
            return value
        out: TaskSpec = handler(value)
        return out


class JoinRequest(BaseModel):
    """``fuyaoctl cluster join``: register a cluster name and get a one-time join token."""

    model_config = ConfigDict(extra="forbid")

    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    weight: int = Field(default=1, ge=0, le=1000)
    headroom: float = Field(default=DEFAULT_HEADROOM, ge=0.0, lt=1.0)
    token_ttl_seconds: int = Field(default=24 * 3600, ge=60, le=30 * 24 * 3600)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "cluster name")

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        return check_labels(value)


class JoinResponse(BaseModel):
    """Shown once: the token is never stored in clear and cannot be shown again."""

    cluster: str
    token: str
    expires_at: datetime
    agent_command: str
    ca_cert: str | None = Field(
        default=None, description="PEM of the hub's CA: the agent verifies the hub with it"
    )


class ClusterView(BaseModel):
    """A member cluster as the API shows it."""

    name: str
    state: ClusterState
    labels: dict[str, str]
    weight: int
    headroom: float
    cordoned: bool = False
    last_heartbeat: datetime | None = None
    joined_at: datetime | None = None
    backend: str | None = None
    nodes: int = 0
    gpus: dict[str, int] = Field(default_factory=dict, description="devices per model")
    mode: str = Field(default="pull", description="pull: its agent dials in; push: the hub "
                      "runs its agent with its API credentials")
    gpus_unschedulable: dict[str, int] = Field(
        default_factory=dict, description="of those, devices on cordoned or NotReady nodes")
    tasks: int = Field(default=0, description="tasks placed or running here")
    taints: list[Taint] = Field(default_factory=list, description="only tolerating tasks")


class CapacityRow(BaseModel):
    """Capacity of one cluster's nodes of one accelerator model ("none" for CPU-only nodes).

    ``reserved`` is the headroom kept free for failover; ``free`` = total - allocated -
    reserved, never below zero. CPU is in cores, memory in GiB. Nodes that are cordoned or
    NotReady count in the total (as ``kubectl`` shows them) but never in free: what they
    leave idle is ``unschedulable``, and the reserve is a fraction of the other nodes' total.
    """

    cluster: str
    model: str
    nodes: int
    devices_total: int
    devices_allocated: float
    devices_reserved: float
    devices_free: float
    cpu_total: float
    cpu_allocated: float
    cpu_reserved: float
    cpu_free: float
    memory_total_gib: float
    memory_allocated_gib: float
    memory_reserved_gib: float
    memory_free_gib: float
    devices_unschedulable: float = Field(
        default=0.0, description="idle devices on cordoned or NotReady nodes (never free)")
    cpu_unschedulable: float = 0.0
    memory_unschedulable_gib: float = 0.0
    gpu_memory_total_gib: float = Field(default=0.0, description="device memory of the model")
    gpu_memory_allocated_gib: float = Field(
        default=0.0, description="device memory in use (a share uses its part of a device)")
    gpu_memory_free_gib: float = 0.0


class AuditEntry(BaseModel):
    """One audited mutation: who did what to what, when, and how it ended."""

    id: int
    at: datetime
    actor: str = Field(description="token name, 'system' (the hub itself) or 'agent:<cluster>'")
    role: str = ""
    action: str = Field(description="e.g. cluster.join, task.submit, task.cancel")
    target: str
    result: str = Field(description="'ok[, notes]', 'refused: <reason>' or 'error: <kind>'")
    source: str = Field(default="", description="the caller's address")
    request_id: str = ""


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    """The JSON shape of every REST error: ``{"error": {"code", "message", "details"}}``."""
    body: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        body["details"] = details
    return {"error": body}
