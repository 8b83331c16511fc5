"""Cluster taints and task tolerations: the plugin on its own, then over REST."""

from __future__ import annotations

import pytest

from fuyao.errors import InvalidInput
from fuyao.spec import TaskSpec
from fuyao.taints import Taint, Toleration, parse_taint
from hub.activetask import placement_request
from hub.placement import SUCCESS, Code, CycleState, Handle, Status
from hub.placement.plugins.taint_toleration import TaintToleration
from tests.features.conftest import Fleet, gpu_node
from tests.placement.builders import fleet_of, node

ML = Taint(key="dedicated", value="ml", effect="NoSchedule")
SOFT = Taint(key="spot", effect="PreferNoSchedule")

CASES = [
    ("no-taints", (), [], SUCCESS, 100.0),
    ("untolerated", (ML,), [],
     Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "cluster has a taint the task does not tolerate: dedicated=ml:NoSchedule",
            "TaintToleration"), None),
    ("equal", (ML,), [{"key": "dedicated", "value": "ml"}], SUCCESS, 100.0),
    ("wrong-value", (ML,), [{"key": "dedicated", "value": "web"}],
     Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "cluster has a taint the task does not tolerate: dedicated=ml:NoSchedule",
            "TaintToleration"), None),
    ("exists", (ML,), [{"key": "dedicated", "operator": "Exists"}], SUCCESS, 100.0),
    ("other-effect", (ML,), [{"key": "dedicated", "value": "ml", "effect": "PreferNoSchedule"}],
     Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "cluster has a taint the task does not tolerate: dedicated=ml:NoSchedule",
            "TaintToleration"), None),
    ("soft-untolerated", (SOFT,), [], SUCCESS, 0.0),
    ("soft-tolerated", (SOFT,), [{"key": "spot", "operator": "Exists"}], SUCCESS, 100.0),
]


@pytest.mark.parametrize(("taints", "tolerations", "want", "score"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_taint_toleration(taints: tuple[Taint, ...], tolerations: list[dict[str, str]],
                          want: Status, score: float | None) -> None:
    fleet = fleet_of({"c1": [node("n1")]})
    fleet.upsert_cluster("c1", labels={}, weight=1, headroom=0.0,
                         state=fleet.cluster("c1").state, taints=taints)  # type: ignore[union-attr]
    info = fleet.cluster("c1")
    assert info is not None
    req = placement_request("t", TaskSpec(name="t", tolerations=[
        Toleration.model_validate(t) for t in tolerations]), 0)
    plugin = TaintToleration(Handle(fleet))
    assert plugin.filter(CycleState(), req, info) == want
    if score is not None:
        assert plugin.score(CycleState(), req, info) == score


@pytest.mark.parametrize(("text", "message"), [
    ("dedicated", "must look like key=value:NoSchedule"),
    ("a=b:Sometimes", "must look like key=value:NoSchedule"),
    ("bad key=x:NoSchedule", "not a valid label key"),
])
def test_bad_taints_are_refused(text: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_taint(text)


async def test_a_tainted_cluster_takes_only_tolerating_tasks(fleet: Fleet) -> None:
    await fleet.join("east", [gpu_node("e1", "NVIDIA-A100-SXM4-80GB", 8)])
    api = fleet.h.api
    r = await api.put("/api/v1/clusters/east/taints", json={"taints": [
        {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]})
    assert r.status_code == 200, r.text
    assert r.json()["taints"] == [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    plain = (await api.post("/api/v1/tasks:dry-run", json={"name": "p", "gpu": 1})).json()
    assert plain["histogram"] == {
        "cluster has a taint the task does not tolerate: dedicated=ml:NoSchedule": 1}
    ok = (await api.post("/api/v1/tasks:dry-run", json={
        "name": "q", "gpu": 1, "tolerations": [{"key": "dedicated", "value": "ml"}]})).json()
    assert ok["cluster"] == "east"
    bad = await api.put("/api/v1/clusters/east/taints", json={"taints": [
        {"key": "x", "effect": "Sometimes"}]})
    assert bad.status_code == 400
    assert (await api.get("/api/v1/clusters/east")).json()["taints"][0]["key"] == "dedicated"
    assert (await api.put("/api/v1/clusters/nope/taints", json={"taints": []})).status_code == 404
    cleared = await api.put("/api/v1/clusters/east/taints", json={"taints": []})
    assert cleared.json()["taints"] == []
    again = (await api.post("/api/v1/tasks:dry-run", json={"name": "p", "gpu": 1})).json()
    assert again["cluster"] == "east"
