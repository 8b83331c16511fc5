"""ComputeProfiles in the store: one ``profiles`` row per profile, its document in JSON.

``hub.profiles.ProfileBook`` calls these through the store writer (writes) and reader
(reads). The row keeps the columns the first schema gave profiles (rendered ``selector``,
``priority``, ``gang``) for SQL readers, and the whole profile in ``defaults``:
``{"version": n, "description": ..., "template": {...}, "selector": [terms]}`` - so a
version needs no schema change.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import col, select

from fuyao.errors import NotFound
from hub.store import convert
from hub.store.store import Store
from hub.store.tables import ProfileRow


@dataclass(frozen=True, slots=True)
class ProfileRecord:
    """A stored ComputeProfile: its document (``version`` included) and timestamps."""

    name: str
    document: dict[str, Any]
    selector: str
    created_at: datetime
    updated_at: datetime

    @property
    def version(self) -> int:
        """The profile's version: 1 when created, one more on each change."""
        return int(self.document.get("version", 1))


def put_profile(store: Store, rec: ProfileRecord) -> ProfileRecord:
    """Create or replace a profile (the caller sets its version); returns what is stored."""
    template = rec.document.get("template", {})
    with store._write(f"put profile {rec.name}") as s:   # the store package's own helper
        row = s.get(ProfileRow, rec.name)
        if row is None:
            row = ProfileRow(name=rec.name, created_at=convert.utc(rec.created_at, "created_at"))
        row.selector = rec.selector
        row.priority = template.get("priority")
        row.gang = bool(template.get("gang", False))
        row.defaults = dict(rec.document)
        row.updated_at = convert.utc(rec.updated_at, "updated_at")
        s.add(row)
        s.flush()
        return _record(row)


def get_profile(store: Store, name: str) -> ProfileRecord:
    """One profile; NotFound if absent."""
    with store._read(f"get profile {name}") as s:
        row = s.get(ProfileRow, name)
        if row is None:
            raise NotFound(f"profile {name!r} not found")
        return _record(row)


def list_profiles(store: Store) -> list[ProfileRecord]:
    """Every profile, by name."""
    with store._read("list profiles") as s:
        return [_record(r) for r in s.exec(select(ProfileRow).order_by(col(ProfileRow.name)))]


def delete_profile(store: Store, name: str) -> None:
    """Delete a profile; NotFound if absent."""
    with store._write(f"delete profile {name}") as s:
        row = s.get(ProfileRow, name)
        if row is None:
            raise NotFound(f"profile {name!r} not found")
        s.delete(row)


def _record(row: ProfileRow) -> ProfileRecord:
    return ProfileRecord(name=row.name, document=dict(row.defaults), selector=row.selector,
                         created_at=convert.must(row.created_at),
                         updated_at=convert.must(row.updated_at))
