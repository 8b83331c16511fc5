"""Timestamps as the store binds them: on SQLite one C call writes the text SQLAlchemy's own
DATETIME steps would (``hub.store.tables.sqlite_text``), and what is stored compares and
reads back as before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.types import TypeDecorator

from hub.store import Store
from hub.store.tables import UTCDateTime, sqlite_text

OFFSETS = st.one_of(st.none(), st.just(UTC), st.integers(-23 * 60 - 59, 23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))))


def _sqlalchemys(dialect: object) -> object:
    """SQLAlchemy's own steps for this column: the type's, then the dialect's DATETIME."""
    impl = UTCDateTime().dialect_impl(dialect)  # type: ignore[arg-type]
    return TypeDecorator.bind_processor(impl, dialect)  # type: ignore[arg-type]


@settings(max_examples=500, deadline=None)
@given(st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)), OFFSETS)
def test_the_text_is_sqlalchemys_for_every_time_and_offset(
        moment: datetime, tz: timezone | None) -> None:
    value = moment.replace(tzinfo=tz)
    assert sqlite_text(value) == _sqlalchemys(sqlite.dialect())(value)  # type: ignore[operator]


def test_the_sqlite_store_binds_with_it_and_postgresql_as_ever(tmp_path: object) -> None:
    store = Store(f"sqlite:///{tmp_path}/hub.db")
    try:
        dialect = store._engine.dialect
        assert UTCDateTime().dialect_impl(dialect).bind_processor(dialect) is sqlite_text
    finally:
        store.close()
    pg = postgresql.dialect()  # type: ignore[no-untyped-call]
    assert UTCDateTime().dialect_impl(pg).bind_processor(pg) is not sqlite_text
    assert sqlite_text(None) is None


def test_times_on_a_whole_second_compare_and_read_back(store: Store) -> None:
    """A whole second (no microseconds) and its neighbours: ``since`` keeps exactly the
    entries at or after it, each read back as it was written, in UTC."""
    second = datetime(2026, 12, 5, 17, 0, 0, tzinfo=UTC)
    times = [second - timedelta(microseconds=1), second,
             (second + timedelta(microseconds=1)).astimezone(timezone(timedelta(hours=8)))]
    for i, at in enumerate(times):
        store.audit("alice", f"act.{i}", "t", "ok", at=at)
    got = store.audit_log(since=second)
    assert [(e["action"], e["at"]) for e in got] == [("act.2", times[2].astimezone(UTC)),
                                                    ("act.1", second)]
