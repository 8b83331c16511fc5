"""ComputeProfiles in the hub: stored with a version, kept in memory, applied at submit.

``Hub`` builds one ``ProfileBook``; the REST routes in ``hub.api.profiles`` call ``apply``,
``views``, ``view`` and ``delete``; ``Hub.submit`` and the dry-run call ``resolve`` to build
each task from its profile (memory only). Applying a changed profile bumps its version;
applying the same content again changes nothing. A profile that queued tasks use cannot be
deleted (``Conflict`` naming them). Tasks record the version they were built from
(``TaskSpec.profile_version``), and keep their resolved spec whatever happens to the
profile later.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from fuyao.computeprofile import ComputeProfile, ProfileView
from fuyao.errors import Conflict, InvalidInput, NotFound
from fuyao.labels import GPU_MEMORY, GPU_MODEL
from fuyao.spec import TaskSpec, TaskState
from hub.clusters import utcnow
from hub.store.profiles import (
    ProfileRecord,
    delete_profile,
    list_profiles,
    put_profile,
)
from hub.taskbook import TaskBook
from hub.writer import StoreWriter

_OWN = frozenset({"name", "profile", "profile_version"})
_MERGED = ("labels",)   # mappings merged (the task's keys win) instead of replaced


class ProfileBook:
    """Every ComputeProfile, in memory, written through the store."""

    def __init__(self, writer: StoreWriter, tasks: TaskBook) -> None:
        self.writer = writer
        self.tasks = tasks
        self._records: dict[str, ProfileRecord] = {}

    async def load(self) -> None:
        """Read every profile (at start)."""
        records = await self.writer.read(list_profiles, self.writer.store)
        self._records = {r.name: r for r in records}

    async def apply(self, profile: ComputeProfile) -> ProfileView:
        """Create or update; the version moves only when the content changed."""
        document = profile.model_dump(mode="json", exclude={"name"})
        old = self._records.get(profile.name)
        now = utcnow()
        if old is not None:
            current = {k: v for k, v in old.document.items() if k != "version"}
            if current == document:
                return self._view(old)
            version = old.version + 1
        else:
            version = 1
        rec = ProfileRecord(
            name=profile.name, document={"version": version, **document},
            selector=str(profile.node_selector()),
            created_at=old.created_at if old is not None else now, updated_at=now)
        stored = await self.writer.call(put_profile, self.writer.store, rec)
        self._records[stored.name] = stored
        return self._view(stored)

    def views(self) -> list[ProfileView]:
        """Every profile, by name."""
        return [self._view(self._records[n]) for n in sorted(self._records)]

    def view(self, name: str) -> ProfileView:
        """One profile; NotFound if there is none."""
        return self._view(self._get(name))

    async def delete(self, name: str) -> None:
        """Delete a profile no queued task uses (Conflict naming those that do)."""
        self._get(name)
        users = self._queued_users(name)
        if users:
            shown = ", ".join(users[:20]) + (f" and {len(users) - 20} more"
                                             if len(users) > 20 else "")
            raise Conflict(f"profile {name} is used by queued tasks: {shown}")
        await self.writer.call(delete_profile, self.writer.store, name)
        self._records.pop(name, None)

    def resolve(self, spec: TaskSpec) -> TaskSpec:
        """The task built from its profile: the template, overridden by the fields the task
        set itself; the profile's selector terms ANDed with the task's selector, minus the
        terms on ``gpu-model`` / ``gpu-memory`` when the task names its own."""
        if spec.profile is None:
            return spec if spec.profile_version is None else spec.model_copy(
                update={"profile_version": None})
        rec = self._records.get(spec.profile)
        if rec is None:
            raise InvalidInput(f"task {spec.name}: profile {spec.profile!r} does not exist")
        profile = self._profile(rec)
        own = spec.model_dump(mode="json", include=spec.model_fields_set - _OWN)
        merged: dict[str, Any] = {**profile.template, **own}
        for key in _MERGED:
            merged[key] = {**profile.template.get(key, {}), **own.get(key, {})}
        skip = frozenset(k for f, k in (("gpu_model", GPU_MODEL), ("gpu_memory", GPU_MEMORY))
                         if f in own)
        parts = [str(profile.node_selector(skip)), str(merged.get("selector") or "")]
        merged["selector"] = ", ".join(p for p in parts if p.strip()) or None
        merged.update(name=spec.name, profile=rec.name, profile_version=rec.version)
        try:
            return TaskSpec.model_validate(merged)
        except ValidationError as exc:
            first = exc.errors()[0]
            raise InvalidInput(f"task {spec.name} with profile {rec.name}: "
                               f"{'.'.join(str(p) for p in first['loc'])}: "
                               f"{first['msg'].removeprefix('Value error, ')}") from exc

    def _get(self, name: str) -> ProfileRecord:
        rec = self._records.get(name)
        if rec is None:
            raise NotFound(f"profile {name!r} not found")
        return rec

    def _queued_users(self, name: str) -> list[str]:
        return sorted(t.name for t in self.tasks.active.values()
                      if t.spec.profile == name and t.state == TaskState.QUEUED)

    @staticmethod
    def _profile(rec: ProfileRecord) -> ComputeProfile:
        doc = {k: v for k, v in rec.document.items() if k != "version"}
        return ComputeProfile.model_validate({"name": rec.name, **doc})

    def _view(self, rec: ProfileRecord) -> ProfileView:
        profile = self._profile(rec)
        return ProfileView(name=rec.name, version=rec.version, description=profile.description,
                           template=profile.template, selector=profile.selector,
                           selector_text=rec.selector, created_at=rec.created_at,
                           updated_at=rec.updated_at, queued_tasks=self._queued_users(rec.name))
