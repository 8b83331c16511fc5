"""The commands the hub sends agents, built from dicts in one constructor call
(``hub.activetask.place_command``, ``cancel_command``), are the messages that nesting
message objects builds: every field the member reads, for any task."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from fuyao.spec import TaskSpec, TaskState
from fuyao.wire.v1 import agent_pb2 as pb
from hub.activetask import ActiveTask, cancel_command, member_selector, place_command

NOW = datetime(2026, 12, 7, tzinfo=UTC)

specs = st.builds(
    TaskSpec, name=st.just("t"),
    image=st.sampled_from(["busybox:1.36", "registry.example/pytorch:2-é"]),
    command=st.lists(st.sampled_from(["python", "-c", "print('é')", ""]), max_size=3),
    cpu=st.sampled_from(["500m", "2"]), memory=st.sampled_from(["1Gi", "300Mi"]),
    gpu=st.sampled_from([0, 1, "500m", 4]),
    gpu_model=st.sampled_from([None, "A100"]),
    selector=st.sampled_from([None, "zone = a", "fuyao.io/gpu-model in (A100, H100)"]),
    replicas=st.integers(1, 3), duration=st.sampled_from([None, "90s", "2h"]),
    priority=st.integers(-5, 5), failover=st.sampled_from(["restart-elsewhere", "never"]))


@settings(max_examples=150, deadline=None)
@given(specs, st.sampled_from([None, "A100", "H100"]), st.integers(1, 9))
def test_a_placetask_carries_what_nested_messages_carried(
        spec: TaskSpec, model: str | None, generation: int) -> None:
    task = ActiveTask(id="id-1", name="t", spec=spec, state=TaskState.PLACED, queue="default",
                      priority=spec.priority, seq=1, created_at=NOW, updated_at=NOW,
                      generation=generation)
    cluster, msg = place_command(task, "east", model)
    req = task.requests()    # the workload as the hub built it field by field before
    workload = pb.TaskWorkload(
        image=spec.image, command=list(spec.command), cpu_milli=req.cpu_milli,
        memory_mib=req.memory_mib, gpu_milli=req.gpu_milli, gpu_memory_mib=req.gpu_memory_mib,
        gpu_mem_mib=req.gpu_mem_mib,
        selector=member_selector(spec.effective_selector(), model,
                                 req.gpu_milli or req.gpu_mem_mib),
        replicas=spec.replicas, duration_seconds=spec.duration_seconds(),
        priority=task.priority, failover=spec.failover)
    nested = pb.HubMessage(place=pb.PlaceTask(task_id="id-1", generation=generation, name="t",
                                              workload=workload))
    assert cluster == "east" and msg == nested
    assert msg.HasField("place")
    assert msg.place.workload.cpu_milli > 0 and msg.place.workload.memory_mib > 0


@given(st.text(max_size=40), st.integers(0, 2**31 - 1), st.integers(0, 3600))
def test_a_canceltask_carries_its_fields(reason: str, generation: int, grace: int) -> None:
    cluster, msg = cancel_command("west", "id-2", generation, reason, grace)
    assert cluster == "west"
    assert msg == pb.HubMessage(cancel=pb.CancelTask(task_id="id-2", generation=generation,
                                                     reason=reason, grace_seconds=grace))
