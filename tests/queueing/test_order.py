"""Queueing rules on a real hub: the order of a cycle, quotas, backfill, preemption."""

from __future__ import annotations

from collections import Counter

from fuyao.spec import ClusterState
from fuyao.taints import Taint
from tests.hub.conftest import HubHarness
from tests.queueing.conftest import add_cluster, finish, placed, queue, submit, task


def gpu_tasks(prefix: str, count: int, q: str, gpus: int = 1, **extra: object) -> list[dict]:
    return [{"name": f"{prefix}-{i}", "gpu": gpus, "queue": q, **extra} for i in range(count)]


async def test_weighted_fair_share_splits_contended_gpus_by_weight(quiet: HubHarness) -> None:
    add_cluster(quiet, "east", nodes=3, gpus=4)
    await queue(quiet, "team-a", weight=2)
    await queue(quiet, "team-b", weight=1)
    await submit(quiet, *gpu_tasks("b", 12, "team-b"), *gpu_tasks("a", 12, "team-a"))
    await quiet.hub.placement.cycle()
    won = Counter(name.split("-")[0] for name in placed(quiet))
    assert won == {"a": 8, "b": 4}
    view = (await quiet.api.get("/api/v1/queues/team-a")).json()
    assert view["usage"]["gpu"] == "8" and view["dominant_share"] == round(8 / 12, 4)
    assert view["fair_share"] == round(2 / 3, 4) and view["admitted"] == 8


async def test_a_higher_priority_level_is_served_first(quiet: HubHarness) -> None:
    add_cluster(quiet, "east", nodes=1, gpus=4)
    await queue(quiet, "batch", priority=0, weight=100)
    await queue(quiet, "urgent", priority=10)
    await submit(quiet, *gpu_tasks("batch", 4, "batch"), *gpu_tasks("urgent", 3, "urgent"))
    await quiet.hub.placement.cycle()
    assert sorted(placed(quiet)) == ["batch-0", "urgent-0", "urgent-1", "urgent-2"]


async def test_inside_a_queue_priority_then_age(quiet: HubHarness) -> None:
    add_cluster(quiet, "east", nodes=1, gpus=2)
    await submit(quiet, {"name": "old", "gpu": 1}, {"name": "young", "gpu": 1},
                 {"name": "vip", "gpu": 1, "priority": 5})
    await quiet.hub.placement.cycle()
    assert sorted(placed(quiet)) == ["old", "vip"]
    view = (await quiet.api.get("/api/v1/tasks/young")).json()
    assert view["queue_position"] == 1 and view["held_by"] is None


async def test_a_quota_holds_a_task_and_says_which(quiet: HubHarness) -> None:
    add_cluster(quiet, "east", nodes=1, gpus=8)
    await queue(quiet, "team-a", quotas={"gpu.A100": 2})
    await submit(quiet, *gpu_tasks("a", 3, "team-a"))
    await quiet.hub.placement.cycle()
    assert sorted(placed(quiet)) == ["a-0", "a-1"]
    view = (await quiet.api.get("/api/v1/tasks/a-2")).json()
    assert view["held_by"] == "queue team-a: gpu A100 quota 2, in use 2"
    assert view["message"] == view["held_by"] and view["queue_position"] == 1
    assert [e["kind"] for e in view["events"]] == ["Submitted", "Held"]
    listed = {t["name"]: t for t in (await quiet.api.get("/api/v1/tasks")).json()}
    assert listed["a-2"]["held_by"] == view["held_by"]


async def test_a_gpu_memory_quota_counts_memory_sharing_tasks(quiet: HubHarness) -> None:
    add_cluster(quiet, "east", nodes=1, gpus=8)
    await queue(quiet, "notebooks", quotas={"gpu-memory": "16Gi"})
    await submit(quiet, *({"name": f"nb-{i}", "gpu_mem": "8Gi", "queue": "notebooks"}
                          for i in range(3)))
    await quiet.hub.placement.cycle()
    assert sorted(placed(quiet)) == ["nb-0", "nb-1"]
    view = (await quiet.api.get("/api/v1/tasks/nb-2")).json()
    assert view["held_by"] == "queue notebooks: gpu-memory quota 16Gi, in use 16Gi"
    used = (await quiet.api.get("/api/v1/queues/notebooks")).json()["usage"]
    assert used["gpu-memory"] == "16Gi"


