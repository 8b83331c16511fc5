"""A task divided across clusters inside a real hub (cycles run by hand): its parts, their
sum, min_replicas, cancel, quotas and a lost cluster's part re-placed alone."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fuyao.spec import TaskState
from fuyao.wire.v1 import agent_pb2 as pb
from tests.hub.conftest import HubHarness

from .conftest import add_cluster, queue, submit, task


def gpu_task(name: str, replicas: int, **extra: Any) -> dict[str, Any]:
    return {"name": name, "gpu": 1, "gpu_model": "A100", "replicas": replicas, **extra}


def parts(h: HubHarness, name: str) -> dict[str, int]:
    """cluster -> replicas of the active parts of ``name``."""
    out: dict[str, int] = {}
    for t in h.hub.tasks.active.values():
        if t.name.startswith(f"{name}.") and t.cluster:
            out[t.cluster] = out.get(t.cluster, 0) + t.spec.replicas
    return out


async def run_parts(h: HubHarness, name: str) -> None:
    """The members start the parts: their nodes' devices are in use from now on."""
    for t in list(h.hub.tasks.active.values()):
        if t.name.startswith(f"{name}.") and t.cluster and t.state == TaskState.PLACED:
            cluster = h.hub.fleet.cluster(t.cluster)
            assert cluster is not None
            node = cluster.node(f"{t.cluster}-0")
            assert node is not None
            info = node.info
            left = t.spec.replicas
            devices = []
            for d in info.devices:
                if left and d.free_milli == 1000:
                    d, left = replace(d, free_milli=0, free_memory_mib=0), left - 1
                devices.append(d)
            h.hub.fleet.replace_nodes(t.cluster, [replace(info, devices=tuple(devices))])
            await h.hub.tasks.report(t.cluster, pb.TaskReport(
                task_id=t.id, generation=t.generation, phase=pb.TASK_PHASE_RUNNING,
                node=f"{t.cluster}-0"))


async def test_no_cluster_fits_whole_so_it_is_divided(quiet: HubHarness) -> None:
    h = quiet
    add_cluster(h, "east", 1, 4)
    add_cluster(h, "west", 1, 2)
    await submit(h, gpu_task("big", 6))
    await h.hub.placement.cycle()
    assert parts(h, "big") == {"east": 4, "west": 2}
    big = task(h, "big")
    assert big.state == TaskState.PLACED and big.cluster is None
    await run_parts(h, "big")
    await h.hub.placement.cycle()
    assert big.state == TaskState.RUNNING
    view = (await h.api.get("/api/v1/tasks/big")).json()
    assert view["state"] == "Running"
    assert sorted((p["cluster"], p["replicas"], p["state"]) for p in view["parts"]) == [
        ("east", 4, "Running"), ("west", 2, "Running")]
    part = (await h.api.get(f"/api/v1/tasks/{view['parts'][0]['name']}")).json()
    assert part["parent"] == "big"
    # A part is cancelled with its task, not alone.
    r = await h.api.post(f"/api/v1/tasks/{part['name']}/cancel")
    assert r.status_code == 409 and "cancel that task" in r.text
    r = await h.api.post("/api/v1/tasks/big/cancel")
    assert r.status_code == 200
    await h.hub.placement.cycle()
    assert not [t for t in h.hub.tasks.active.values() if t.name.startswith("big")]
    ended = (await h.api.get("/api/v1/tasks/big")).json()
    assert {p["state"] for p in ended["parts"]} == {"Cancelled"}


async def test_whole_when_one_cluster_fits(quiet: HubHarness) -> None:
    h = quiet
    add_cluster(h, "east", 1, 8)
    add_cluster(h, "west", 1, 2)
    await submit(h, gpu_task("one", 4))
    await h.hub.placement.cycle()
    assert task(h, "one").cluster == "east" and parts(h, "one") == {}


async def test_gang_waits_instead_of_dividing(quiet: HubHarness) -> None:
    h = quiet
    add_cluster(h, "east", 1, 4)
    add_cluster(h, "west", 1, 2)
    await submit(h, gpu_task("g", 6, gang=True))
    await h.hub.placement.cycle()
    g = task(h, "g")
    assert g.state == TaskState.QUEUED and parts(h, "g") == {}


