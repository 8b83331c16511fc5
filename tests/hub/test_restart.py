"""A hub restarted on the same store (SQLite file or PostgreSQL) has every cluster and task."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hub.store import Store, TaskUpdate
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


OLD_FORM = [   # how scores were stored before the compact form (``hub.scorerows``)
    {"cluster": "east", "feasible": True, "score": 231.5, "reason": None,
     "plugin_scores": {"ClusterWeight": 100.0, "Headroom": 31.5}},
    {"cluster": "west", "feasible": False, "score": None,
     "reason": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", "plugin_scores": {}},
]


async def test_scores_stored_in_the_earlier_form_read_as_they_were_written(
        tmp_path: Path, db_url: str | None) -> None:
    """A store written before the compact form: a waiting task (read from the hub's
    memory after the restart) and an ended one (read from its record) show their scores."""
    first = await start_harness(tmp_path / "hub", db_url=db_url)
    await first.api.post("/api/v1/tasks:batch", json={"tasks": [{"name": "a", "gpu": 1},
                                                                {"name": "b"}]})
    await first.api.post("/api/v1/tasks/b/cancel")
    for _ in range(500):   # until the placement loop has said why ``a`` waits (and written)
        if (await first.api.get("/api/v1/tasks/a")).json()["message"]:
            break
        await asyncio.sleep(0.01)
    ids = {t["name"]: t["id"] for t in (await first.api.get("/api/v1/tasks")).json()}
    await stop_harness(first)
    store = Store(first.hub.config.store_url)   # written with the hub stopped: nothing races it
    try:
        store.apply([TaskUpdate(ids["a"], {"scores": OLD_FORM}),
                     TaskUpdate(ids["b"], {"scores": OLD_FORM[1:]})])
    finally:
        store.close()

    second = await start_harness(tmp_path / "hub", db_url=db_url)
    try:
        a = (await second.api.get("/api/v1/tasks/a")).json()
        b = (await second.api.get("/api/v1/tasks/b")).json()
        assert (a["state"], b["state"]) == ("Queued", "Cancelled")
        assert a["scores"] == OLD_FORM
        assert b["scores"] == OLD_FORM[1:]
    finally:
        await stop_harness(second)
