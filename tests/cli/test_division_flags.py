"""``task submit`` flags for dividing replicas across clusters, and the accelerator model
left to the hub: what reaches the hub, and what is refused before it (exit 2)."""

from __future__ import annotations

import json

import pytest

from fuyao.catalog import DEFAULT_CATALOG, AcceleratorModel
from tests.cli.conftest import Run, as_json
from tests.cli.fakehub import FakeHub


def sent(hub: FakeHub) -> dict[str, object]:
    posts = [r for r in hub.requests if r.method == "POST"]
    assert posts, "nothing reached the hub"
    body: dict[str, object] = json.loads(posts[-1].content)
    return body


def test_spread_flags_reach_the_hub(run: Run, hub: FakeHub) -> None:
    result = run("task", "submit", "--name", "big", "--gpu", "1", "--replicas", "6",
                 "--spread", "weighted", "--spread-weight", "gpu-east=2",
                 "--spread-weight", "gpu-west=1", "--min-replicas", "4", "-o", "json")
    assert result.exit_code == 0, result.output
    body = sent(hub)
    assert body["spread"] == "weighted" and body["min_replicas"] == 4
    assert body["spread_weights"] == {"gpu-east": 2, "gpu-west": 1}
    assert as_json(result)["spec"]["spread_weights"] == {"gpu-east": 2, "gpu-west": 1}
    result = run("task", "submit", "--name", "dyn", "--replicas", "3", "--spread", "weighted",
                 "--spread-dynamic")
    assert result.exit_code == 0, result.output
    assert sent(hub)["spread_dynamic"] is True


@pytest.mark.parametrize(("flags", "message"), [
    (["--spread", "weighted"], "needs either spread_weights"),
    (["--spread", "weighted", "--spread-weight", "a=1", "--spread-dynamic"], "not both"),
    (["--spread-weight", "a=1"], "need spread: weighted"),
    (["--spread", "weighted", "--spread-weight", "a=-1"], "integer in 0..10000"),
    (["--spread", "weighted", "--spread-weight", "a=0"], "weight above 0"),
    (["--spread", "weighted", "--spread-weight", "Bad_Name=1"], "cluster 'Bad_Name'"),
    (["--min-replicas", "5"], "min_replicas 5 is more than replicas 3"),
    (["--min-replicas", "0"], "min_replicas"),
    (["--gang", "--min-replicas", "2"], "gang: true places all replicas in one cluster"),
    (["--spread", "packed"], "packed"),
])
def test_bad_division_flags_exit_2_and_send_nothing(run: Run, hub: FakeHub,
                                                    flags: list[str], message: str) -> None:
    result = run("task", "submit", "--name", "t", "--replicas", "3", *flags)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not [r for r in hub.requests if r.method == "POST"]


def test_the_cli_leaves_accelerator_models_to_the_hub(run: Run, hub: FakeHub) -> None:
    """A model the built-in catalog does not rank may be one the hub's operator added: the
    CLI sends it; here the hub does not know it either and refuses it (exit 2)."""
    result = run("task", "submit", "--name", "g", "--gpu", "1", "--gpu-model", ">=G2")
    assert sent(hub)["gpu_model"] == ">=G2"
    assert result.exit_code == 2, result.output
    assert "G2 has no rank" in result.output


def test_a_model_the_hub_ranks_is_submitted(run: Run, hub: FakeHub) -> None:
    undo = DEFAULT_CATALOG.extend([AcceleratorModel("G2", "acme", "gpu", 55, 0)], {})
    try:      # the fake hub's catalog now ranks G2, as an operated hub's would
        result = run("task", "submit", "--name", "g", "--gpu", "1", "--gpu-model", ">=G2")
    finally:
        undo()
    assert result.exit_code == 0, result.output
