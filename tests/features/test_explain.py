"""``task explain`` and ``task submit --dry-run`` over REST: the histogram, scores and the
nearest fit come from the real scheduler on the live fleet; a dry-run stores nothing."""

from __future__ import annotations

from fuyao.spec import TaskSpec
from hub.activetask import placement_request
from hub.explain.whatif import alternatives
from tests.features.conftest import Fleet, gpu_node


async def two_clusters(fleet: Fleet) -> None:
    await fleet.join("east", [gpu_node("e1", "NVIDIA-A100-SXM4-80GB", 8),
                              gpu_node("e2", "NVIDIA-A100-SXM4-80GB", 8)], weight=2)
    await fleet.join("west", [gpu_node("w1", "Tesla-T4", 4), gpu_node("w2", "Tesla-V100", 8)])


async def test_dry_run_says_where_and_stores_nothing(fleet: Fleet) -> None:
    await two_clusters(fleet)
    r = await fleet.h.api.post("/api/v1/tasks:dry-run",
                               json={"name": "probe", "gpu": 1, "gpu_model": "T4"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["cluster"], body["nodes"], body["model"], body["error"]) == (
        "west", ["w1"], "T4", None)
    assert list(body["scores"]) == ["west"]
    assert set(body["scores"]["west"]["plugins"]) == {
        "ClusterWeight", "Headroom", "AcceleratorFit", "LeastOverqualified", "ClusterAffinity",
        "TaintToleration"}
    assert body["reasons"] == {"east": "no node matches fuyao.io/gpu-model=T4"}
    assert (await fleet.h.api.get("/api/v1/tasks")).json() == []
    assert fleet.h.hub.fleet.reservation("dry-run") is None


async def test_dry_run_that_fits_nowhere_has_the_error_and_a_nearest_fit(fleet: Fleet) -> None:
    await two_clusters(fleet)
    r = await fleet.h.api.post("/api/v1/tasks:dry-run",
                               json={"name": "big", "gpu": 8, "gpu_model": "A100",
                                     "replicas": 2})
    body = r.json()
    assert body["cluster"] is None
    assert body["histogram"] == {"below headroom reserve": 1,
                                 "no node matches fuyao.io/gpu-model=A100": 1}
    assert body["error"] == ("0/2 clusters are available: 1 below headroom reserve, "
                             "1 no node matches fuyao.io/gpu-model=A100.")
    assert body["nearest_fit"]["change"] == {"gpu": 7}
    assert body["nearest_fit"]["cluster"] == "east"
    changes = [alt["change"] for alt in body["alternatives"]]
    assert changes == [{"gpu": 7}, {"replicas": 1}]   # V100 x 8 x 2 does not fit


async def test_explain_a_waiting_task(fleet: Fleet) -> None:
    await two_clusters(fleet)
    api = fleet.h.api
    r = await api.post("/api/v1/tasks", json={"name": "big", "gpu": 8, "gpu_model": ">=A100",
                                             "replicas": 3})
    assert r.status_code == 201
    body = (await api.get("/api/v1/tasks/big/explain")).json()
    assert body["state"] == "Queued"
    assert body["histogram"] == {
        "no node matches fuyao.io/gpu-model>=A100": 1,
        "only 2 of 3 replicas fit on nodes with fuyao.io/gpu-model>=A100 and 8 free GPUs": 1,
    }
    assert (body["queue"]["queue"], body["queue"]["position"], body["queue"]["held_by"]) == (
        "default", 1, None)
    assert body["nearest_fit"]["change"] == {"gpu": 4}
    assert body["nearest_fit"]["description"] == "with 4 GPUs per replica instead of 8"
    assert body["scores"] == {}


async def test_explain_unknown_task_is_404(fleet: Fleet) -> None:
    r = await fleet.h.api.get("/api/v1/tasks/ghost/explain")
    assert r.status_code == 404


async def test_alternatives_use_the_real_fit_and_change_one_thing(fleet: Fleet) -> None:
    await two_clusters(fleet)
    scheduler = fleet.h.hub.scheduler
    spec = TaskSpec(name="x", gpu=4, gpu_model="H100")
    found = alternatives(scheduler, placement_request("x", spec, 0))
    assert [a.change for a in found] == [{"gpu_model": "A100"}, {"gpu_model": "V100"}]
    for alt in found:   # each one really fits: the scheduler places it
        changed = spec.model_copy(update=alt.change)
        assert scheduler.schedule(placement_request("x", changed, 0)).cluster == alt.cluster


async def test_cluster_affinity_and_score_weights_from_a_submitted_task(fleet: Fleet) -> None:
    await two_clusters(fleet)
    api = fleet.h.api
    r = await api.post("/api/v1/tasks:dry-run", json={
        "name": "x", "gpu": 1, "cluster_selector": "fuyao.io/region = nowhere"})
    body = r.json()
    assert body["cluster"] is None
    assert body["histogram"] == {"cluster labels do not match fuyao.io/region=nowhere": 2}
    r = await api.post("/api/v1/tasks", json={"name": "y", "score_weights": {"Magic": 1}})
    assert r.status_code == 400
    assert "'Magic' is not a score plugin" in r.json()["error"]["message"]
    # east has weight 2, but the task ignores cluster weights and prefers west's T4s/V100s
    r = await api.post("/api/v1/tasks:dry-run", json={
        "name": "z", "gpu": 1, "score_weights": {"ClusterWeight": 0}})
    assert r.json()["cluster"] == "west"
    r = await api.post("/api/v1/tasks:dry-run", json={
        "name": "z", "gpu": 1, "score_weights": {"LeastOverqualified": 0}})
    assert r.json()["cluster"] == "east"


async def test_a_task_held_by_its_quota_is_offered_another_queue(fleet: Fleet) -> None:
    from tests.features.conftest import until

    await two_clusters(fleet)
    api = fleet.h.api
    r = await api.post("/api/v1/queues", json={"name": "team-a", "quotas": {"gpu": "1"}})
    assert r.status_code == 201, r.text
    r = await api.post("/api/v1/tasks", json={"name": "wide", "queue": "team-a", "gpu": 2})
    assert r.status_code == 201, r.text
    await until(lambda: fleet.h.hub.queueing.hold_for(
        fleet.h.hub.tasks.by_name("wide")) is not None  # type: ignore[arg-type]
        and fleet.h.hub.queueing.hold_for(
            fleet.h.hub.tasks.by_name("wide"))["held_by"] is not None)  # type: ignore[arg-type,index]
    body = (await api.get("/api/v1/tasks/wide/explain")).json()
    assert body["queue"]["held_by"] == ("queue team-a: gpu quota 1, in use 0; the task asks 2, "
                                        "more than the quota allows")
    assert body["nearest_fit"]["change"] == {"queue": "default"}
    # ... or, in its own queue, the most its quota admits now (the quota's own rule)
    assert [a["change"] for a in body["alternatives"]] == [{"queue": "default"}, {"gpu": 1}]
    assert body["alternatives"][1]["description"] == "with 1 GPU per replica instead of 2"
    assert body["summary"].startswith("the fleet has room on ")
