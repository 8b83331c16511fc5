"""Task ids (``hub.taskids``): random version-4 UUIDs in their usual text, a batch at once."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from fuyao.spec import TaskSpec
from hub.taskbook import submit_records
from hub.taskids import new_id, new_ids


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 300))
def test_every_id_is_a_version_4_uuid_written_as_uuid_writes_it(count: int) -> None:
    ids = new_ids(count)
    assert len(ids) == count
    assert len(set(ids)) == count
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122


def test_the_random_digits_vary_and_the_fixed_ones_do_not() -> None:
    """Over 4,000 ids every random hex digit takes many values, the variant digit each of
    its four, the version digit only 4: the bits are the randomness, not a pattern."""
    ids = [text.replace("-", "") for text in new_ids(4000)]
    for position in range(32):
        seen = {text[position] for text in ids}
        if position == 12:
            assert seen == {"4"}
        elif position == 16:
            assert seen == set("89ab")
        else:
            assert len(seen) == 16, position
    assert uuid.UUID(new_id()).version == 4


def test_a_submit_gives_each_task_its_own_id() -> None:
    specs = [TaskSpec(name=f"t{i}", cpu="1") for i in range(50)]
    records, events = submit_records(specs)
    assert len({r.id for r in records}) == 50
    assert [e.task_id for e in events] == [r.id for r in records]