async def test_borrowing_uses_idle_quota_up_to_the_limit(quiet: HubHarness) -> None:
    add_cluster(quiet, "east", nodes=4, gpus=4)
    await queue(quiet, "team-a", weight=2, quotas={"gpu": 8, "cpu": 64})
    await queue(quiet, "team-b", weight=1, quotas={"gpu": 4}, borrow={"gpu": 4})
    await submit(quiet, *gpu_tasks("b", 10, "team-b"))
    await quiet.hub.placement.cycle()
    assert len(placed(quiet)) == 8      # 4 own + 4 borrowed from team-a's idle 8
    held = (await quiet.api.get("/api/v1/tasks/b-8")).json()["held_by"]
    assert held == "queue team-b: gpu quota 4, in use 8 (+4 borrowable)"


async def test_a_blocked_head_holds_its_queue_then_backfill_reserves(quiet: HubHarness) -> None:
    add_cluster(quiet, "east", nodes=1, gpus=8)
    add_cluster(quiet, "west", nodes=1, gpus=4)
    await submit(quiet, {"name": "filler", "gpu": 2})
    await quiet.hub.placement.cycle()
    assert placed(quiet) == {"filler": "east"}
    await submit(quiet, {"name": "gang", "gpu": 8}, *gpu_tasks("small", 3, "default"))
    for _ in range(2):      # hold_cycles: strict FIFO, nothing behind the head is tried
        await quiet.hub.placement.cycle()
        assert sorted(placed(quiet)) == ["filler"]
    await quiet.hub.placement.cycle()   # backfill, but not on the cluster kept for the gang
    assert placed(quiet) == {"filler": "east", "small-0": "west", "small-1": "west",
                             "small-2": "west"}
    hold = quiet.hub.queueing.hold_for(task(quiet, "gang"))
    assert hold is not None and hold["reserved_cluster"] == "east"
    await finish(quiet, "filler")
    await quiet.hub.placement.cycle()
    assert placed(quiet)["gang"] == "east"


async def test_a_head_that_could_never_fit_keeps_no_cluster(quiet: HubHarness) -> None:
    add_cluster(quiet, "east", nodes=2, gpus=8)
    await submit(quiet, {"name": "filler", "gpu": 4})
    await quiet.hub.placement.cycle()
    # 16 GPUs on one node: no node of east has them even empty; waiting there is futile.
    await submit(quiet, {"name": "never", "gpu": 16}, *gpu_tasks("small", 3, "default"))
    for _ in range(3):      # two cycles of strict FIFO, then backfill
        await quiet.hub.placement.cycle()
    assert sorted(placed(quiet)) == ["filler", "small-0", "small-1", "small-2"]
    hold = quiet.hub.queueing.hold_for(task(quiet, "never"))
    assert hold is not None and hold["reserved_cluster"] is None


async def test_preemption_evicts_the_fewest_lowest_and_requeues_them(
        quiet: HubHarness) -> None:
    add_cluster(quiet, "east", nodes=1, gpus=4)
    await submit(quiet, {"name": "keep", "gpu": 1, "priority": -5, "preemptible": False},
                 {"name": "low-old", "gpu": 1, "priority": 1},
                 {"name": "low-new", "gpu": 1, "priority": 1},
                 {"name": "mid", "gpu": 1, "priority": 3})
    await quiet.hub.placement.cycle()
    assert len(placed(quiet)) == 4
    await submit(quiet, {"name": "urgent", "gpu": 2, "priority": 10})
    await quiet.hub.placement.cycle()
    assert sorted(placed(quiet)) == ["keep", "mid"]
    for name in ("low-old", "low-new"):
        victim = (await quiet.api.get(f"/api/v1/tasks/{name}")).json()
        assert victim["state"] == "Queued"
        kinds = [e["kind"] for e in victim["events"]]
        assert kinds.count("Preempted") == 1
        assert victim["message"].startswith("Preempted by urgent")
    audit = (await quiet.api.get("/api/v1/audit")).json()
    assert {(a["actor"], a["target"]) for a in audit if a["action"] == "task.preempt"} == {
        ("system", "low-old"), ("system", "low-new")}
    await quiet.hub.placement.cycle()
    assert placed(quiet)["urgent"] == "east"
    assert "low-old" not in placed(quiet)
    held = (await quiet.api.get("/api/v1/tasks/low-new")).json()["held_by"]
    assert held.startswith("preempted by urgent: waits up to 3") and held.endswith(
        "s for its copy on east to stop")


