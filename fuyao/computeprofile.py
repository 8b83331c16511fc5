"""ComputeProfiles (openFuyao's compute templates): named, versioned request templates with
a node selector in Kubernetes' operator form.

A profile file (``fuyaoctl profile apply -f``) and the REST body (``PUT
/api/v1/profiles/{name}``) are a ``ComputeProfile``; the hub (``hub.profiles``) stores it
with a version and applies it at submit (``TaskSpec.profile``), the task's own fields
winning. Everything is checked here, on both sides: an unknown field, a template value a
task would refuse, or a selector operator on a label that cannot be compared is
``InvalidInput`` before anything is stored.
"""

from __future__ import annotations

import difflib
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fuyao.errors import FuyaoError, InvalidInput
from fuyao.selector import Requirement, Selector
from fuyao.spec import TaskSpec, check_name

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", ">=", "<="]
OPERATORS: dict[str, str] = {"In": "in", "NotIn": "notin", "Exists": "exists",
                             "DoesNotExist": "!exists", "Gt": ">", "Lt": "<",
                             ">=": ">=", "<=": "<="}
"""Profile operator -> the selector language's (``fuyao.selector``)."""

NOT_TEMPLATE = frozenset({"name", "profile", "profile_version", "after"})
TEMPLATE_FIELDS = tuple(f for f in TaskSpec.model_fields if f not in NOT_TEMPLATE)
"""The task fields a profile may set (its ``template``); a task's own values win."""


class SelectorTerm(BaseModel):
    """One node-selector requirement: ``{key, operator, values}`` as Kubernetes writes it."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(max_length=253)
    operator: Operator
    values: list[str] = Field(default_factory=list, max_length=64)

    def requirement(self) -> Requirement:
        """The requirement in the selector language; ``InvalidInput`` when it makes no sense
        (wrong number of values, a value that cannot be compared, an unknown model)."""
        return Requirement(self.key, OPERATORS[self.operator], tuple(self.values))


class ComputeProfile(BaseModel):
    """What an operator applies: a name, a task template and a node selector."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = Field(default="", max_length=1000)
    template: dict[str, Any] = Field(default_factory=dict,
                                     description="task fields: gpu, cpu, gpu_model, gang, ...")
    selector: list[SelectorTerm] = Field(default_factory=list, max_length=64)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "profile name")

    @field_validator("template")
    @classmethod
    def _template(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if key not in TEMPLATE_FIELDS:
                close = difflib.get_close_matches(key, TEMPLATE_FIELDS, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"unknown field {key!r}{hint}; a template sets "
                                 f"{', '.join(TEMPLATE_FIELDS)}")
        try:
            TaskSpec.model_validate({"name": "template", **value})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"{where}: {first['msg'].removeprefix('Value error, ')}") from exc
        return value

    @field_validator("selector")
    @classmethod
    def _selector(cls, value: list[SelectorTerm]) -> list[SelectorTerm]:
        for term in value:
            try:
                term.requirement()
            except FuyaoError as exc:
                raise ValueError(exc.message) from exc
        return value

    def node_selector(self, skip: frozenset[str] = frozenset()) -> Selector:
        """The terms as one selector, leaving out requirements on the keys in ``skip``."""
        kept = [t.requirement() for t in self.selector]
        return Selector(tuple(r for r in kept if r.key not in skip))


class ProfileView(BaseModel):
    """A stored profile as the API shows it."""

    name: str
    version: int
    description: str = ""
    template: dict[str, Any] = Field(default_factory=dict)
    selector: list[SelectorTerm] = Field(default_factory=list)
    selector_text: str = Field(default="", description="the terms in the selector language")
    created_at: datetime
    updated_at: datetime
    queued_tasks: list[str] = Field(default_factory=list, description="queued tasks using it")


def parse_profile(data: Any) -> ComputeProfile:
    """A profile from a mapping; ``InvalidInput`` naming the first problem."""
    try:
        return ComputeProfile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            fields = list(ComputeProfile.model_fields)
            close = difflib.get_close_matches(where, fields, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            message, where = f"unknown field {where!r}{hint}", ""
        raise InvalidInput(f"profile: {where}: {message}" if where else f"profile: {message}"
                           ) from exc
