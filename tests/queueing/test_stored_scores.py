"""A placed task's per-cluster scores, through a real hub: written compact, shown in full."""

from __future__ import annotations

import pytest

from hub.placement.profile import DEFAULT_PROFILE
from tests.hub.conftest import HubHarness
from tests.queueing.conftest import add_cluster, submit


async def test_a_placed_task_shows_each_clusters_verdict_and_its_weighted_total(
        quiet: HubHarness) -> None:
    add_cluster(quiet, "east", 2, 8)
    add_cluster(quiet, "north", 1, 8)
    add_cluster(quiet, "west", 1, 2)
    await submit(quiet, {"name": "a", "gpu": 4})
    assert await quiet.hub.placement.cycle() == 1
    view = (await quiet.api.get("/api/v1/tasks/a")).json()
    rows = {row["cluster"]: row for row in view["scores"]}
    assert view["state"] == "Placed" and set(rows) == {"east", "north", "west"}
    weights = {entry.name: entry.weight for entry in DEFAULT_PROFILE.scores}
    for name in ("east", "north"):
        row = rows[name]
        assert row["feasible"] and row["reason"] is None
        assert list(row["plugin_scores"]) == list(weights)          # the profile's order
        assert row["score"] == pytest.approx(
            sum(weights[p] * s for p, s in row["plugin_scores"].items()))
    assert rows[view["cluster"]]["score"] == max(rows[n]["score"] for n in ("east", "north"))
    assert not rows["west"]["feasible"] and "4 free GPUs" in rows["west"]["reason"]
    assert rows["west"]["score"] is None and rows["west"]["plugin_scores"] == {}
    # the store holds the compact form: the plugin names once, then a row per cluster
    stored = quiet.hub.store.get_task("a").scores
    assert stored[0] == list(weights) and len(stored) == 4
