"""``image_platforms``: nodes of another architecture never match a task (dry-run and the
placement loop over REST, on a real hub with agents reporting amd64 and arm64 nodes)."""

from __future__ import annotations

import pytest

from fuyao.inventory import NodeInfo, ResourceAmounts
from fuyao.labels import normalize_node
from fuyao.spec import TaskSpec
from tests.features.conftest import Fleet, until


def cpu_node(name: str, arch: str) -> NodeInfo:
    res = ResourceAmounts(cpu_milli=32_000, memory_mib=128 * 1024, pods=110)
    labels = normalize_node({"kubernetes.io/arch": arch}, {}).labels
    return NodeInfo(name=name, labels=labels, allocatable=res, free=res, devices=())


async def two_arches(fleet: Fleet) -> None:
    # The arm cluster weighs far more: without a platform every task would go there.
    await fleet.join("arm", [cpu_node("arm-0", "arm64")], weight=100)
    await fleet.join("x86", [cpu_node("x86-0", "amd64")], weight=1)


@pytest.mark.parametrize(("platforms", "cluster"), [
    ([], "arm"),
    (["linux/amd64"], "x86"),
    (["linux/arm64/v8"], "arm"),
    (["linux/amd64", "linux/arm64"], "arm"),
])
async def test_a_platform_keeps_a_task_off_other_architectures(
        fleet: Fleet, platforms: list[str], cluster: str) -> None:
    await two_arches(fleet)
    r = await fleet.h.api.post("/api/v1/tasks:dry-run", json={
        "name": "p", "cpu": 1, "image_platforms": platforms})
    assert r.status_code == 200, r.text
    assert r.json()["cluster"] == cluster
    if platforms == ["linux/amd64"]:
        assert r.json()["reasons"] == {
            "arm": "no node matches kubernetes.io/arch=amd64"}


async def test_the_placement_loop_never_binds_another_architecture(fleet: Fleet) -> None:
    await two_arches(fleet)
    r = await fleet.h.api.post("/api/v1/tasks", json={
        "name": "web", "cpu": 1, "image_platforms": ["linux/amd64"]})
    assert r.status_code == 201, r.text
    await until(lambda: (t := fleet.h.hub.tasks.by_name("web")) is not None
                and t.cluster is not None)
    assert (await fleet.task("web"))["cluster"] == "x86"
    r = await fleet.h.api.post("/api/v1/tasks", json={
        "name": "riscv", "cpu": 1, "image_platforms": ["linux/riscv64"]})
    assert r.status_code == 201, r.text
    await until(lambda: bool((t := fleet.h.hub.tasks.by_name("riscv")) and t.reasons))
    waiting = await fleet.task("riscv")
    assert waiting["state"] == "Queued" and waiting["reasons"] == {
        "arm": "no node matches kubernetes.io/arch=riscv64",
        "x86": "no node matches kubernetes.io/arch=riscv64"}
    view = await fleet.h.api.post("/api/v1/tasks:dry-run", json={
        "name": "riscv2", "cpu": 1, "image_platforms": ["linux/riscv64"]})
    assert view.json()["cluster"] is None
    assert view.json()["histogram"] == {
        "no node matches kubernetes.io/arch=riscv64": 2}


@pytest.mark.parametrize("bad", ["amd64", "linux/", "linux/amd64/v8/extra"])
async def test_a_malformed_platform_is_400_and_stores_nothing(fleet: Fleet, bad: str) -> None:
    r = await fleet.h.api.post("/api/v1/tasks", json={
        "name": "bad", "cpu": 1, "image_platforms": [bad]})
    assert r.status_code == 400, r.text
    assert "must look like os/arch, e.g. linux/amd64" in r.text
    assert (await fleet.h.api.get("/api/v1/tasks/bad")).status_code == 404


def test_platforms_become_an_architecture_selector() -> None:
    spec = TaskSpec(name="t", image_platforms=["linux/arm64", "linux/amd64", "linux/arm64/v8"],
                    gpu_model="A100")
    assert spec.effective_selector() == (
        "kubernetes.io/arch in (amd64, arm64), fuyao.io/gpu-model = A100")