async def test_preemption_never_evicts_where_the_preemptor_does_not_tolerate_the_taints(
        quiet: HubHarness) -> None:
    """The planner's scratch copy of a cluster carries its taints: victims are never evicted
    from a cluster the preemptor could not be placed on anyway."""
    add_cluster(quiet, "east", nodes=1, gpus=4)
    quiet.hub.fleet.upsert_cluster("east", labels={}, weight=1, headroom=0.0,
                                   state=ClusterState.READY,
                                   taints=(Taint(key="dedicated", value="x"),))
    tolerate = [{"key": "dedicated", "value": "x"}]
    await submit(quiet, *gpu_tasks("low", 4, "default", priority=1, tolerations=tolerate))
    await quiet.hub.placement.cycle()
    assert len(placed(quiet)) == 4
    await submit(quiet, {"name": "urgent", "gpu": 2, "priority": 10})
    for _ in range(3):
        await quiet.hub.placement.cycle()
    assert sorted(placed(quiet)) == [f"low-{i}" for i in range(4)]
    for i in range(4):
        events = (await quiet.api.get(f"/api/v1/tasks/low-{i}")).json()["events"]
        assert "Preempted" not in [e["kind"] for e in events]


async def test_an_owner_takes_its_lent_quota_back_by_preemption(quiet: HubHarness) -> None:
    add_cluster(quiet, "east", nodes=2, gpus=4)
    await queue(quiet, "team-a", quotas={"gpu": 4})
    await queue(quiet, "team-b", quotas={"gpu": 4}, borrow={"gpu": 4})
    await submit(quiet, *gpu_tasks("b", 8, "team-b"))
    await quiet.hub.placement.cycle()
    assert len(placed(quiet)) == 8          # 4 own + 4 of team-a's idle quota: fleet full
    # team-a, within its own quota and of no higher priority, needs its GPUs back: its head
    # evicts one borrowed task, is placed next cycle, then the next one does the same.
    await submit(quiet, *gpu_tasks("a", 2, "team-a"))
    for _ in range(4):
        await quiet.hub.placement.cycle()
    assert {"a-0", "a-1"} <= set(placed(quiet))
    preempted = {}
    for i in range(8):
        view = (await quiet.api.get(f"/api/v1/tasks/b-{i}")).json()
        kinds = [e["kind"] for e in view["events"]]
        if "Preempted" in kinds:
            assert kinds.count("Preempted") == 1 and view["state"] == "Queued"
            preempted[view["name"]] = view["message"].split(" (")[0]
    assert preempted == {"b-7": "Preempted by a-0", "b-6": "Preempted by a-1"}  # newest first
    used = (await quiet.api.get("/api/v1/queues/team-b")).json()["usage"]
    assert used["gpu"] == "6"                # still borrows 2 of team-a's idle 2: no more taken


async def test_nothing_is_preempted_for_a_task_of_no_higher_rank(quiet: HubHarness) -> None:
    add_cluster(quiet, "east", nodes=1, gpus=2)
    await submit(quiet, *gpu_tasks("run", 2, "default", priority=5))
    await quiet.hub.placement.cycle()
    await submit(quiet, {"name": "same", "gpu": 1, "priority": 5})
    await quiet.hub.placement.cycle()
    assert sorted(placed(quiet)) == ["run-0", "run-1"]
    assert quiet.hub.queueing.preemption.preempting == {}


async def test_a_per_cluster_quota_sends_the_rest_elsewhere_then_holds(
        quiet: HubHarness) -> None:
    add_cluster(quiet, "east", nodes=1, gpus=8)
    add_cluster(quiet, "west", nodes=1, gpus=1)
    await queue(quiet, "team-c", cluster_quotas={"east": {"gpu": 1}})
    await submit(quiet, *gpu_tasks("c", 3, "team-c"))
    await quiet.hub.placement.cycle()
    assert sorted(placed(quiet).values()) == ["east", "west"]
    view = (await quiet.api.get("/api/v1/tasks/c-2")).json()
    assert view["held_by"] == "queue team-c: gpu quota on east 1, in use 1"
    assert view["reasons"] == {"east": "cluster excluded", "west": "no node with 1 free GPU"}
    usage = (await quiet.api.get("/api/v1/queues/team-c")).json()["cluster_usage"]
    assert usage["east"]["gpu"] == "1" and usage["west"]["gpu"] == "1"
