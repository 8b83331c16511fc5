"""A hub restarted on the same store (SQLite file or PostgreSQL) has every cluster and task."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hub.conftest import start_harness, stop_harness
from tests.support.postgres import fresh_database


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> object:
    if request.param == "sqlite":
        yield None
        return
    with fresh_database(request.getfixturevalue("pg_url")) as url:
        yield url


async def test_restart_keeps_clusters_and_tasks(tmp_path: Path, db_url: str | None) -> None:
    first = await start_harness(tmp_path / "hub", db_url=db_url)
    await first.api.post("/api/v1/clusters", json={"name": "east", "weight": 4})
    await first.api.post("/api/v1/tasks:batch", json={"tasks": [{"name": "a", "gpu": 1},
                                                                {"name": "b"}]})
    await first.api.post("/api/v1/tasks/b/cancel")
    await stop_harness(first)

    second = await start_harness(tmp_path / "hub", db_url=db_url)
    try:
        clusters = (await second.api.get("/api/v1/clusters")).json()
        assert [(c["name"], c["weight"], c["state"]) for c in clusters] == [
            ("east", 4, "Joining")]
        tasks = (await second.api.get("/api/v1/tasks")).json()
        assert [(t["name"], t["state"]) for t in tasks] == [("a", "Queued"),
                                                           ("b", "Cancelled")]
        assert "a" in {t.name for t in second.hub.tasks.active.values()}
    finally:
        await stop_harness(second)
