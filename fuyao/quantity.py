"""Kubernetes-style quantities: ``500m``, ``4``, ``16Gi``, ``40G``, ``1.5``.

The grammar and suffixes are Kubernetes' own (``n u m "" k M G T P E``, ``Ki .. Ei``, decimal
exponents), checked against the ``kubernetes`` client's ``parse_quantity`` for all inputs
(tests/unit/test_quantity_vs_kubernetes.py). Used by the spec models (task requests), label
normalization (``gpu-memory``), the selector language and the kube backend. Every parser
raises ``InvalidInput`` with the offending text on anything negative or unparseable;
nothing is silently clamped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from functools import lru_cache, wraps

from fuyao.errors import InvalidInput

_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "K": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*([a-zA-Z]{0,2})\s*$")
_MIB = Decimal(2) ** 20
# Nothing Fuyao counts comes near this (an exabyte, 10^18 cores); it keeps every value in
# int64 on the wire and keeps Decimal arithmetic on hostile input cheap.
MAX_QUANTITY = Decimal(10) ** 18
_MAX_EXPONENT_DIGITS = 3


def parse_quantity(value: str | int | float, *, what: str = "quantity") -> Decimal:
    """Parse a quantity into a non-negative Decimal in base units (cores, bytes, count)."""
    if isinstance(value, bool):
        raise InvalidInput(f"{what}: {value!r} is not a quantity")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidInput(f"{what}: {value!r} is not a finite quantity")
        number = Decimal(str(value))
    else:
        match = _QUANTITY.match(str(value))
        if not match or match.group(2) not in _SUFFIXES:
            raise InvalidInput(f"{what}: {value!r} is not a quantity (e.g. 500m, 4, 16Gi)")
        exponent = match.group(1).lower().partition("e")[2]
        if len(exponent.lstrip("+-")) > _MAX_EXPONENT_DIGITS:
            raise InvalidInput(f"{what}: {value!r} is out of range")
        try:
            number = Decimal(match.group(1)) * _SUFFIXES[match.group(2)]
        except (InvalidOperation, ArithmeticError) as exc:
            raise InvalidInput(f"{what}: {value!r} is not a quantity") from exc
    if number < 0:
        raise InvalidInput(f"{what}: {value!r} must not be negative")
    if number > MAX_QUANTITY:
        raise InvalidInput(f"{what}: {value!r} is out of range")
    return number


INT64_MAX = 2 ** 63 - 1   # what the wire carries (millicores, milli-GPUs, MiB)
_KEPT = 4096


def _kept(parse: Callable[[str | int | float], int]) -> Callable[[str | int | float], int]:
    """``parse`` with its answers kept. The request parsers are pure and see few distinct
    values ("500m", "1Gi", 1, ...), so a placement decision or a submit need not parse
    "16Gi" with ``Decimal`` each time. Kept per type (1, 1.0 and True apart: True is still
    refused); refusals raise and are not kept; at most ``_KEPT`` answers, so hostile variety
    cannot grow memory; anything but a str, int or float is parsed (and refused) as ever."""
    cached = lru_cache(maxsize=_KEPT, typed=True)(parse)

    @wraps(parse)
    def kept(value: str | int | float) -> int:
        if isinstance(value, str | int | float):
            return cached(value)
        return parse(value)

    return kept


def _wire_int(value: Decimal, what: str, shown: str | int | float) -> int:
    number = int(value.to_integral_value(rounding="ROUND_CEILING"))
    if number > INT64_MAX:
        raise InvalidInput(f"{what}: {shown!r} is out of range")
    return number


@_kept
def parse_cpu_milli(value: str | int | float) -> int:
    """CPU in millicores: ``"500m"`` -> 500, ``2`` -> 2000, ``"1.5"`` -> 1500 (at most what
    an int64 holds: about 9.2e15 cores)."""
    return _wire_int(parse_quantity(value, what="cpu") * 1000, "cpu", value)


@_kept
def parse_memory_mib(value: str | int | float) -> int:
    """Memory in MiB, rounded up: ``"16Gi"`` -> 16384, ``"1G"`` -> 954; a bare number is bytes."""
    mib = parse_quantity(value, what="memory") / _MIB
    return int(mib.to_integral_value(rounding="ROUND_CEILING"))


def parse_memory_mib_label(value: str | int | float) -> int:
    """Memory as labels carry it: a bare number is already MiB (GFD's ``gpu.memory``)."""
    if isinstance(value, int | float) or re.fullmatch(r"\s*\d+(\.\d*)?\s*", str(value)):
        mib = parse_quantity(value, what="memory")
        return int(mib.to_integral_value(rounding="ROUND_CEILING"))
    return parse_memory_mib(value)


@_kept
def parse_gpu_milli(value: str | int | float) -> int:
    """GPUs in milli-devices: ``1`` -> 1000, ``"0.5"`` / ``"500m"`` -> 500.

    More than one device must be whole: ``1.5`` GPUs is an error.
    """
    milli = _wire_int(parse_quantity(value, what="gpu") * 1000, "gpu", value)
    if milli > 1000 and milli % 1000:
        raise InvalidInput(f"gpu: {value!r}: more than one GPU must be a whole number")
    return milli


def parse_count(value: str | int, *, what: str = "count") -> int:
    """A non-negative integer count (pods, replicas, GPUs on a node)."""
    number = parse_quantity(value, what=what)
    if number != number.to_integral_value():
        raise InvalidInput(f"{what}: {value!r} must be a whole number")
    return int(number)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(value: str | int | float) -> float:
    """Seconds from ``30``, ``"30s"``, ``"5m"``, ``"1.5h"``, ``"250ms"``."""
    if isinstance(value, bool):
        raise InvalidInput(f"duration: {value!r} is not a duration")
    if isinstance(value, int | float):
        if value < 0 or not math.isfinite(value):
            raise InvalidInput(f"duration: {value!r} must be a non-negative number of seconds")
        return float(value)
    match = _DURATION.match(value)
    if not match:
        raise InvalidInput(f"duration: {value!r} is not a duration (e.g. 30s, 5m, 1h)")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


def format_mib(mib: int) -> str:
    """Human memory: 16384 -> ``16Gi``, 1536 -> ``1536Mi``."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 and mib else f"{mib}Mi"


def format_cpu(milli: int) -> str:
    """Human CPU: 2000 -> ``2``, 500 -> ``500m``."""
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
