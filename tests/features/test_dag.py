"""Dependencies (``after``): refused when missing or cyclic, held until they succeed,
failed with the reason when one fails or is cancelled."""

from __future__ import annotations

import pytest

from fuyao.wire.v1 import agent_pb2 as pb
from hub.dag import find_cycle
from tests.features.conftest import Fleet, gpu_node


@pytest.mark.parametrize(
    ("graph", "cycle"),
    [
        pytest.param({"a": [], "b": ["a"]}, [], id="chain"),
        pytest.param({"a": ["a"]}, ["a", "a"], id="self"),
        pytest.param({"a": ["b"], "b": ["c"], "c": ["a"]}, ["a", "b", "c", "a"], id="three"),
        pytest.param({"a": ["x"], "b": ["a"]}, [], id="outside-names-ignored"),
        pytest.param({"a": [], "b": ["a"], "c": ["a", "b"], "d": ["c", "b"]}, [], id="diamond"),
    ],
)
def test_find_cycle(graph: dict[str, list[str]], cycle: list[str]) -> None:
    assert find_cycle(graph) == cycle


def test_a_long_chain_is_no_cycle_and_needs_no_recursion() -> None:
    graph = {f"t{i}": [f"t{i - 1}"] if i else [] for i in range(20_000)}
    assert find_cycle(graph) == []


async def test_bad_dependencies_are_refused_and_store_nothing(fleet: Fleet) -> None:
    api = fleet.h.api
    r = await api.post("/api/v1/tasks", json={"name": "b", "after": ["nope"]})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == (
        "task b: dependency 'nope' does not exist (submit it first, or in the same batch)")
    r = await api.post("/api/v1/tasks:batch", json={"tasks": [
        {"name": "a", "after": ["c"]}, {"name": "b", "after": ["a"]},
        {"name": "c", "after": ["b"]}]})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "dependency cycle: a -> c -> b -> a"
    r = await api.post("/api/v1/tasks", json={"name": "a", "after": ["a", "a"]})
    assert r.status_code == 400 and "listed twice" in r.json()["error"]["message"]
    assert (await api.get("/api/v1/tasks")).json() == []


async def test_a_dag_of_three_runs_in_order_and_a_failure_fails_its_dependents(
    fleet: Fleet,
) -> None:
    from tests.features.conftest import until

    agent = await fleet.join("east", [gpu_node("n1", "NVIDIA-A100-SXM4-40GB", 8)])
    api = fleet.h.api
    r = await api.post("/api/v1/tasks:batch", json={"tasks": [
        {"name": "prep", "gpu": 1},
        {"name": "train", "gpu": 1, "after": ["prep"]},
        {"name": "eval", "gpu": 1, "after": ["train", "prep"]}]})
    assert r.status_code == 201, r.text
    place = await agent.expect("place")
    assert place.place.name == "prep"
    train = await fleet.task("train")
    assert train["state"] == "Queued"
    await until(lambda: fleet.h.hub.tasks.by_name("train").message  # type: ignore[union-attr]
                == "waiting for prep (Placed)")
    agent.report(place.place.task_id, place.place.generation, pb.TASK_PHASE_SUCCEEDED)
    place = await agent.expect("place")
    assert place.place.name == "train"
    agent.report(place.place.task_id, place.place.generation, pb.TASK_PHASE_FAILED,
                 reason="exit code 3")
    await until(lambda: fleet.h.hub.tasks.by_name("eval") is None)
    ended = await fleet.task("eval")
    assert ended["state"] == "Failed"
    assert ended["message"] == "dependency train failed: exit code 3"
    later = await api.post("/api/v1/tasks", json={"name": "late", "after": ["train"]})
    assert later.status_code == 201   # accepted, then failed with the same reason
    await until(lambda: fleet.h.hub.tasks.by_name("late") is None)
    assert (await fleet.task("late"))["message"] == "dependency train failed: exit code 3"


async def test_a_cancelled_dependency_fails_its_dependent(fleet: Fleet) -> None:
    from tests.features.conftest import until

    api = fleet.h.api
    assert (await api.post("/api/v1/tasks", json={"name": "a", "gpu": 64})).status_code == 201
    assert (await api.post("/api/v1/tasks", json={"name": "b", "after": ["a"]})
            ).status_code == 201
    assert (await api.post("/api/v1/tasks/a/cancel")).status_code == 200
    await until(lambda: fleet.h.hub.tasks.by_name("b") is None)
    assert (await fleet.task("b"))["message"] == (
        "dependency a was cancelled: cancelled by user")
