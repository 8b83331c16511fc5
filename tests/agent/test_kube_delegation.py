"""Delegation with the member's own features, against the stand-in with its scheduler running.

The agent only creates objects; the stand-in's scheduler loop binds the pods, and its
controllers create ServiceAccounts and taint nodes, as v1.36 does. Each test asserts what an
operator would see: the namespace made and waited on, the scheduler's message verbatim, a
gang rolled back whole, PriorityClasses, sharing resources counted, affinity to the models
the member has.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kubernetes import client

from fuyao.selector import parse_selector
from member_agent.backends.base import Phase
from member_agent.backends.kube import KubeBackend
from member_agent.backends.kube.convert import node_info
from member_agent.backends.kube.manifest import pod_manifests, replica_name
from member_agent.backends.kube.options import KubeOptions
from tests.agent.kubestandin import KubeStandIn
from tests.agent.recorder import Recorder
from tests.agent.test_kube import A100, ALLOC, command, place, v1, view

NS = "fuyao-tasks"
V100 = {"nvidia.com/gpu.product": "Tesla-V100-PCIE-16GB"}
GPU_TAINT = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]


@pytest.fixture
def standin() -> Iterator[KubeStandIn]:
    server = KubeStandIn(run_scheduler=True).start()
    server.add_node("a100-0", A100, ALLOC, taints=GPU_TAINT)
    server.add_node("v100-0", V100, ALLOC | {"nvidia.com/gpu": "4"}, taints=GPU_TAINT)
    yield server
    server.close()


async def started(standin: KubeStandIn, **options: Any) -> tuple[KubeBackend, Recorder]:
    api = client.ApiClient(client.Configuration(host=standin.url))
    backend = KubeBackend(api, KubeOptions(namespace=NS, retry_seconds=0.1, **options))
    recorder = Recorder()
    await backend.start(recorder)
    return backend, recorder


@pytest.fixture
async def kube(standin: KubeStandIn) -> AsyncIterator[tuple[KubeBackend, Recorder]]:
    backend, recorder = await started(standin)
    yield backend, recorder
    await backend.stop()


async def test_the_namespace_is_made_and_the_pod_bound_by_the_members_scheduler(
    kube: tuple[KubeBackend, Recorder], standin: KubeStandIn
) -> None:
    backend, rec = kube
    assert NS not in standin.namespaces
    await backend.place(place(selector="fuyao.io/gpu-model >= A100"))
    await rec.until(lambda: Phase.RUNNING in rec.phases())
    pod = standin.pod(NS, replica_name("t-1", 1, 0))
    assert pod["spec"]["nodeName"] == "a100-0"
    assert pod["spec"]["serviceAccountName"] == "default"
    assert {"key": "nvidia.com/gpu", "operator": "Exists",
            "effect": "NoSchedule"} in pod["spec"]["tolerations"]
    assert not any("binding" in path for _, path in standin.requests)  # never bound by us
    assert rec.phases() == [Phase.ACCEPTED, Phase.BOUND, Phase.RUNNING]
    assert backend.tasks()[0].node == "a100-0"


async def test_an_unschedulable_pods_message_is_reported_verbatim(
    kube: tuple[KubeBackend, Recorder], standin: KubeStandIn
) -> None:
    backend, rec = kube
    await backend.place(place(gpu_milli=16000))
    await rec.until(lambda: Phase.UNSCHEDULABLE in rec.phases())
    assert backend.tasks()[0].reason == (
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are "
        "available: 2 No preemption victims found for incoming pod.")


async def test_a_gang_that_cannot_fully_bind_is_rolled_back_whole(
    standin: KubeStandIn
) -> None:
    backend, rec = await started(standin, gang_timeout=0.5)
    try:
        # Two replicas of 8 A100s: one node has them, the second replica fits nowhere.
        await backend.place(place(gpu_milli=8000, replicas=2,
                                  selector="fuyao.io/gpu-model = A100"))
        await rec.until(lambda: backend.tasks()[0].reason.startswith("gang"), timeout=15)
        assert standin.pod_names() == []
        (status,) = backend.tasks()
        assert status.phase is Phase.UNSCHEDULABLE
        assert status.reason.startswith(
            "gang of 2: 1 of 2 replicas bound within 0.5s, all rolled back: 0/2 nodes are "
            "available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node "
            "affinity/selector.")
        assert view(backend, "a100-0").free.pods == 110   # nothing left holding the node
        await backend.cancel("t-1", 1, "spilled over")   # the hub re-places elsewhere
        await rec.until(lambda: Phase.CANCELLED in rec.phases())
    finally:
        await backend.stop()


async def test_priority_maps_to_a_priority_class_created_once(
    kube: tuple[KubeBackend, Recorder], standin: KubeStandIn
) -> None:
    backend, rec = kube
    await backend.place(place(priority=50))
    await backend.place(place("t-2", priority=50))
    await rec.until(lambda: Phase.RUNNING in rec.phases("t-2"))
    assert standin.classes["fuyao-priority-50"]["value"] == 50
    assert standin.pod(NS, replica_name("t-2", 1, 0))["spec"]["priority"] == 50
    posts = [p for m, p in standin.requests if m == "POST" and p.endswith("priorityclasses")]
    assert len(posts) == 1


async def test_a_forbidden_priority_class_is_reported_once_and_pods_go_without(
    standin: KubeStandIn, caplog: pytest.LogCaptureFixture
) -> None:
    standin.denied.add(("create", "priorityclasses"))
    backend, rec = await started(standin)
    try:
        with caplog.at_level(logging.WARNING):
            await backend.place(place(priority=7))
            await backend.place(place("t-2", priority=7))
            await rec.until(lambda: Phase.RUNNING in rec.phases("t-2"))
        warnings = [r.getMessage() for r in caplog.records if "PriorityClass" in r.getMessage()]
        assert len(warnings) == 1
        assert 'cannot create resource "priorityclasses"' in warnings[0]
        assert "priorityClassName" not in standin.pod(NS, replica_name("t-1", 1, 0))["spec"]
    finally:
        await backend.stop()


async def test_the_members_scheduler_name_is_used(standin: KubeStandIn) -> None:
    standin.scheduler_names = {"volcano"}
    backend, rec = await started(standin, scheduler_name="volcano")
    try:
        await backend.place(place())
        await rec.until(lambda: Phase.RUNNING in rec.phases())
        assert standin.pod(NS, replica_name("t-1", 1, 0))["spec"]["schedulerName"] == "volcano"
    finally:
        await backend.stop()


def test_rank_expressions_expand_to_the_models_the_member_has() -> None:
    selector = parse_selector("fuyao.io/gpu-model >= V100")
    pod = pod_manifests(command(str(selector), replicas=1), NS, selector=selector,
                        node_values={"fuyao.io/gpu-model": {"A100", "V100", "T4"}})[0]
    (term,) = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [
        {"key": "fuyao.io/gpu-model", "operator": "In", "values": ["A100", "V100"]}]


def test_a_share_asks_for_the_members_sharing_resources() -> None:
    opts = KubeOptions(gpu_memory_resource="nvidia.com/gpumem",
                       gpu_cores_resource="nvidia.com/gpucores")
    cmd = command(gpu=250, replicas=1)
    cmd.workload.gpu_memory_mib = 8192
    pod = pod_manifests(cmd, NS, selector=parse_selector(""), options=opts)[0]
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpu": "1", "nvidia.com/gpucores": "25", "nvidia.com/gpumem": "8192"}


def shared_pod(limits: dict[str, str]) -> Any:
    return v1("V1Pod", {"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [
        {"name": "a", "resources": {"requests": limits, "limits": limits}}]},
        "status": {"phase": "Running"}})


def gpu_node(labels: dict[str, str], gpus: str) -> Any:
    return v1("V1Node", {"metadata": {"name": "n1", "labels": labels},
                         "status": {"allocatable": ALLOC | {"nvidia.com/gpu": gpus},
                                    "conditions": [{"type": "Ready", "status": "True"}]}})


def test_the_node_view_counts_shared_cards() -> None:
    # HAMi: two pods with 25% and 50% of a card share one card.
    hami = node_info(gpu_node(A100, "2"), [
        shared_pod({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "25"}),
        shared_pod({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "50"})],
        cores_resource="nvidia.com/gpucores")
    assert [d.free_milli for d in hami.devices] == [250, 1000]
    # Time-slicing: 2 cards x 4 replicas advertised as 8; three pods take 3/4 of one card.
    sliced = node_info(gpu_node(A100 | {"nvidia.com/gpu.replicas": "4"}, "8"),
                       [shared_pod({"nvidia.com/gpu": "1"})] * 3)
    assert [d.free_milli for d in sliced.devices] == [250, 1000]


async def test_coscheduling_gangs_get_a_pod_group_bound_together_and_deleted_after(
    standin: KubeStandIn
) -> None:
    backend, rec = await started(standin, gang="coscheduling", finished_pod_ttl=0.3)
    try:
        # Three replicas of 4 cards on the one 8-card A100 node: two would fit, so the pod
        # group binds none.
        await backend.place(place(gpu_milli=4000, replicas=3,
                                  selector="fuyao.io/gpu-model = A100"))
        await rec.until(lambda: "2 fit" in backend.tasks()[0].reason)
        group = standin.podgroups[(NS, "fy-t1-46e9bc-g1")]
        assert group["spec"]["minMember"] == 3
        assert all(standin.pod(NS, p)["spec"].get("nodeName") is None
                   for p in standin.pod_names())   # none bound: all or nothing
        assert "pod group needs 3 pods bound together, 2 fit" in backend.tasks()[0].reason
        # Two replicas fit the A100 node together: bound, run, finish, cleaned up.
        await backend.place(place("t-2", gpu_milli=4000, replicas=2,
                                  selector="fuyao.io/gpu-model = A100"))
        await rec.until(lambda: Phase.RUNNING in rec.phases("t-2"))
        pods = [p for p in standin.pod_names() if "-g1-" in p and p.startswith("fy-t2")]
        for pod in pods:
            assert standin.pod(NS, pod)["metadata"]["labels"][
                "scheduling.x-k8s.io/pod-group"] == "fy-t2-" + pod.split("-")[2] + "-g1"
            standin.set_phase(NS, pod, "Succeeded")
        await rec.until(lambda: Phase.SUCCEEDED in rec.phases("t-2"))
        await rec.until(lambda: not any(k[1].startswith("fy-t2") for k in standin.podgroups),
                        timeout=10)
    finally:
        await backend.stop()
