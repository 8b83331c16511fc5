"""One quantity parser: Fuyao's agrees with the ``kubernetes`` client's on every input.

The kube backend reads node allocatable and pod requests with ``fuyao.quantity``; if it
disagreed with Kubernetes' own reading, the node view would be wrong. Fuyao is stricter in
three ways only, each asserted: negative values, values above ``MAX_QUANTITY`` and exponents
with more than three digits are refused (nothing Fuyao counts is negative or that large).
"""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity as kube_parse

from fuyao.errors import InvalidInput
from fuyao.quantity import MAX_QUANTITY, parse_quantity

SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
numbers = st.one_of(
    st.integers(min_value=0, max_value=10**7).map(str),
    st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False,
                allow_infinity=False).map(str),
    st.builds(lambda m, e: f"{m}e{e}", st.integers(0, 999), st.integers(-6, 6)),
)
well_formed = st.builds(lambda n, s: n + s, numbers, st.sampled_from(SUFFIXES))
anything = st.one_of(well_formed, st.text(alphabet="0123456789.eEKkMmGgiu+- ", max_size=8))


def kube(text: str) -> Decimal | None:
    try:
        return Decimal(kube_parse(text))
    except ValueError:
        return None


def ours(text: str) -> Decimal | None:
    try:
        return parse_quantity(text)
    except InvalidInput:
        return None


@settings(max_examples=400, deadline=None)
@given(well_formed)
def test_well_formed_quantities_read_the_same(text: str) -> None:
    theirs = kube(text)
    assert theirs is not None
    if theirs <= MAX_QUANTITY:
        assert ours(text) == theirs
    else:
        assert ours(text) is None


@settings(max_examples=600, deadline=None)
@given(anything)
def test_what_kubernetes_refuses_fuyao_refuses(text: str) -> None:
    theirs, mine = kube(text.strip()), ours(text)
    if theirs is None:
        assert mine is None, text
    elif mine is None:  # stricter only where documented
        assert theirs < 0 or theirs > MAX_QUANTITY or "e" in text.lower(), text
    else:
        assert mine == theirs, text
