"""Answers to "where would it go?" and "why does it wait?": the dry-run and explain views.

The hub builds them (``hub.explain.report``) for ``POST /api/v1/tasks:dry-run`` and
``GET /api/v1/tasks/{name}/explain``; the SDK parses them and the CLI renders them
(``fuyaoctl task submit --dry-run``, ``fuyaoctl task explain``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ClusterScores(BaseModel):
    """A feasible cluster's weighted total and each score plugin's 0..100 score."""

    total: float
    plugins: dict[str, float] = Field(default_factory=dict)


class NearestFit(BaseModel):
    """The smallest change to the request that the scheduler would place now, and where."""

    change: dict[str, Any] = Field(description="the fields to change, e.g. {\"gpu\": 4}")
    description: str
    cluster: str
    nodes: list[str] = Field(default_factory=list)
    cost: float = Field(description="share of the request given up (a model change: 0.5)")


class DryRunView(BaseModel):
    """Where a task would go now (``cluster`` None: nowhere, with ``error`` and why)."""

    name: str
    cluster: str | None = None
    nodes: list[str] = Field(default_factory=list)
    model: str | None = None
    scores: dict[str, ClusterScores] = Field(default_factory=dict)
    reasons: dict[str, str] = Field(default_factory=dict, description="cluster -> rejection")
    error: str | None = None
    histogram: dict[str, int] = Field(default_factory=dict)
    held: str | None = Field(default=None, description="why it would wait (dependencies)")
    nearest_fit: NearestFit | None = None
    alternatives: list[NearestFit] = Field(default_factory=list)


class CatalogModel(BaseModel):
    """One accelerator model of the hub's catalog."""

    name: str
    vendor: str
    kind: str
    rank: int | None = None
    memory_gib: float = 0
    aliases: list[str] = Field(default_factory=list, description="raw strings mapped to it")


class CatalogView(BaseModel):
    """``fuyaoctl catalog``: every model (GPUs then NPUs, by rank) and the alias table."""

    models: list[CatalogModel]
    aliases: dict[str, str] = Field(default_factory=dict)


class ExplainView(BaseModel):
    """Why a task waits (or where it went): Karmada's reason histogram, the queue state,
    per-plugin scores of the clusters that fit, and the nearest fit."""

    task: str
    state: str
    message: str = ""
    cluster: str | None = None
    node: str | None = None
    summary: str = Field(default="", description="'0/5 clusters are available: ...'")
    histogram: dict[str, int] = Field(default_factory=dict)
    reasons: dict[str, str] = Field(default_factory=dict)
    scores: dict[str, ClusterScores] = Field(default_factory=dict)
    queue: dict[str, Any] = Field(default_factory=dict)
    dependencies: dict[str, str] = Field(default_factory=dict)
    held: str | None = None
    profile: dict[str, Any] | None = None
    nearest_fit: NearestFit | None = None
    alternatives: list[NearestFit] = Field(default_factory=list)