async def test_all_replicas_or_wait_and_say_why(quiet: HubHarness) -> None:
    h = quiet
    add_cluster(h, "east", 1, 2)
    add_cluster(h, "west", 1, 2)
    await submit(h, gpu_task("wide", 6))
    await h.hub.placement.cycle()
    wide = task(h, "wide")
    assert wide.state == TaskState.QUEUED and parts(h, "wide") == {}
    assert wide.message == ("divided across clusters, 4 of 6 replicas fit now (2 on east, "
                            "2 on west); needs all 6")
    explained = (await h.api.get("/api/v1/tasks/wide/explain")).json()
    assert explained["message"] == wide.message


async def test_min_replicas_runs_then_tops_up(quiet: HubHarness) -> None:
    h = quiet
    add_cluster(h, "east", 1, 2)
    add_cluster(h, "west", 1, 1)
    await submit(h, gpu_task("mr", 5, min_replicas=3))
    await h.hub.placement.cycle()
    assert parts(h, "mr") == {"east": 2, "west": 1}
    await run_parts(h, "mr")
    await h.hub.placement.cycle()
    mr = task(h, "mr")
    assert mr.state == TaskState.RUNNING and "2 waiting" in mr.message
    add_cluster(h, "north", 1, 4)           # room appears: the rest is placed there
    await h.hub.placement.cycle()
    assert parts(h, "mr") == {"east": 2, "west": 1, "north": 2}


async def test_static_weights_divide_even_when_one_fits(quiet: HubHarness) -> None:
    h = quiet
    add_cluster(h, "east", 1, 8)
    add_cluster(h, "west", 1, 8)
    await submit(h, gpu_task("w", 6, spread="weighted",
                             spread_weights={"east": 2, "west": 1}))
    await h.hub.placement.cycle()
    assert parts(h, "w") == {"east": 4, "west": 2}


async def test_quota_counts_the_whole_task_once(quiet: HubHarness) -> None:
    h = quiet
    add_cluster(h, "east", 1, 4)
    add_cluster(h, "west", 1, 4)
    await queue(h, "team", quotas={"gpu": "6"})
    await submit(h, gpu_task("q1", 6, queue="team"))
    await h.hub.placement.cycle()
    assert sum(parts(h, "q1").values()) == 6
    assert h.hub.queueing.view("team").usage["gpu"] == "6"
    await submit(h, {"name": "q2", "gpu": 1, "queue": "team"})
    await h.hub.placement.cycle()
    assert task(h, "q2").state == TaskState.QUEUED
    assert "quota" in (h.hub.queueing.hold_for(task(h, "q2")) or {}).get("held_by", "")


async def test_a_lost_cluster_re_places_only_its_part(quiet: HubHarness) -> None:
    h = quiet
    add_cluster(h, "east", 1, 4)
    add_cluster(h, "west", 1, 2)
    add_cluster(h, "spare", 1, 1)
    await submit(h, gpu_task("big", 6, spread="weighted", spread_weights={"east": 2,
                                                                          "west": 1}))
    await h.hub.placement.cycle()
    assert parts(h, "big") == {"east": 4, "west": 2}
    await run_parts(h, "big")
    east = next(t for t in h.hub.tasks.active.values() if t.name.startswith("big.")
                and t.cluster == "east")
    west = next(t for t in h.hub.tasks.active.values() if t.name.startswith("big.")
                and t.cluster == "west")
    west_gen = west.generation
    await h.hub.tasks.requeue_cluster("west", "cluster west is lost")
    h.hub.fleet.remove_cluster("west")
    add_cluster(h, "north", 1, 2)
    await h.hub.placement.cycle()
    assert east.cluster == "east" and east.state == TaskState.RUNNING
    assert west.cluster == "north" and west.generation == west_gen + 1
    assert parts(h, "big") == {"east": 4, "north": 2}
    big = task(h, "big")
    assert big.state == TaskState.PLACED      # 4 of 6 run until north starts its part
