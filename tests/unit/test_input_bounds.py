"""Every input is bounded and checked as Kubernetes would: table-driven refusals with the
exact reason, and hypothesis properties for the selector, quantity and label parsers
(round trip; never an exception other than the project's own)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from fuyao.errors import FuyaoError, InvalidInput
from fuyao.quantity import format_cpu, parse_cpu_milli, parse_gpu_milli, parse_quantity
from fuyao.selector import MAX_REQUIREMENTS, parse_selector
from fuyao.spec import TaskSpec, check_labels
from fuyaoctl.taskfile import parse_task_file

PROPERTY = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(("fields", "reason"), [
    ({"cpu": True}, "true is not a quantity"),
    ({"memory": False}, "false is not a quantity"),
    ({"cpu": "9e18"}, "out of range"),
    ({"cpu": "9300000000000000"}, "out of range"),          # millicores past int64
    ({"gpu": "1e16"}, "out of range"),
    ({"labels": {"team": "a b"}}, "value 'a b' must be at most 63"),
    ({"labels": {"team": "-bad-"}}, "value '-bad-' must be at most 63"),
    ({"labels": {"team": "x" * 64}}, "must be at most 63"),
    ({"labels": {"a" * 64: "x"}}, "is not a valid label key"),
    ({"labels": {f"k{i}": "v" for i in range(65)}}, "at most 64 labels"),
    ({"command": ["x"] * 257}, "at most 256 arguments"),
    ({"command": ["x" * 70_000]}, "65536 bytes"),
    ({"image": "busybox 1.36"}, "without spaces"),
    ({"image": "x" * 1025}, "at most 1024"),
    ({"selector": "a=b," * 2000}, "at most 4096 characters"),
    ({"selector": ",".join(f"k{i}=v" for i in range(MAX_REQUIREMENTS + 1))},
     f"more than {MAX_REQUIREMENTS} requirements"),
])
def test_bad_task_fields_are_refused_with_the_reason(fields: dict[str, Any],
                                                     reason: str) -> None:
    with pytest.raises(ValidationError) as refused:
        TaskSpec.model_validate({"name": "t", **fields})
    assert reason in str(refused.value)


@pytest.mark.parametrize("labels", [{"team": ""}, {"team": "a.b_c-d"}, {"x/y": "Z9"},
                                    {"example.com/team": "a" * 63}])
def test_kubernetes_valid_labels_are_accepted(labels: dict[str, str]) -> None:
    assert TaskSpec.model_validate({"name": "t", "labels": labels}).labels == labels


def test_largest_cpu_the_wire_can_carry_is_accepted() -> None:
    assert parse_cpu_milli("9000000000000000") == 9 * 10 ** 18


def test_yaml_alias_bomb_error_does_not_echo_the_expansion() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n"
    for level in "bcdefghi":
        prev = chr(ord(level) - 1)
        bomb += f"{level}: &{level} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
    bomb += "name: t\nlabels: *i\n"
    with pytest.raises(InvalidInput) as refused:
        parse_task_file(bomb, "bomb.yaml")
    assert len(refused.value.message) < 5000      # 9 short lines, not the 6^8 expansion


# -- properties -------------------------------------------------------------------------------

KEYS = st.sampled_from(["fuyao.io/gpu-model", "fuyao.io/gpu-memory", "kubernetes.io/arch",
                        "team", "fuyao.io/gpu-count", "example.com/zone"])
VALUES = st.sampled_from(["A100", "H100", "V100", "40Gi", "80Gi", "8", "4", "amd64", "a"])
REQUIREMENT = st.one_of(
    st.builds(lambda k, op, v: f"{k} {op} {v}", KEYS, st.sampled_from(["=", "!="]), VALUES),
    st.builds(lambda k, op, vs: f"{k} {op} ({', '.join(vs)})", KEYS,
              st.sampled_from(["in", "notin"]), st.lists(VALUES, min_size=1, max_size=3)),
    st.builds(lambda k: f"{k} exists", KEYS),
    st.builds(lambda k: f"!{k}", KEYS),
)


@PROPERTY
@given(st.text(max_size=200))
def test_selector_parser_raises_only_our_error(text: str) -> None:
    with contextlib.suppress(FuyaoError):
        parse_selector(text)


@PROPERTY
@given(st.lists(REQUIREMENT, min_size=1, max_size=5))
def test_selector_round_trips_through_its_text(parts: list[str]) -> None:
    try:
        selector = parse_selector(", ".join(parts))
    except InvalidInput:
        return          # e.g. an order comparison on a value that is not a quantity
    assert parse_selector(str(selector)) == selector


@PROPERTY
@given(st.one_of(st.text(max_size=40), st.integers(), st.floats(), st.booleans()))
def test_quantity_parsers_raise_only_our_error(value: Any) -> None:
    for parse in (parse_quantity, parse_cpu_milli, parse_gpu_milli):
        with contextlib.suppress(FuyaoError):
            parse(value)


@PROPERTY
@given(st.integers(min_value=0, max_value=2 ** 63 - 1))
def test_cpu_round_trips_through_its_text(milli: int) -> None:
    assert parse_cpu_milli(format_cpu(milli)) == milli


@PROPERTY
@given(st.dictionaries(st.text(max_size=80), st.text(max_size=80), max_size=5))
def test_label_checks_raise_only_a_value_error_and_accept_what_they_return(
        labels: dict[str, str]) -> None:
    try:
        assert check_labels(labels) == labels
    except ValueError:
        return
    TaskSpec.model_validate({"name": "t", "labels": labels})   # valid here is valid there
