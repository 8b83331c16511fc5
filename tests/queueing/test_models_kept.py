"""The device model each admitted task was placed on (``Queueing.models``): kept for every
active task, and let go of ended tasks' before they can pile up, without a scan each cycle."""

from __future__ import annotations

import pytest

from hub.queueing import queueing
from tests.hub.conftest import HubHarness
from tests.queueing.conftest import add_cluster, finish, submit, task


async def test_ended_tasks_models_are_let_go_and_active_ones_kept(
        quiet: HubHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queueing, "MODELS_SLACK", 4)
    h = quiet
    add_cluster(h, "c0", nodes=4, gpus=8)
    models = h.hub.queueing.models
    await submit(h, *({"name": f"keep{i}", "gpu": 1} for i in range(3)))
    await h.hub.placement.cycle()
    kept = {task(h, f"keep{i}").id for i in range(3)}
    assert kept <= set(models)
    most = 0
    for wave in range(6):
        names = [f"w{wave}-{i}" for i in range(5)]
        await submit(h, *({"name": name, "gpu": 1} for name in names))
        await h.hub.placement.cycle()
        for name in names:
            await finish(h, name)
        await h.hub.placement.cycle()
        most = max(most, len(models))
        assert kept <= set(models)                      # the active ones are never dropped
        assert len(models) <= 2 * len(h.hub.tasks.active) + 4 + 5
    assert most < 3 + 6 * 5                             # the ended ones did not all stay
    for task_id in kept:
        assert models[task_id] == "A100"   # as the catalog names it
