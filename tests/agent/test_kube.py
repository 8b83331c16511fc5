"""The kube backend: V1Node -> NodeInfo, Pod manifests, and list+watch against a stand-in API.

The end-to-end tests point the real ``kubernetes`` client at ``KubeStandIn`` (real HTTP on
127.0.0.1, real-shaped JSON), with the test playing kube-scheduler and kubelet.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kubernetes import client

from fuyao.errors import Transient
from fuyao.selector import parse_selector
from fuyao.wire.v1 import agent_pb2 as pb
from member_agent.backends.base import NodesChanged, Phase, TaskChanged
from member_agent.backends.kube import KubeBackend
from member_agent.backends.kube.convert import copy_phase, node_info, pod_requests
from member_agent.backends.kube.manifest import node_affinity, pod_manifests, replica_name
from tests.agent.kubestandin import KubeStandIn
from tests.agent.recorder import Recorder

NS = "fuyao-tasks"
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.memory": "81920"}
ALLOC = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}


def v1(kind: str, data: dict[str, Any]) -> Any:
    return client.ApiClient().deserialize(json.dumps(data), kind, "application/json")


def v1node(labels: dict[str, str], alloc: dict[str, str], *, ready: str = "True",
           unschedulable: bool = False, annotations: dict[str, str] | None = None) -> Any:
    return v1("V1Node", {
        "metadata": {"name": "n1", "labels": labels, "annotations": annotations or {}},
        "spec": {"unschedulable": unschedulable},
        "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": ready}]},
    })


def v1pod(requests: dict[str, str], *, node: str = "n1", phase: str = "Running",
          init: dict[str, str] | None = None) -> Any:
    spec: dict[str, Any] = {"nodeName": node, "containers": [
        {"name": "a", "resources": {"requests": requests}},
        {"name": "b", "resources": {"requests": {"cpu": "500m"}}},
    ]}
    if init:
        spec["initContainers"] = [{"name": "i", "resources": {"requests": init}}]
    return v1("V1Pod", {"metadata": {"name": "p"}, "spec": spec, "status": {"phase": phase}})


# --- V1Node -> NodeInfo ---------------------------------------------------------------


def test_node_is_normalized_and_free_is_allocatable_minus_pod_requests() -> None:
    pods = [
        v1pod({"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "2"}),
        v1pod({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}, phase="Pending"),
        v1pod({"cpu": "8", "nvidia.com/gpu": "4"}, phase="Succeeded"),  # holds nothing
    ]
    node = node_info(v1node(A100, ALLOC), pods)
    assert node.labels["fuyao.io/gpu-model"] == "A100"
    assert node.labels["fuyao.io/gpu-memory"] == "80Gi"
    assert node.allocatable.cpu_milli == 32_000
    assert node.free.cpu_milli == 32_000 - 2500 - 1500
    assert node.free.memory_mib == 256 * 1024 - 9 * 1024
    assert node.free.pods == 108
    assert [d.free_milli for d in node.devices] == [0, 0, 0] + [1000] * 5
    assert not node.unschedulable


@pytest.mark.parametrize(
    ("ready", "cordoned", "unschedulable"),
    [("True", False, False), ("False", False, True), ("Unknown", False, True),
     ("True", True, True)],
    ids=["ready", "not-ready", "unknown", "cordoned"],
)
def test_not_ready_or_cordoned_nodes_are_unschedulable(
    ready: str, cordoned: bool, unschedulable: bool
) -> None:
    node = node_info(v1node(A100, ALLOC, ready=ready, unschedulable=cordoned), [])
    assert node.unschedulable is unschedulable


def test_init_containers_count_as_the_max_not_the_sum() -> None:
    pod = v1pod({"cpu": "1"}, init={"cpu": "4", "memory": "2Gi"})
    requests = pod_requests(pod)
    assert requests["cpu"] == 4000  # max(1 + 0.5, 4)
    assert requests["memory"] == 2048


def test_labels_the_agent_wrote_are_derived_again_not_taken_as_overrides() -> None:
    labels = A100 | {"fuyao.io/gpu-model": "V100", "fuyao.io/site": "lab-7"}
    written = v1node(labels, ALLOC, annotations={"fuyao.io/derived-labels": "fuyao.io/gpu-model"})
    node = node_info(written, [])
    assert node.labels["fuyao.io/gpu-model"] == "A100"  # our stale label is ignored
    assert node.labels["fuyao.io/site"] == "lab-7"  # an admin's label still wins


# --- pods -> phase ---------------------------------------------------------------------


def phase_pod(phase: str, node: str = "", condition: dict[str, str] | None = None) -> Any:
    return v1("V1Pod", {
        "metadata": {"name": "p"},
        "spec": {"nodeName": node or None, "containers": [{"name": "task"}]},
        "status": {"phase": phase, "conditions": [condition] if condition else []},
    })


UNSCHED = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
           "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}
PHASES = {
    "created": ([phase_pod("Pending")], 1, (Phase.ACCEPTED, "", "")),
    "unschedulable": ([phase_pod("Pending", condition=UNSCHED)], 1,
                      (Phase.UNSCHEDULABLE, "", UNSCHED["message"])),
    "bound": ([phase_pod("Pending", "n1")], 1, (Phase.BOUND, "n1", "")),
    "running": ([phase_pod("Running", "n1")], 1, (Phase.RUNNING, "n1", "")),
    "gang partly bound": ([phase_pod("Running", "n1"), phase_pod("Pending")], 2,
                          (Phase.ACCEPTED, "", "")),
    "gang running on two nodes": ([phase_pod("Running", "n2"), phase_pod("Running", "n1")], 2,
                                  (Phase.RUNNING, "n1,n2", "")),
    "gang missing a pod": ([phase_pod("Running", "n1")], 2, (Phase.ACCEPTED, "", "")),
    "succeeded": ([phase_pod("Succeeded", "n1")], 1, (Phase.SUCCEEDED, "n1", "")),
    "one replica failed": ([phase_pod("Succeeded", "n1"), phase_pod("Failed", "n2")], 2,
                           (Phase.FAILED, "n1,n2", "pod failed")),
}


@pytest.mark.parametrize(("pods", "replicas", "wanted"), PHASES.values(), ids=PHASES)
def test_copy_phase(pods: list[Any], replicas: int, wanted: tuple[Phase, str, str]) -> None:
    assert copy_phase(pods, replicas) == wanted


# --- manifests -------------------------------------------------------------------------


def command(selector: str = "", gpu: int = 2000, replicas: int = 2) -> pb.PlaceTask:
    workload = pb.TaskWorkload(image="pytorch:2", command=["python", "train.py"], cpu_milli=4000,
                               memory_mib=16384, gpu_milli=gpu, replicas=replicas,
                               selector=selector, priority=5)
    return pb.PlaceTask(task_id="0193f1d2-aaaa", generation=3, name="train", workload=workload)


def test_pod_manifests_one_per_replica_with_requests_and_labels() -> None:
    pods = pod_manifests(command(), NS, selector=parse_selector(""))
    assert [p["metadata"]["name"] for p in pods] == [
        replica_name("0193f1d2-aaaa", 3, 0), replica_name("0193f1d2-aaaa", 3, 1)]
    assert pods[0]["metadata"]["name"].startswith("fy-0193f1d2-")
    assert pods[0]["metadata"]["name"].endswith("-g3-0")
    meta = pods[1]["metadata"]
    assert meta["labels"]["fuyao.io/task-id"] == "0193f1d2-aaaa"
    assert meta["labels"]["fuyao.io/generation"] == "3"
    assert meta["labels"]["fuyao.io/replicas"] == "2"
    assert meta["annotations"]["fuyao.io/task-id"] == "0193f1d2-aaaa"
    container = pods[0]["spec"]["containers"][0]
    assert container["command"] == ["python", "train.py"]
    assert container["resources"] == {
        "requests": {"cpu": "4000m", "memory": "16384Mi", "nvidia.com/gpu": "2"},
        "limits": {"nvidia.com/gpu": "2"},
    }
    assert pods[0]["spec"]["restartPolicy"] == "Never"
    assert "affinity" not in pods[0]["spec"]


def test_a_gpu_share_takes_a_whole_card_in_kubernetes() -> None:
    pod = pod_manifests(command(gpu=500, replicas=1), NS, selector=parse_selector(""))[0]
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def expressions(selector: str, values: dict[str, set[str]] | None = None) -> list[Any]:
    affinity = node_affinity(parse_selector(selector), values or {})
    assert affinity is not None
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(terms) == 1
    return list(terms[0]["matchExpressions"])


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


AFFINITY = {
    "equals": ("kubernetes.io/arch = arm64", [expr("kubernetes.io/arch", "In", "arm64")]),
    "not equals": ("fuyao.io/site != sh-1", [expr("fuyao.io/site", "NotIn", "sh-1")]),
    "in": ("fuyao.io/gpu-model in (V100, T4)", [expr("fuyao.io/gpu-model", "In", "T4", "V100")]),
    "notin": ("fuyao.io/region notin (a, b)", [expr("fuyao.io/region", "NotIn", "a", "b")]),
    "exists": ("fuyao.io/nvlink-enabled", [expr("fuyao.io/nvlink-enabled", "Exists")]),
    "not exists": ("!fuyao.io/npu-model", [expr("fuyao.io/npu-model", "DoesNotExist")]),
    "model bound": ("fuyao.io/gpu-model >= A100",
                    [expr("fuyao.io/gpu-model", "In", "A100", "B200", "H100", "H200", "L40S")]),
    "model below": ("fuyao.io/gpu-model < V100", [expr("fuyao.io/gpu-model", "In", "P100", "T4")]),
    "count at least": ("fuyao.io/gpu-count >= 4", [expr("fuyao.io/gpu-count", "Gt", "3")]),
    "count range": ("fuyao.io/gpu-count in (1, 2), fuyao.io/gpu-count = 2..8", [
        expr("fuyao.io/gpu-count", "In", "1", "2"),
        expr("fuyao.io/gpu-count", "Gt", "1"), expr("fuyao.io/gpu-count", "Lt", "9")]),
}


@pytest.mark.parametrize(("selector", "wanted"), AFFINITY.values(), ids=AFFINITY)
def test_selector_translates_to_node_affinity(selector: str, wanted: list[Any]) -> None:
    assert expressions(selector) == wanted


def test_other_ordered_comparisons_expand_to_the_values_nodes_have() -> None:
    seen = {"fuyao.io/gpu-memory": {"16Gi", "40Gi", "80Gi"}}
    assert expressions("fuyao.io/gpu-memory >= 40Gi", seen) == [
        expr("fuyao.io/gpu-memory", "In", "40Gi", "80Gi")]
    assert expressions("fuyao.io/gpu-memory > 100Gi", seen) == [
        expr("fuyao.io/gpu-memory", "In", "fuyao-no-node-matches")]


# --- list + watch against the stand-in -------------------------------------------------


@pytest.fixture
def standin() -> Iterator[KubeStandIn]:
    server = KubeStandIn().start()
    server.add_node("gpu-0", A100, ALLOC)
    server.add_node("cpu-0", {"kubernetes.io/arch": "arm64"},
                    {"cpu": "16", "memory": "64Gi", "pods": "110"})
    server.add_pod("kube-system", "dns", "cpu-0", {"cpu": "2", "memory": "1Gi"})
    yield server
    server.close()


def make_backend(standin: KubeStandIn, **kwargs: Any) -> KubeBackend:
    configuration = client.Configuration(host=standin.url)
    return KubeBackend(client.ApiClient(configuration), namespace=NS, retry_seconds=0.1,
                       **kwargs)


@pytest.fixture
async def kube(standin: KubeStandIn) -> AsyncIterator[tuple[KubeBackend, Recorder]]:
    backend = make_backend(standin)
    recorder = Recorder()
    await backend.start(recorder)
    yield backend, recorder
    await backend.stop()


def place(task_id: str = "t-1", gen: int = 1, **workload: Any) -> pb.PlaceTask:
    fields = {"cpu_milli": 1000, "memory_mib": 1024, "gpu_milli": 1000, "replicas": 1} | workload
    return pb.PlaceTask(task_id=task_id, generation=gen, name=task_id,
                        workload=pb.TaskWorkload(**fields))


def view(backend: KubeBackend, name: str) -> Any:
    return next(n for n in backend.nodes() if n.name == name)


async def test_lists_nodes_with_other_pods_counted(kube: tuple[KubeBackend, Recorder]) -> None:
    backend, _ = kube
    assert [n.name for n in backend.nodes()] == ["cpu-0", "gpu-0"]
    assert view(backend, "cpu-0").free.cpu_milli == 14_000
    assert view(backend, "gpu-0").labels["fuyao.io/gpu-model"] == "A100"


async def test_task_lifecycle_reports_node_deltas_before_phases(
    kube: tuple[KubeBackend, Recorder], standin: KubeStandIn
) -> None:
    backend, rec = kube
    await backend.place(place(selector="fuyao.io/gpu-model >= A100"))
    pod = replica_name("t-1", 1, 0)
    assert standin.pod_names() == [pod]
    terms = standin.pods[(NS, pod)]["spec"]["affinity"]["nodeAffinity"]
    assert "A100" in json.dumps(terms)
    standin.bind(NS, pod, "gpu-0")
    await rec.until(lambda: Phase.BOUND in rec.phases())
    standin.set_phase(NS, pod, "Running")
    await rec.until(lambda: Phase.RUNNING in rec.phases())
    assert [d.free_milli for d in view(backend, "gpu-0").devices][:2] == [0, 1000]
    standin.set_phase(NS, pod, "Succeeded")
    await rec.until(lambda: Phase.SUCCEEDED in rec.phases())
    flow = [("nodes", e.upserted[0].free.pods) if isinstance(e, NodesChanged)
            else ("task", e.status.phase) for e in rec.events
            if not isinstance(e, NodesChanged) or (e.upserted and e.upserted[0].name == "gpu-0")]
    start = flow.index(("task", Phase.ACCEPTED))
    assert flow[start:] == [
        ("task", Phase.ACCEPTED),
        ("nodes", 109),
        ("task", Phase.BOUND),
        ("task", Phase.RUNNING),
        ("nodes", 110),
        ("task", Phase.SUCCEEDED),
    ]
    assert backend.tasks()[-1].node == "gpu-0"


async def test_duplicate_place_is_a_no_op(
    kube: tuple[KubeBackend, Recorder], standin: KubeStandIn
) -> None:
    backend, rec = kube
    await backend.place(place())
    await backend.place(place())
    assert rec.phases() == [Phase.ACCEPTED]
    assert [p for m, p in standin.requests if m == "POST" and p.endswith("/pods")] == [
        f"/api/v1/namespaces/{NS}/pods"]


async def test_cancel_deletes_pods_then_reports_cancelled(
    kube: tuple[KubeBackend, Recorder], standin: KubeStandIn
) -> None:
    backend, rec = kube
    await backend.place(place())
    pod = replica_name("t-1", 1, 0)
    standin.bind(NS, pod, "gpu-0")
    await rec.until(lambda: Phase.BOUND in rec.phases())
    await backend.cancel("t-1", 1, "user asked")
    await rec.until(lambda: Phase.CANCELLED in rec.phases())
    assert standin.pod_names() == []
    assert view(backend, "gpu-0").free.pods == 110
    last_delta = max(i for i, e in enumerate(rec.events) if isinstance(e, NodesChanged))
    cancelled = next(i for i, e in enumerate(rec.events) if isinstance(e, TaskChanged)
                     and e.status.phase is Phase.CANCELLED)
    assert last_delta < cancelled
    assert backend.tasks()[0].reason == "user asked"


async def test_newer_generation_replaces_the_older_copy(
    kube: tuple[KubeBackend, Recorder], standin: KubeStandIn
) -> None:
    backend, rec = kube
    await backend.place(place(gen=1))
    await backend.place(place(gen=2))
    await rec.until(lambda: Phase.CANCELLED in rec.phases(gen=1))
    assert standin.pod_names() == [replica_name("t-1", 2, 0)]
    assert rec.phases(gen=2) == [Phase.ACCEPTED]


async def test_unschedulable_then_bound(
    kube: tuple[KubeBackend, Recorder], standin: KubeStandIn
) -> None:
    backend, rec = kube
    await backend.place(place())
    pod = replica_name("t-1", 1, 0)
    standin.unschedulable(NS, pod, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
    await rec.until(lambda: Phase.UNSCHEDULABLE in rec.phases())
    assert "Insufficient nvidia.com/gpu" in backend.tasks()[0].reason
    standin.bind(NS, pod, "gpu-0")
    await rec.until(lambda: Phase.BOUND in rec.phases())


async def test_failed_pod_fails_the_copy(
    kube: tuple[KubeBackend, Recorder], standin: KubeStandIn
) -> None:
    backend, rec = kube
    await backend.place(place())
    pod = replica_name("t-1", 1, 0)
    standin.bind(NS, pod, "gpu-0")
    standin.set_phase(NS, pod, "Failed", exit_code=3)
    await rec.until(lambda: Phase.FAILED in rec.phases())
    assert backend.tasks()[0].reason == "container task exited 3: boom"


async def test_nodes_get_the_derived_labels_written(
    kube: tuple[KubeBackend, Recorder], standin: KubeStandIn
) -> None:
    _, rec = kube
    await rec.until(lambda: standin.nodes["gpu-0"]["metadata"]["labels"].get(
        "fuyao.io/gpu-model") == "A100")
    annotations = standin.nodes["gpu-0"]["metadata"]["annotations"]
    assert "fuyao.io/gpu-model" in annotations["fuyao.io/derived-labels"].split(",")

    def patches() -> int:
        return len([m for m, _ in standin.requests if m == "PATCH"])

    # Our own patch comes back as MODIFIED: no patch loop. The list and the watch may each
    # have sent one before the patched node was seen, so wait for the count to settle.
    await asyncio.sleep(0.3)
    settled = patches()
    await asyncio.sleep(0.5)
    assert patches() == settled <= 2


async def test_node_added_and_removed_are_reported(
    kube: tuple[KubeBackend, Recorder], standin: KubeStandIn
) -> None:
    backend, rec = kube
    standin.add_node("gpu-1", A100, ALLOC)
    await rec.until(lambda: "gpu-1" in [n.name for n in backend.nodes()])
    standin.remove_node("gpu-1")
    await rec.until(lambda: any(isinstance(e, NodesChanged) and e.removed == ("gpu-1",)
                                for e in rec.events))


async def test_a_restarted_agent_finds_its_copies_from_their_pods(standin: KubeStandIn) -> None:
    first = make_backend(standin, label_nodes=False)
    await first.start(Recorder())
    await first.place(place())
    standin.bind(NS, replica_name("t-1", 1, 0), "gpu-0")
    standin.set_phase(NS, replica_name("t-1", 1, 0), "Running")
    await first.stop()
    second = make_backend(standin, label_nodes=False)
    await second.start(Recorder())
    try:
        assert [(t.task_id, t.generation, t.phase, t.node) for t in second.tasks()] == [
            ("t-1", 1, Phase.RUNNING, "gpu-0")]
        await second.place(place())  # the hub resends: still a no-op
        assert standin.pod_names() == [replica_name("t-1", 1, 0)]
    finally:
        await second.stop()


async def test_unreachable_api_server_is_a_clear_error() -> None:
    backend = KubeBackend(client.ApiClient(client.Configuration(host="http://127.0.0.1:1")))
    with pytest.raises(Transient, match="cannot reach the Kubernetes API"):
        await backend.start(Recorder())


# --- pods that stop for someone else's reasons ---------------------------------------------


async def running_copy(backend: KubeBackend, rec: Recorder, standin: KubeStandIn) -> str:
    await backend.place(place())
    pod = replica_name("t-1", 1, 0)
    standin.bind(NS, pod, "gpu-0")
    standin.set_phase(NS, pod, "Running")
    await rec.until(lambda: Phase.RUNNING in rec.phases())
    return pod


async def test_a_force_deleted_pod_fails_the_copy_and_a_resync_says_so(
    kube: tuple[KubeBackend, Recorder], standin: KubeStandIn
) -> None:
    backend, rec = kube
    pod = await running_copy(backend, rec, standin)
    standin.delete_pod(NS, pod, grace=0)  # kubectl delete --force --grace-period=0
    await rec.until(lambda: Phase.FAILED in rec.phases())
    assert rec.phases().count(Phase.FAILED) == 1
    (status,) = backend.tasks()  # what a full resync sends: not "running" any more
    assert (status.phase, status.node) == (Phase.FAILED, "gpu-0")
    assert status.reason == (f"pod {pod} was deleted (not by the Fuyao agent; "
                             "the API does not say by whom)")


async def test_a_deleted_pod_says_who_deleted_it_not_exit_137(
    kube: tuple[KubeBackend, Recorder], standin: KubeStandIn
) -> None:
    backend, rec = kube
    pod = await running_copy(backend, rec, standin)
    standin.delete_pod(NS, pod, disruption=("EvictionByEvictionAPI",
                                            "Eviction API: evicting"))
    await rec.until(lambda: pod not in standin.pod_names())
    await rec.until(lambda: Phase.FAILED in rec.phases())
    await asyncio.sleep(0.1)
    assert rec.phases().count(Phase.FAILED) == 1
    assert backend.tasks()[0].reason == (
        f"pod {pod} was deleted by EvictionByEvictionAPI: Eviction API: evicting")


async def test_a_vanished_node_is_named(
    kube: tuple[KubeBackend, Recorder], standin: KubeStandIn
) -> None:
    backend, rec = kube
    pod = await running_copy(backend, rec, standin)
    standin.remove_node("gpu-0")
    await rec.until(lambda: "gpu-0" not in [n.name for n in backend.nodes()])
    standin.delete_pod(NS, pod, grace=0, disruption=("DeletionByPodGC", "node gone"))
    await rec.until(lambda: Phase.FAILED in rec.phases())
    assert backend.tasks()[0].reason == (
        f"node gpu-0 disappeared; its pod {pod} was deleted by DeletionByPodGC: node gone")


async def test_cancel_is_not_reported_as_a_deletion_by_someone_else(
    kube: tuple[KubeBackend, Recorder], standin: KubeStandIn
) -> None:
    backend, rec = kube
    await running_copy(backend, rec, standin)
    await backend.cancel("t-1", 1, "user asked")
    await rec.until(lambda: standin.pod_names() == [])
    await rec.until(lambda: Phase.CANCELLED in rec.phases())
    assert Phase.FAILED not in rec.phases()


async def test_finished_pods_are_deleted_after_the_configured_while(
    standin: KubeStandIn
) -> None:
    backend = make_backend(standin, label_nodes=False, finished_pod_ttl=0.3)
    rec = Recorder()
    await backend.start(rec)
    try:
        pod = await running_copy(backend, rec, standin)
        standin.set_phase(NS, pod, "Succeeded")
        await rec.until(lambda: Phase.SUCCEEDED in rec.phases())
        assert standin.pod_names() == [pod]  # kept a while, for logs
        await rec.until(lambda: standin.pod_names() == [])
        assert [t.phase for t in backend.tasks()] == [Phase.SUCCEEDED]
        assert rec.phases() == [Phase.ACCEPTED, Phase.BOUND, Phase.RUNNING, Phase.SUCCEEDED]
    finally:
        await backend.stop()


def test_the_hubs_model_pin_is_written_once() -> None:
    # The hub sends the task's selector plus the model of its fit.
    selector = parse_selector("fuyao.io/gpu-model >= A100, fuyao.io/gpu-model = A100, "
                              "fuyao.io/gpu-model = A100")
    pod = pod_manifests(command(str(selector), replicas=1), NS, selector=selector)[0]
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [expr("fuyao.io/gpu-model", "In", "A100")]}]
    assert pod["metadata"]["annotations"]["fuyao.io/selector"] == (
        "fuyao.io/gpu-model>=A100, fuyao.io/gpu-model=A100")


def failed_pod(status: dict[str, Any], deleting: bool = False) -> Any:
    meta: dict[str, Any] = {"name": "p"}
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return v1("V1Pod", {"metadata": meta, "spec": {"nodeName": "n1", "containers": [
        {"name": "task"}]}, "status": status})


def container(state: dict[str, Any]) -> dict[str, Any]:
    return {"name": "task", "image": "registry/x:1", "imageID": "", "ready": False,
            "restartCount": 0, "state": state}


KILLED = {"terminated": {"exitCode": 137, "reason": "Error"}}
STOPPED = {
    "deleted, not exit 137": (failed_pod({"phase": "Failed", "containerStatuses": [
        container(KILLED)]}, deleting=True),
        "pod p was deleted (not by the Fuyao agent; the API does not say by whom)"),
    "evicted": (failed_pod({"phase": "Failed", "reason": "Evicted",
                            "message": "The node was low on resource: memory."}),
                "pod p was evicted: The node was low on resource: memory."),
    "preempted": (failed_pod({"phase": "Failed", "containerStatuses": [container(KILLED)],
                              "conditions": [{"type": "DisruptionTarget", "status": "True",
                                              "reason": "PreemptionByScheduler",
                                              "message": "default-scheduler: preempting"}]}),
                  "pod p was stopped by PreemptionByScheduler: default-scheduler: preempting"),
    "oom": (failed_pod({"phase": "Failed", "containerStatuses": [container(
        {"terminated": {"exitCode": 137, "reason": "OOMKilled"}})]}),
        "container task was killed for running out of memory (OOMKilled)"),
    "image pull back-off": (failed_pod({"phase": "Pending", "containerStatuses": [container(
        {"waiting": {"reason": "ImagePullBackOff",
                     "message": 'Back-off pulling image "registry/x:1"'}})]}),
        'image pull failed for container task (ImagePullBackOff): '
        'Back-off pulling image "registry/x:1"'),
    "invalid image name": (failed_pod({"phase": "Pending", "containerStatuses": [container(
        {"waiting": {"reason": "InvalidImageName"}})]}),
        "image pull failed for container task (InvalidImageName): registry/x:1"),
    "first pull error still retried": (failed_pod({"phase": "Pending", "containerStatuses": [
        container({"waiting": {"reason": "ErrImagePull"}})]}), None),
}


@pytest.mark.parametrize(("pod", "reason"), STOPPED.values(), ids=STOPPED)
def test_why_a_pod_stopped(pod: Any, reason: str | None) -> None:
    phase, _, got = copy_phase([pod], 1)
    if reason is None:
        assert phase is Phase.BOUND
    else:
        assert (phase, got) == (Phase.FAILED, reason)


async def test_the_agent_lists_again_after_its_watch_is_compacted_away(
    standin: KubeStandIn
) -> None:
    standin.bookmark_interval = 3600.0   # bookmarks would keep the watch's version fresh
    backend = make_backend(standin, label_nodes=False, watch_timeout=1)
    rec = Recorder()
    await backend.start(rec)
    try:
        standin.add_pod("kube-system", "later", "cpu-0", {"cpu": "1"})   # newer than any node
        await rec.until(lambda: view(backend, "cpu-0").free.cpu_milli == 13_000)
        standin.compact()   # the next nodes watch, from an older resourceVersion, gets 410
        await asyncio.sleep(1.5)
        standin.add_node("gpu-late", A100, ALLOC)
        await rec.until(lambda: "gpu-late" in [n.name for n in backend.nodes()], timeout=10)
        assert ("GET", "/api/v1/nodes") in standin.requests[2:]   # listed again
    finally:
        await backend.stop()
