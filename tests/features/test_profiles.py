"""ComputeProfiles over REST: versioned apply, submit --profile with overrides, the version a
task was built from, refusals that change nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fuyao.computeprofile import parse_profile
from fuyao.errors import InvalidInput
from tests.features.conftest import Fleet, gpu_node

LLM = yaml.safe_load((Path(__file__).resolve().parents[2] / "examples" / "profiles"
                      / "llm-train.yaml").read_text())


async def apply(fleet: Fleet, body: dict[str, Any]) -> Any:
    return await fleet.h.api.put(f"/api/v1/profiles/{body['name']}", json=body)


async def test_apply_versions_only_on_change_and_lists(fleet: Fleet) -> None:
    r = await apply(fleet, LLM)
    assert r.status_code == 200, r.text
    assert (r.json()["version"], r.json()["selector_text"]) == (
        1, "fuyao.io/gpu-model>=A100, fuyao.io/gpu-memory>=80Gi, fuyao.io/nvlink-enabled=true")
    assert (await apply(fleet, LLM)).json()["version"] == 1          # same content
    changed = {**LLM, "template": {**LLM["template"], "gpu": 4}}
    assert (await apply(fleet, changed)).json()["version"] == 2
    listed = (await fleet.h.api.get("/api/v1/profiles")).json()
    assert [(p["name"], p["version"], p["template"]["gpu"]) for p in listed] == [
        ("llm-train", 2, 4)]


async def test_submit_with_profile_overrides_fields_and_records_the_version(
    fleet: Fleet,
) -> None:
    await fleet.join("east", [gpu_node("h1", "NVIDIA-H100-80GB-HBM3", 8),
                              gpu_node("h2", "NVIDIA-H100-80GB-HBM3", 8)])
    await apply(fleet, LLM)
    r = await fleet.h.api.post("/api/v1/tasks", json={
        "name": "big", "profile": "llm-train", "replicas": 2, "gang": True})
    assert r.status_code == 201, r.text
    spec = r.json()["spec"]
    assert (spec["gpu"], spec["cpu"], spec["memory"], spec["replicas"], spec["gang"]) == (
        8, "32", "256Gi", 2, True)
    assert (spec["profile"], spec["profile_version"]) == ("llm-train", 1)
    assert spec["selector"] == ("fuyao.io/gpu-model>=A100, fuyao.io/gpu-memory>=80Gi, "
                                "fuyao.io/nvlink-enabled=true")
    r = await fleet.h.api.post("/api/v1/tasks", json={
        "name": "small", "profile": "llm-train", "gpu": 4, "gpu_model": "V100",
        "labels": {"team": "a"}})
    spec = r.json()["spec"]
    assert (spec["gpu"], spec["gpu_model"], spec["labels"]) == (4, "V100", {"team": "a"})
    assert spec["selector"] == "fuyao.io/gpu-memory>=80Gi, fuyao.io/nvlink-enabled=true"


async def test_delete_is_refused_while_queued_tasks_use_it(fleet: Fleet) -> None:
    await apply(fleet, LLM)
    for name in ("b", "a"):
        r = await fleet.h.api.post("/api/v1/tasks", json={"name": name, "profile": "llm-train"})
        assert r.status_code == 201
    r = await fleet.h.api.delete("/api/v1/profiles/llm-train")
    assert r.status_code == 409
    assert r.json()["error"]["message"] == "profile llm-train is used by queued tasks: a, b"
    described = (await fleet.h.api.get("/api/v1/profiles/llm-train")).json()
    assert described["queued_tasks"] == ["a", "b"]
    for name in ("a", "b"):
        await fleet.h.api.post(f"/api/v1/tasks/{name}/cancel")
    assert (await fleet.h.api.delete("/api/v1/profiles/llm-train")).status_code == 200
    assert (await fleet.h.api.get("/api/v1/profiles/llm-train")).status_code == 404


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param({"name": "p", "gpus": 8}, "gpus: unknown field", id="unknown-top-field"),
        pytest.param({"name": "p", "template": {"gpus": 8}},
                     "unknown field 'gpus' (did you mean 'gpu'?)", id="unknown-template-field"),
        pytest.param({"name": "p", "template": {"cpu": "-1"}}, "cpu: '-1' must not be negative",
                     id="bad-template-value"),
        pytest.param({"name": "p", "selector": [
            {"key": "fuyao.io/region", "operator": "Gt", "values": ["east"]}]},
            "fuyao.io/region holds names, which cannot be ordered", id="incomparable"),
        pytest.param({"name": "p", "selector": [
            {"key": "team", "operator": "Gt", "values": ["east"]}]},
            "'east' is not a number or quantity, so it cannot be ordered", id="not-a-number"),
        pytest.param({"name": "p", "selector": [
            {"key": "fuyao.io/region", "operator": "Gt", "values": ["5"]}]},
            "fuyao.io/region holds names, which cannot be ordered", id="names-by-number"),
        pytest.param({"name": "p", "selector": [
            {"key": "fuyao.io/gpu-model", "operator": ">=", "values": ["G2"]}]},
            "G2 has no rank (undisclosed model): it cannot be ordered", id="unranked-model"),
        pytest.param({"name": "p", "selector": [
            {"key": "fuyao.io/nvlink-enabled", "operator": "Lt", "values": ["true"]}]},
            "cannot be ordered", id="bool-ordered"),
        pytest.param({"name": "p", "selector": [
            {"key": "a", "operator": "Like", "values": ["x"]}]}, "operator", id="bad-op"),
    ],
)
async def test_bad_profiles_are_400_and_change_nothing(fleet: Fleet, body: dict[str, Any],
                                                       message: str) -> None:
    r = await apply(fleet, body)
    assert r.status_code == 400, r.text
    assert message in r.json()["error"]["message"]
    assert (await fleet.h.api.get("/api/v1/profiles")).json() == []
    with pytest.raises(InvalidInput, match=r"profile: .*(unknown|gpus|cannot|operator|negative)"):
        parse_profile(body)   # the CLI refuses the same before sending


async def test_unknown_profile_at_submit_is_400(fleet: Fleet) -> None:
    r = await fleet.h.api.post("/api/v1/tasks", json={"name": "t", "profile": "nope"})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "task t: profile 'nope' does not exist"
    assert (await fleet.h.api.get("/api/v1/tasks")).json() == []


async def test_profiles_survive_a_restart(tmp_path: Path) -> None:
    from tests.hub.conftest import start_harness, stop_harness

    h = await start_harness(tmp_path / "hub")
    try:
        await h.api.put("/api/v1/profiles/llm-train", json=LLM)
    finally:
        await stop_harness(h)
    h = await start_harness(tmp_path / "hub")
    try:
        got = (await h.api.get("/api/v1/profiles/llm-train")).json()
        assert (got["version"], got["template"]["gpu"]) == (1, 8)
    finally:
        await stop_harness(h)
