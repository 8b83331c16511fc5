"""Cluster taints and task tolerations (Kubernetes' taints, at cluster level; Karmada's
cluster taints).

An operator taints a cluster (``fuyaoctl cluster taint gpu-west dedicated=ml:NoSchedule``);
a task tolerates it (``tolerations: [{key: dedicated, operator: Equal, value: ml}]``).
``NoSchedule``: only tasks that tolerate it are placed there; ``PreferNoSchedule``: others
go there only when nothing better fits. Running tasks are never moved by a taint. The hub's
``TaintToleration`` placement plugin applies these; ``parse_taint`` reads the CLI's
``key[=value]:Effect`` form (``key:Effect-`` removes).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fuyao.errors import InvalidInput

Effect = Literal["NoSchedule", "PreferNoSchedule"]
EFFECTS: tuple[str, ...] = ("NoSchedule", "PreferNoSchedule")
_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
MAX_TAINTS = 32


def _key(value: str) -> str:
    if len(value) > 253 or not _KEY.match(value):
        raise ValueError(f"taint key {value!r} is not a valid label key")
    return value


def _value(value: str) -> str:
    if len(value) > 63 or not _VALUE.match(value):
        raise ValueError(f"taint value {value!r} is not a valid label value")
    return value


class Taint(BaseModel):
    """``key=value:effect`` on a cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    value: str = ""
    effect: Effect = "NoSchedule"

    _check_key = field_validator("key")(classmethod(lambda cls, v: _key(v)))
    _check_value = field_validator("value")(classmethod(lambda cls, v: _value(v)))

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


class Toleration(BaseModel):
    """Tolerates taints with ``key`` (and ``value`` for ``Equal``), of one effect or all."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Effect | None = Field(default=None, description="none: every effect")

    _check_key = field_validator("key")(classmethod(lambda cls, v: _key(v)))
    _check_value = field_validator("value")(classmethod(lambda cls, v: _value(v)))

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' rule: same key, same effect (or any), and Exists or an equal value."""
        if self.key != taint.key or (self.effect is not None and self.effect != taint.effect):
            return False
        return self.operator == "Exists" or self.value == taint.value


def tolerated(taint: Taint, tolerations: tuple[Toleration, ...] | list[Toleration]) -> bool:
    """True when some toleration tolerates ``taint``."""
    return any(t.tolerates(taint) for t in tolerations)


def parse_taint(text: str) -> tuple[Taint, bool]:
    """``key[=value]:Effect`` -> (taint, False); with a trailing ``-``: (taint, True) to
    remove it. ``InvalidInput`` for anything else."""
    remove = text.endswith("-")
    body = text[:-1] if remove else text
    head, sep, effect = body.rpartition(":")
    if not sep or effect not in EFFECTS:
        raise InvalidInput(f"taint {text!r} must look like key=value:NoSchedule or "
                           f"key:PreferNoSchedule (add '-' to remove)")
    key, _, value = head.partition("=")
    try:
        return Taint(key=key, value=value, effect=effect), remove  # type: ignore[arg-type]
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        raise InvalidInput(f"taint {text!r}: {message}") from exc
