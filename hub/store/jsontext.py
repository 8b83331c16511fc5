"""The text the store writes for a JSON column, encoded by pydantic-core instead of ``json``.

Called only by ``hub.store.engine.create_engine`` (the engine's ``json_serializer``): every
JSON bind (a task's spec at submit, the placement scores and reasons of every placement)
goes through it on the store writer thread. ``json.dumps`` of one placement's stored scores
took 60 us at 10 clusters and 120 us at 20 (the e2e bench: about 6% of the hub's CPU);
pydantic-core's encoder (Rust, already a dependency) takes a fifth of that.

The text differs (no spaces after ``,`` and ``:``, non-ASCII kept as UTF-8) but reads back
with ``json.loads`` to the same value, floats included (both print the shortest repr; NaN
and infinities as ``json`` writes them): ``tests/store/test_json_text.py`` holds that over
arbitrary JSON values. What pydantic-core cannot encode (a lone surrogate in a string) goes
to ``json.dumps`` as before. Keys: the columns' are strings; an int, float or bool key is
written as ``json`` writes it, a ``None`` key would read back "None", not "null".
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import PydanticSerializationError, to_json


def dumps(value: Any) -> str:
    """``value`` as JSON text that ``json.loads`` reads back as ``json.dumps``'s does."""
    try:
        return to_json(value).decode()
    except PydanticSerializationError:
        return json.dumps(value)
