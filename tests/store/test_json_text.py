"""The store's JSON text (``hub.store.jsontext``) reads back as ``json.dumps``'s did.

Whatever a JSON column holds (a spec's dump, placement scores, reasons, labels), the text
the store writes now must load (``json.loads``, as the store reads it) to exactly the value
``json.dumps``'s text loaded to: the same types (1 stays an int, 1.0 a float), the same
floats to the last bit, the same key order.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hub.store import Store, TaskUpdate
from hub.store.jsontext import dumps
from tests.store import make

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False), st.floats(allow_nan=False, width=32),
    st.text(), st.text(st.characters(codec="utf-8")),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=5),
                            st.dictionaries(st.text(), inner, max_size=5),
                            st.tuples(inner, inner)),
    max_leaves=30,
)


def typed(value: Any) -> Any:
    """A value with each scalar's type beside it (so 1 != 1.0 and -0.0 != 0.0 here)."""
    if isinstance(value, dict):
        return ("dict", [(k, typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    if isinstance(value, float):
        return ("float", value.hex())
    return (type(value).__name__, value)


@given(VALUES)
def test_the_text_reads_back_as_json_dumps_text_did(value: Any) -> None:
    assert typed(json.loads(dumps(value))) == typed(json.loads(json.dumps(value)))


@given(st.lists(st.floats(), max_size=8))
def test_nan_and_infinities_read_back(values: list[float]) -> None:
    back, before = json.loads(dumps(values)), json.loads(json.dumps(values))
    for a, b in zip(back, before, strict=True):
        assert (math.isnan(a) and math.isnan(b)) or a.hex() == b.hex()


@pytest.mark.parametrize("value", [
    {"command": ["echo", "\ud800"]},          # a lone surrogate: json.dumps writes it
    {1: "a", 1.5: "b", False: "c"},           # keys json.dumps turns into text
    [10**40, -(10**40), 5e-324, 1e308, -0.0],
    {"é": "ü\u2028\x00"},
])
def test_odd_values_read_back_as_before(value: Any) -> None:
    assert typed(json.loads(dumps(value))) == typed(json.loads(json.dumps(value)))


SCORES = [{"cluster": "east", "feasible": True, "score": 61.34673202614379, "reason": None,
           "plugin_scores": {"Headroom": 0.1 + 0.2, "Pack": 1e-17, "Spread": 100.0}},
          {"cluster": "west", "feasible": False, "score": None, "reason": "no A100 \u00e9",
           "plugin_scores": {}}]


def test_the_store_reads_back_what_it_wrote(store: Store) -> None:
    spec = {"name": "a", "cpu": 1.5, "memory": 4096, "command": ["echo", "h\u00e9\u2028"],
            "labels": {"k": "v"}, "score_weights": {"Pack": 3.0}}
    store.add_tasks([make.task("a", spec=spec)], [])
    store.apply([TaskUpdate("id-a", {"scores": SCORES, "reasons": {"west": "full"}})])
    back = store.get_task("a")
    assert typed(back.spec) == typed(spec)
    assert typed(back.scores) == typed(SCORES)
    assert back.reasons == {"west": "full"}
