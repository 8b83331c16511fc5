"""Queue models shared by the hub (``hub.queueing``), the SDK and the CLI.

A queue has a priority level, a fair-share weight, quotas per resource (fleet-wide and per
cluster) and a borrow limit per resource. Resource names:

- ``cpu`` (cores, ``64``, ``500m``), ``memory`` (``256Gi``), ``gpu`` (devices of any model,
  ``8``, ``0.5``), ``gpu.<MODEL>`` (devices of one catalog model, ``gpu.A100``),
  ``gpu-memory`` (device memory, ``640Gi``).

Quantities are checked at construction (a bad or negative one fails before anything is
stored) and kept as the user wrote them; ``parse_resource`` turns one into fixed units
(cpu milli, memory MiB, gpu milli, gpu-memory MiB) and ``format_resource`` back.
"""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

from fuyao.errors import FuyaoError, InvalidInput
from fuyao.quantity import (
    format_cpu,
    format_mib,
    parse_cpu_milli,
    parse_gpu_milli,
    parse_memory_mib,
)
from fuyao.spec import Quantity, check_name

DEFAULT_QUEUE = "default"
PLAIN_RESOURCES = ("cpu", "memory", "gpu", "gpu-memory")
MAX_RESOURCES = 32        # entries per quota map
MAX_CLUSTER_QUOTAS = 256  # clusters with their own quota
MODEL_PATTERN = r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,62}$"


def check_resource(name: str) -> str:
    """``cpu``, ``memory``, ``gpu``, ``gpu-memory`` or ``gpu.<MODEL>``; InvalidInput if not."""
    if name in PLAIN_RESOURCES:
        return name
    if name.startswith("gpu.") and re.match(MODEL_PATTERN, name[4:]):
        return name
    raise InvalidInput(f"unknown resource {name!r}: use one of cpu, memory, gpu, gpu-memory "
                       "or gpu.<MODEL> (e.g. gpu.A100)")


def parse_resource(name: str, value: Quantity) -> int:
    """A quantity of resource ``name`` in fixed units; InvalidInput if bad or negative."""
    check_resource(name)
    text = str(value).strip()
    if text.startswith("-"):
        raise InvalidInput(f"{name} quantity {value!r} must not be negative")
    try:
        if name == "cpu":
            return parse_cpu_milli(value)
        if name in ("memory", "gpu-memory"):
            return parse_memory_mib(value)
        return parse_gpu_milli(value)
    except FuyaoError as exc:
        raise InvalidInput(f"{name}: {exc.message}") from exc


def format_resource(name: str, amount: int) -> str:
    """Fixed units back to a human quantity (``gpu`` 8000 -> ``8``)."""
    if name == "cpu":
        return format_cpu(amount)
    if name in ("memory", "gpu-memory"):
        return format_mib(amount)
    return format_cpu(amount)   # devices in milli: the same shape as cpu cores


def _check_map(value: dict[str, Quantity], what: str) -> dict[str, Quantity]:
    if len(value) > MAX_RESOURCES:
        raise ValueError(f"{what}: at most {MAX_RESOURCES} resources")
    for key, amount in value.items():
        try:
            parse_resource(key, amount)
        except InvalidInput as exc:
            raise ValueError(exc.message) from exc
    return value


class QueueSpec(BaseModel):
    """A queue as a user creates it (``fuyaoctl queue create``, ``POST /api/v1/queues``)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    priority: int = Field(default=0, ge=-1_000_000, le=1_000_000,
                          description="level: higher levels are served strictly first")
    weight: int = Field(default=1, ge=1, le=1000, description="fair-share weight in its level")
    quotas: dict[str, Quantity] = Field(default_factory=dict,
                                        description="resource -> most it may use, fleet-wide")
    cluster_quotas: dict[str, dict[str, Quantity]] = Field(
        default_factory=dict, description="cluster -> resource -> most it may use there")
    borrow: dict[str, Quantity] = Field(
        default_factory=dict, description="resource -> how far above its quota it may go "
                                          "with other queues' idle quota")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "queue name")

    @field_validator("quotas")
    @classmethod
    def _quotas(cls, value: dict[str, Quantity]) -> dict[str, Quantity]:
        return _check_map(value, "quotas")

    @field_validator("borrow")
    @classmethod
    def _borrow(cls, value: dict[str, Quantity]) -> dict[str, Quantity]:
        return _check_map(value, "borrow")

    @field_validator("cluster_quotas")
    @classmethod
    def _cluster_quotas(
        cls, value: dict[str, dict[str, Quantity]],
    ) -> dict[str, dict[str, Quantity]]:
        if len(value) > MAX_CLUSTER_QUOTAS:
            raise ValueError(f"cluster_quotas: at most {MAX_CLUSTER_QUOTAS} clusters")
        for cluster, quotas in value.items():
            check_name(cluster, "cluster name")
            _check_map(quotas, f"cluster_quotas.{cluster}")
        return value


class QueueUpdate(BaseModel):
    """Fields to change on a queue (``queue update``); a map given replaces the old one."""

    model_config = ConfigDict(extra="forbid")

    priority: int | None = Field(default=None, ge=-1_000_000, le=1_000_000)
    weight: int | None = Field(default=None, ge=1, le=1000)
    quotas: dict[str, Quantity] | None = None
    cluster_quotas: dict[str, dict[str, Quantity]] | None = None
    borrow: dict[str, Quantity] | None = None

    @field_validator("quotas", "borrow")
    @classmethod
    def _maps(cls, value: dict[str, Quantity] | None) -> dict[str, Quantity] | None:
        return None if value is None else _check_map(value, "quotas")

    @field_validator("cluster_quotas")
    @classmethod
    def _cluster_quotas(
        cls, value: dict[str, dict[str, Quantity]] | None,
    ) -> dict[str, dict[str, Quantity]] | None:
        return None if value is None else QueueSpec._cluster_quotas(value)


class QueueView(BaseModel):
    """A queue as the API shows it: its settings, what it uses now and its fair share."""

    name: str
    priority: int
    weight: int
    quotas: dict[str, str] = Field(default_factory=dict)
    cluster_quotas: dict[str, dict[str, str]] = Field(default_factory=dict)
    borrow: dict[str, str] = Field(default_factory=dict)
    usage: dict[str, str] = Field(default_factory=dict,
                                  description="resource -> in use by its placed/running tasks")
    cluster_usage: dict[str, dict[str, str]] = Field(default_factory=dict)
    dominant_share: float = Field(
        default=0.0, description="its largest share of any fleet resource now (0..1)")
    fair_share: float = Field(
        default=0.0, description="weight / sum of the weights of the active queues of its level")
    queued: int = 0
    admitted: int = Field(default=0, description="tasks Placed or Running")
    created_at: datetime | None = None
    updated_at: datetime | None = None
