"""The sim member end to end: task copies run, finish, cancel, wait and supersede."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from fuyao.fleetfile import Fleet, FleetNode
from fuyao.wire.v1 import agent_pb2 as pb
from member_agent.backends.base import NodesChanged, Phase, TaskChanged
from member_agent.backends.sim.backend import SimBackend
from tests.agent.recorder import Recorder

T4 = {"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.memory": "15360"}


def fleet(gpus: int = 2) -> Fleet:
    return Fleet(
        source="test",
        cluster_labels={"fuyao.io/region": "test"},
        nodes=(
            FleetNode("t4-0", dict(T4), {"cpu": "16", "memory": "64Gi", "pods": "110",
                                         "nvidia.com/gpu": str(gpus)}),
            FleetNode("cpu-0", {}, {"cpu": "8", "memory": "32Gi", "pods": "110"}),
        ),
    )


def place(task_id: str, gen: int = 1, *, gpu: int = 1000, duration: float = 0.0,
          replicas: int = 1, selector: str = "") -> pb.PlaceTask:
    workload = pb.TaskWorkload(cpu_milli=1000, memory_mib=1024, gpu_milli=gpu, replicas=replicas,
                               duration_seconds=duration, selector=selector)
    return pb.PlaceTask(task_id=task_id, generation=gen, name=task_id, workload=workload)


@pytest.fixture
async def sim() -> AsyncIterator[tuple[SimBackend, Recorder]]:
    backend = SimBackend(fleet(), time_scale=0.01, retry_interval=0.05)
    recorder = Recorder()
    await backend.start(recorder)
    yield backend, recorder
    await backend.stop()


def gpu_free(backend: SimBackend) -> list[int]:
    return [d.free_milli for d in next(n for n in backend.nodes() if n.name == "t4-0").devices]


async def test_task_runs_for_its_scaled_duration_then_succeeds(
    sim: tuple[SimBackend, Recorder],
) -> None:
    backend, rec = sim
    loop = asyncio.get_running_loop()
    started = loop.time()
    await backend.place(place("job1", duration=20))  # 20 s x 0.01 = 0.2 s
    assert rec.phases("job1") == [Phase.ACCEPTED, Phase.BOUND, Phase.RUNNING]
    assert gpu_free(backend) == [0, 1000]
    await rec.wait_for("job1", Phase.SUCCEEDED)
    assert loop.time() - started >= 0.19
    assert gpu_free(backend) == [1000, 1000]
    assert [t.phase for t in backend.tasks()] == [Phase.SUCCEEDED]


async def test_node_delta_comes_before_bound_and_before_succeeded(
    sim: tuple[SimBackend, Recorder],
) -> None:
    backend, rec = sim
    await backend.place(place("job1", duration=1))
    await rec.wait_for("job1", Phase.SUCCEEDED)
    kinds = [
        ("nodes", e.upserted[0].devices[0].free_milli) if isinstance(e, NodesChanged)
        else ("task", e.status.phase)
        for e in rec.events
    ]
    assert kinds == [
        ("task", Phase.ACCEPTED),
        ("nodes", 0),
        ("task", Phase.BOUND),
        ("task", Phase.RUNNING),
        ("nodes", 1000),
        ("task", Phase.SUCCEEDED),
    ]
    bound = next(e for e in rec.events if isinstance(e, TaskChanged)
                 and e.status.phase is Phase.BOUND)
    assert bound.status.node == "t4-0"


async def test_cancel_frees_resources_and_reports_cancelled(
    sim: tuple[SimBackend, Recorder],
) -> None:
    backend, rec = sim
    await backend.place(place("job1"))  # duration 0: runs until cancelled
    assert gpu_free(backend) == [0, 1000]
    await backend.cancel("job1", 1, "user asked")
    assert rec.phases("job1")[-1] is Phase.CANCELLED
    assert backend.tasks()[0].reason == "user asked"
    assert gpu_free(backend) == [1000, 1000]
    await backend.cancel("job1", 1)  # already cancelled: nothing more happens
    assert rec.phases("job1").count(Phase.CANCELLED) == 1


async def test_cancel_with_grace_keeps_running_that_long_then_stops(
    sim: tuple[SimBackend, Recorder],
) -> None:
    backend, rec = sim
    await backend.place(place("job1", duration=5))    # would finish during the grace
    await backend.place(place("job2"))
    await backend.cancel("job1", 1, "preempted", grace_seconds=30)   # 0.3 s at this scale
    await asyncio.sleep(0.1)
    assert rec.phases("job1")[-1] is Phase.RUNNING      # terminating, not finished
    assert gpu_free(backend) == [0, 0]
    for _ in range(100):
        if rec.phases("job1")[-1] is Phase.CANCELLED:
            break
        await asyncio.sleep(0.05)
    assert rec.phases("job1")[-1] is Phase.CANCELLED and Phase.SUCCEEDED not in rec.phases("job1")
    assert gpu_free(backend) == [1000, 0]
    await backend.cancel("job2", 1, "preempted", grace_seconds=30)
    await backend.cancel("job2", 1, "stale copy")       # no grace: at once
    assert rec.phases("job2")[-1] is Phase.CANCELLED
    assert gpu_free(backend) == [1000, 1000]


async def test_duplicate_place_is_a_no_op(sim: tuple[SimBackend, Recorder]) -> None:
    backend, rec = sim
    await backend.place(place("job1"))
    events = len(rec.events)
    await backend.place(place("job1"))
    assert len(rec.events) == events
    assert gpu_free(backend) == [0, 1000]
    assert len(backend.tasks()) == 1


async def test_newer_generation_cancels_the_older_copy(sim: tuple[SimBackend, Recorder]) -> None:
    backend, rec = sim
    await backend.place(place("job1", 1))
    await backend.place(place("job1", 2))
    assert rec.phases("job1", 1)[-1] is Phase.CANCELLED
    assert rec.phases("job1", 2)[-1] is Phase.RUNNING
    assert gpu_free(backend) == [0, 1000]  # only generation 2 holds a card
    statuses = {t.generation: t for t in backend.tasks()}
    assert statuses[1].reason == "superseded by generation 2"
    # A stale generation arriving late never runs.
    await backend.place(place("job1", 0))
    assert rec.phases("job1", 0) == [Phase.CANCELLED]


async def test_cancel_covers_older_generations_only(sim: tuple[SimBackend, Recorder]) -> None:
    backend, rec = sim
    await backend.place(place("job1", 3))
    await backend.cancel("job1", 2)
    assert rec.phases("job1", 3)[-1] is Phase.RUNNING
    await backend.cancel("job1", 3)
    assert rec.phases("job1", 3)[-1] is Phase.CANCELLED


async def test_unschedulable_task_waits_and_binds_when_room_frees(
    sim: tuple[SimBackend, Recorder],
) -> None:
    backend, rec = sim
    await backend.place(place("big", gpu=2000))
    await backend.place(place("waiter", gpu=1000))
    assert rec.phases("waiter") == [Phase.ACCEPTED, Phase.UNSCHEDULABLE]
    assert backend.tasks()[1].reason == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    await backend.cancel("big", 1)
    assert rec.phases("waiter")[-2:] == [Phase.BOUND, Phase.RUNNING]


async def test_pending_task_is_retried_periodically() -> None:
    backend = SimBackend(fleet(gpus=0), time_scale=0.01, retry_interval=0.05)
    rec = Recorder()
    await backend.start(rec)
    try:
        await backend.place(place("waiter", gpu=1000))
        assert rec.phases("waiter") == [Phase.ACCEPTED, Phase.UNSCHEDULABLE]
        await asyncio.sleep(0.2)
        assert rec.phases("waiter").count(Phase.UNSCHEDULABLE) == 1  # reported once
    finally:
        await backend.stop()


async def test_gang_binds_all_replicas_or_none(sim: tuple[SimBackend, Recorder]) -> None:
    backend, rec = sim
    await backend.place(place("gang", gpu=1000, replicas=3))
    assert rec.phases("gang") == [Phase.ACCEPTED, Phase.UNSCHEDULABLE]
    assert gpu_free(backend) == [1000, 1000]
    assert "replica 3/3" in backend.tasks()[0].reason


async def test_bad_selector_fails_the_copy(sim: tuple[SimBackend, Recorder]) -> None:
    backend, rec = sim
    await backend.place(place("bad", selector="fuyao.io/gpu-model >>= A100"))
    assert rec.phases("bad") == [Phase.FAILED]
    assert "selector" in backend.tasks()[0].reason


async def test_cluster_labels_come_from_the_fleet(sim: tuple[SimBackend, Recorder]) -> None:
    backend, _ = sim
    assert backend.cluster_labels() == {"fuyao.io/region": "test"}


async def test_finished_copies_are_forgotten_after_the_retention_and_live_ones_kept(
    sim: tuple[SimBackend, Recorder], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from member_agent.backends.sim import backend as sim_backend
    backend, rec = sim
    await backend.place(place("done", gpu=0, duration=1))
    await rec.wait_for("done", Phase.SUCCEEDED)
    await backend.place(place("live", gpu=0))
    monkeypatch.setattr(sim_backend, "RETAIN_FINISHED_SECONDS", 0.0)
    await backend.place(place("next", gpu=0))      # each place prunes what is due
    assert sorted(t.task_id for t in backend.tasks()) == ["live", "next"]
    await backend.place(place("done", 1, gpu=0))   # forgotten: the same id runs again
    assert rec.phases("done")[-1] == Phase.RUNNING
