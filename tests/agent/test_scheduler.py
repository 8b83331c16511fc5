"""The sim member's node scheduler: filter reasons, best-fit, gangs and per-device accounting."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fuyao.inventory import NodeInfo
from fuyao.nodebuild import build_node
from fuyao.nodescheduler import (
    REASON_CPU,
    REASON_GPU,
    REASON_GPU_MEMORY,
    REASON_PODS,
    REASON_SELECTOR,
    REASON_UNSCHEDULABLE,
    Binding,
    LocalScheduler,
    Policy,
    Unfit,
)
from fuyao.selector import parse_selector
from fuyao.spec import TaskRequests


def gpu_node(name: str, cards: int, product: str, memory_mib: int, cpu: str = "64") -> NodeInfo:
    labels = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.memory": str(memory_mib)}
    allocatable = {"cpu": cpu, "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(cards)}
    return build_node(name, labels, allocatable)


def cpu_node(name: str, cpu: str = "32", pods: str = "110", arch: str = "amd64") -> NodeInfo:
    labels = {"kubernetes.io/arch": arch}
    return build_node(name, labels, {"cpu": cpu, "memory": "128Gi", "pods": pods})


def req(
    cpu: int = 1000, mem: int = 1024, gpu: int = 0, gpu_mem: int = 0, n: int = 1
) -> TaskRequests:
    return TaskRequests(
        cpu_milli=cpu, memory_mib=mem, gpu_milli=gpu, gpu_memory_mib=gpu_mem, replicas=n
    )


def nodes_of(bindings: tuple[Binding, ...] | Unfit) -> list[str]:
    assert not isinstance(bindings, Unfit), bindings
    return [b.node for b in bindings]


FLEET = [
    gpu_node("a100-0", 8, "NVIDIA-A100-SXM4-80GB", 81920),
    gpu_node("t4-0", 4, "Tesla-T4", 15360),
    cpu_node("cpu-0"),
    cpu_node("arm-0", arch="arm64"),
]

PLACEMENTS = {
    # name: (selector, requests, wanted nodes)
    # cpu-0 and arm-0 score the same; the tie breaks by name.
    "cpu task avoids idle GPU nodes": ("", req(), ["arm-0"]),
    "arch selector": ("kubernetes.io/arch = arm64", req(), ["arm-0"]),
    "model bound picks the A100": ("fuyao.io/gpu-model >= A100", req(gpu=1000), ["a100-0"]),
    "device memory picks the A100": ("", req(gpu=1000, gpu_mem=40_000), ["a100-0"]),
    "best fit packs the smaller GPU node": ("", req(gpu=1000), ["t4-0"]),
    "gang of whole cards on one node": (
        "fuyao.io/gpu-model = A100", req(gpu=4000, n=2), ["a100-0", "a100-0"]
    ),
    "gang spills across nodes": ("", req(gpu=4000, n=3), ["t4-0", "a100-0", "a100-0"]),
}


@pytest.mark.parametrize(("selector", "request_", "wanted"), PLACEMENTS.values(), ids=PLACEMENTS)
def test_placement(selector: str, request_: TaskRequests, wanted: list[str]) -> None:
    outcome = LocalScheduler(FLEET).schedule(request_, parse_selector(selector))
    assert sorted(nodes_of(outcome)) == sorted(wanted)


REJECTIONS = {
    "selector": (
        [cpu_node("c0"), cpu_node("c1")], "kubernetes.io/arch = arm64", req(),
        f"0/2 nodes are available: 2 {REASON_SELECTOR}.",
    ),
    "cpu": (
        [cpu_node("c0", cpu="2")], "", req(cpu=4000), f"0/1 nodes are available: 1 {REASON_CPU}."
    ),
    "pods": ([cpu_node("c0", pods="0")], "", req(), f"0/1 nodes are available: 1 {REASON_PODS}."),
    "no gpu": ([cpu_node("c0")], "", req(gpu=1000), f"0/1 nodes are available: 1 {REASON_GPU}."),
    "gpu memory": (
        [gpu_node("t0", 4, "Tesla-T4", 15360)], "", req(gpu=500, gpu_mem=32_000),
        f"0/1 nodes are available: 1 {REASON_GPU_MEMORY}.",
    ),
    "histogram counts each reason": (
        [cpu_node("c0"), cpu_node("c1", cpu="1"), gpu_node("t0", 1, "Tesla-T4", 15360)],
        "", req(cpu=2000, gpu=2000),
        f"0/3 nodes are available: 2 {REASON_GPU}, 1 {REASON_CPU}.",
    ),
    "cordoned": (
        [replace(cpu_node("c0"), unschedulable=True)],
        "", req(cpu=0, mem=0), f"0/1 nodes are available: 1 {REASON_UNSCHEDULABLE}.",
    ),
    "gang names the replica": (
        [gpu_node("t0", 4, "Tesla-T4", 15360)], "", req(gpu=2000, n=3),
        f"replica 3/3: 0/1 nodes are available: 1 {REASON_GPU}.",
    ),
}


@pytest.mark.parametrize(("nodes", "selector", "request_", "reason"), REJECTIONS.values(),
                         ids=REJECTIONS)
def test_rejection_reason(
    nodes: list[NodeInfo], selector: str, request_: TaskRequests, reason: str
) -> None:
    scheduler = LocalScheduler(nodes)
    before = scheduler.nodes()
    assert scheduler.schedule(request_, parse_selector(selector)) == Unfit(reason)
    assert scheduler.nodes() == before  # a failed gang leaves nothing bound


def test_gpu_shares_pack_onto_one_card_and_accounting_is_per_device() -> None:
    scheduler = LocalScheduler([gpu_node("t0", 2, "Tesla-T4", 15360)])
    everything = parse_selector("")
    for _ in range(3):
        assert not isinstance(scheduler.schedule(req(gpu=300), everything), Unfit)
    devices = scheduler.node("t0").devices
    assert [d.free_milli for d in devices] == [100, 1000]
    assert devices[0].free_memory_mib == 15360 * 100 // 1000
    # A 200m share no longer fits card 0; a whole card still fits card 1.
    share = scheduler.schedule(req(gpu=200), everything)
    assert not isinstance(share, Unfit)
    assert share[0].devices == (("t0/gpu1", 200),)
    assert isinstance(scheduler.schedule(req(gpu=1000), everything), Unfit)


def test_spread_policy_uses_the_emptiest_card_and_node() -> None:
    scheduler = LocalScheduler(
        [gpu_node("t0", 2, "Tesla-T4", 15360), gpu_node("t1", 2, "Tesla-T4", 15360)],
        Policy.SPREAD,
    )
    everything = parse_selector("")
    first = scheduler.schedule(req(gpu=500), everything)
    second = scheduler.schedule(req(gpu=500), everything)
    assert not isinstance(first, Unfit) and not isinstance(second, Unfit)
    assert first[0].node != second[0].node


def test_release_gives_back_exactly_what_was_taken() -> None:
    scheduler = LocalScheduler([gpu_node("a0", 8, "NVIDIA-A100-SXM4-80GB", 81920)])
    before = scheduler.nodes()
    bound = scheduler.schedule(req(cpu=4000, mem=8192, gpu=3000, n=2), parse_selector(""))
    assert not isinstance(bound, Unfit)
    node = scheduler.node("a0")
    assert node.free.cpu_milli == node.allocatable.cpu_milli - 8000
    assert node.free.pods == 108
    assert sum(1 for d in node.devices if d.free_milli == 0) == 6
    scheduler.release(bound)
    assert scheduler.nodes() == before


def test_ties_break_by_node_name() -> None:
    scheduler = LocalScheduler([cpu_node("c2"), cpu_node("c1"), cpu_node("c3")])
    assert nodes_of(scheduler.schedule(req(), parse_selector(""))) == ["c1"]


# CPU-only work keeps off accelerator nodes while an accelerator-free node fits (a soft
# taint, like nvidia.com/gpu:PreferNoSchedule); past that, the policy's score decides.
# name: (nodes, policy, bound first as (selector, requests), selector, requests, wanted nodes)
CPU_ONLY: dict[str, tuple[list[NodeInfo], Policy, list[tuple[str, TaskRequests]], str,
                          TaskRequests, list[str]]] = {
    "busy GPU node does not attract CPU work": (
        FLEET, Policy.BEST_FIT, [("fuyao.io/gpu-model = A100", req(cpu=8000, gpu=1000))],
        "", req(), ["arm-0"],
    ),
    "spread keeps CPU work off an idle GPU node too": (
        [gpu_node("a100-0", 8, "NVIDIA-A100-SXM4-80GB", 81920), cpu_node("cpu-0")],
        Policy.SPREAD, [], "", req(), ["cpu-0"],
    ),
    "GPU node only when no CPU node has room, then best fit": (
        [gpu_node("a100-0", 8, "NVIDIA-A100-SXM4-80GB", 81920),
         gpu_node("t4-0", 4, "Tesla-T4", 15360), cpu_node("cpu-0", cpu="2")],
        Policy.BEST_FIT, [("fuyao.io/gpu-model = T4", req(gpu=1000))],
        "", req(cpu=4000), ["t4-0"],
    ),
    "selector only GPU nodes match": (
        FLEET, Policy.BEST_FIT, [], "fuyao.io/gpu-model = T4", req(), ["t4-0"],
    ),
    "cordoned CPU node leaves the GPU node": (
        [gpu_node("a100-0", 8, "NVIDIA-A100-SXM4-80GB", 81920),
         replace(cpu_node("cpu-0"), unschedulable=True)],
        Policy.BEST_FIT, [], "", req(), ["a100-0"],
    ),
    "gang spills onto a GPU node only past the CPU room": (
        [gpu_node("a100-0", 8, "NVIDIA-A100-SXM4-80GB", 81920), cpu_node("cpu-0", cpu="4")],
        Policy.SPREAD, [], "", req(cpu=2000, n=3), ["a100-0", "cpu-0", "cpu-0"],
    ),
    "GPU share still packs onto the busy card's node": (
        FLEET, Policy.BEST_FIT, [("fuyao.io/gpu-model = A100", req(gpu=300))],
        "", req(gpu=300), ["a100-0"],
    ),
    "whole card still best-fits the smaller GPU node": (
        FLEET, Policy.BEST_FIT, [], "", req(gpu=1000), ["t4-0"],
    ),
}


@pytest.mark.parametrize(("nodes", "policy", "first", "selector", "request_", "wanted"),
                         CPU_ONLY.values(), ids=CPU_ONLY)
def test_cpu_only_work_prefers_nodes_without_accelerators(
    nodes: list[NodeInfo], policy: Policy, first: list[tuple[str, TaskRequests]],
    selector: str, request_: TaskRequests, wanted: list[str],
) -> None:
    scheduler = LocalScheduler(nodes, policy)
    for earlier_selector, earlier in first:
        nodes_of(scheduler.schedule(earlier, parse_selector(earlier_selector)))
    outcome = scheduler.schedule(request_, parse_selector(selector))
    assert sorted(nodes_of(outcome)) == wanted
