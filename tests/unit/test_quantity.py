"""Kubernetes-style quantities and durations (fuyao.quantity), as users write them."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuyao.errors import InvalidInput
from fuyao.quantity import (
    format_cpu,
    format_mib,
    parse_count,
    parse_cpu_milli,
    parse_duration,
    parse_gpu_milli,
    parse_memory_mib,
    parse_memory_mib_label,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("4", Decimal(4)),
        ("16Gi", Decimal(16 * 2**30)),
        ("40G", Decimal(40 * 10**9)),
        ("1.5", Decimal("1.5")),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("+2", Decimal(2)),
        ("1e3", Decimal(1000)),
        ("1e-3", Decimal("0.001")),
        ("1 Ki", Decimal(1024)),
        ("2k", Decimal(2000)),
        ("1Ti", Decimal(2**40)),
        (3, Decimal(3)),
        (2.5, Decimal("2.5")),
        ("0", Decimal(0)),
    ],
    ids=lambda v: repr(v),
)
def test_parse_quantity(text: str | int | float, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-1", "must not be negative"),
        (-3, "must not be negative"),
        ("", "is not a quantity"),
        ("abc", "is not a quantity"),
        ("1gi", "is not a quantity"),  # suffixes are case-sensitive, as in Kubernetes
        ("1Ei", "is out of range"),   # a real suffix, above MAX_QUANTITY
        ("2E", "is out of range"),
        ("1..2", "is not a quantity"),
        ("0x10", "is not a quantity"),
        (True, "is not a quantity"),
        (float("nan"), "is not a finite quantity"),
        (float("inf"), "is not a finite quantity"),
    ],
    ids=lambda v: repr(v),
)
def test_parse_quantity_rejects(text: str | int | float, message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as caught:
        parse_quantity(text, what="cpu")
    assert caught.value.message.startswith("cpu: ")


@pytest.mark.parametrize(
    ("text", "milli"),
    [("500m", 500), ("2", 2000), (1.5, 1500), ("0.0001", 1), ("250m", 250), (0, 0)],
    ids=lambda v: repr(v),
)
def test_parse_cpu_milli_rounds_up(text: str | float, milli: int) -> None:
    assert parse_cpu_milli(text) == milli


@pytest.mark.parametrize(
    ("text", "mib"),
    [("16Gi", 16384), ("1G", 954), ("1Mi", 1), ("1", 1), ("1536Mi", 1536), (0, 0),
     ("1.5Gi", 1536)],
    ids=lambda v: repr(v),
)
def test_parse_memory_mib(text: str | int, mib: int) -> None:
    assert parse_memory_mib(text) == mib


@pytest.mark.parametrize(
    ("text", "mib"),
    [("81920", 81920), (81920, 81920), (" 16 ", 16), ("80Gi", 81920), ("1024Mi", 1024)],
    ids=lambda v: repr(v),
)
def test_parse_memory_mib_label_reads_bare_numbers_as_mib(text: str | int, mib: int) -> None:
    assert parse_memory_mib_label(text) == mib


@pytest.mark.parametrize("text", ["1.5", 1.5], ids=repr)
def test_parse_memory_mib_label_fractional_bare_number_is_mib(text: str | float) -> None:
    assert parse_memory_mib_label(text) == 2


@pytest.mark.parametrize(
    ("text", "milli"),
    [(1, 1000), ("1", 1000), ("0.5", 500), ("500m", 500), ("2", 2000), (2.0, 2000),
     ("2000m", 2000), (0, 0), ("250m", 250)],
    ids=lambda v: repr(v),
)
def test_parse_gpu_milli(text: str | float, milli: int) -> None:
    assert parse_gpu_milli(text) == milli


@pytest.mark.parametrize(
    ("text", "message"),
    [("1.5", "more than one GPU must be a whole number"),
     ("2500m", "more than one GPU must be a whole number"),
     (1.0005, "more than one GPU must be a whole number"),
     ("-1", "must not be negative"),
     ("two", "is not a quantity")],
    ids=lambda v: repr(v),
)
def test_parse_gpu_milli_rejects(text: str | float, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_gpu_milli(text)


@pytest.mark.parametrize(
    ("text", "count"), [("3", 3), (3, 3), ("2.0", 2), ("1k", 1000), ("0", 0)], ids=repr
)
def test_parse_count(text: str | int, count: int) -> None:
    assert parse_count(text) == count


@pytest.mark.parametrize(
    ("text", "message"),
    [("1.5", "must be a whole number"), ("-1", "must not be negative"),
     (True, "is not a quantity"), ("500m", "must be a whole number"), ("x", "is not a quantity")],
    ids=repr,
)
def test_parse_count_rejects(text: str | int, message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as caught:
        parse_count(text, what="replicas")
    assert "replicas" in caught.value.message


def test_enormous_exponent_is_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        parse_quantity("1e1000000")


@pytest.mark.parametrize(
    "parse", [parse_cpu_milli, parse_memory_mib, parse_count], ids=lambda f: f.__name__
)
def test_absurdly_large_quantities_are_invalid_input(parse: Callable[[str], int]) -> None:
    with pytest.raises(InvalidInput):
        parse("1e30")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [(30, 30.0), (1.5, 1.5), ("30", 30.0), ("30s", 30.0), ("5m", 300.0), ("1.5h", 5400.0),
     ("250ms", 0.25), ("1d", 86400.0), ("5 m", 300.0), (" 2h ", 7200.0), ("0", 0.0)],
    ids=repr,
)
def test_parse_duration(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    ["-5s", -1, "1h30m", "5S", "five", "", True, float("inf"), float("nan"), "1e3s", "5 min"],
    ids=repr,
)
def test_parse_duration_rejects(text: str | float) -> None:
    with pytest.raises(InvalidInput, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("mib", "text"), [(16384, "16Gi"), (1536, "1536Mi"), (1024, "1Gi"), (0, "0Mi"), (1, "1Mi")],
    ids=repr,
)
def test_format_mib(mib: int, text: str) -> None:
    assert format_mib(mib) == text
    assert parse_memory_mib_label(text) == mib


@pytest.mark.parametrize(
    ("milli", "text"), [(2000, "2"), (500, "500m"), (0, "0"), (1500, "1500m")], ids=repr
)
def test_format_cpu(milli: int, text: str) -> None:
    assert format_cpu(milli) == text
    assert parse_cpu_milli(text) == milli


_VALUES = st.one_of(
    st.sampled_from(["500m", "1", "1.0", "1Gi", "16Gi", "0.5", "2", "1e3", "-1", "x", "1.5",
                     " 4 ", "1e999", ""]),
    st.booleans(), st.integers(-2, 3000), st.floats(allow_nan=True, allow_infinity=True),
    st.from_regex(r"\A[0-9]{1,4}(\.[0-9]{1,3})?(m|k|Mi|Gi|G)?\Z"),
    st.lists(st.integers(), max_size=2), st.none())


def _answer(parse: Callable[[Any], int], value: Any) -> tuple[str, Any]:
    try:
        return "ok", parse(value)
    except InvalidInput as exc:
        return "refused", exc.message
    except (TypeError, AttributeError) as exc:   # not a quantity at all: as ever
        return "error", type(exc).__name__


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["cpu", "memory", "gpu"]), _VALUES), max_size=30))
def test_kept_answers_are_the_parsers_answers_whatever_was_asked_before(
        asks: list[tuple[str, Any]]) -> None:
    """The request parsers keep their answers (``fuyao.quantity._kept``): asked in any order,
    1, 1.0 and True among them, each answer - a value or a refusal - is the plain parse's."""
    parsers = {"cpu": parse_cpu_milli, "memory": parse_memory_mib, "gpu": parse_gpu_milli}
    for kind, value in asks:
        parse = parsers[kind]
        assert _answer(parse, value) == _answer(parse.__wrapped__, value)  # type: ignore[attr-defined]


def test_true_is_refused_even_after_one_was_parsed() -> None:
    assert parse_cpu_milli(1) == 1000 and parse_gpu_milli(1.0) == 1000
    for parse in (parse_cpu_milli, parse_gpu_milli, parse_memory_mib):
        with pytest.raises(InvalidInput, match="not a quantity"):
            parse(True)
