"""A task view holds the spec it is given, and shows what full validation would show.

``TaskView`` takes a ``TaskSpec`` as it is (pydantic would otherwise run the spec's model
validators again for every view: a submit's answer builds one per task); a spec in any
other form - a view's JSON read by the SDK - is validated in full, refusals included.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, reject
from pydantic import ValidationError

from fuyao.spec import TaskSpec, TaskState, TaskView
from tests.unit.test_stored_spec import BODIES

NOW = datetime(2026, 12, 5, 19, 30, tzinfo=UTC)


def view(spec: Any) -> TaskView:
    return TaskView(id="t-1", name="a", state=TaskState.QUEUED, spec=spec,
                    created_at=NOW, updated_at=NOW, queue_position=1)


@given(BODIES)
def test_a_view_of_a_spec_shows_what_the_validated_dump_shows(body: dict[str, Any]) -> None:
    try:
        spec = TaskSpec.model_validate(body)
    except ValidationError:
        reject()
    held = view(spec)
    assert held.spec is spec
    again = view(spec.model_dump(mode="json"))
    assert held.model_dump_json() == again.model_dump_json()
    read = TaskView.model_validate_json(held.model_dump_json())
    assert type(read.spec) is TaskSpec and read == again


def test_a_view_read_from_json_refuses_a_spec_the_hub_would_refuse() -> None:
    good = view(TaskSpec(name="a", gpu=1, selector="zone in (a, b)"))
    body = good.model_dump(mode="json")
    body["spec"]["selector"] = "zone in ("
    with pytest.raises(ValidationError, match="spec"):
        TaskView.model_validate(body)
    body["spec"] = {**good.spec.model_dump(mode="json"), "gpu": -1}
    with pytest.raises(ValidationError, match="must not be negative"):
        TaskView.model_validate(body)
