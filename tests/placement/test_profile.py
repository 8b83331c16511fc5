"""Placement profiles from configuration: order, weights, defaults and refusals."""

from __future__ import annotations

from typing import Any

import pytest

from fuyao.errors import InvalidInput
from hub.placement import DEFAULT_PROFILE, Profile, Scheduler, ScoreEntry

from .builders import fleet_of


def test_none_is_the_default_profile() -> None:
    assert Profile.from_config(None) is DEFAULT_PROFILE
    assert DEFAULT_PROFILE.filters == ("ClusterReady", "ClusterAffinity", "NodeFit", "Headroom")


def test_order_and_weights_come_from_the_lists() -> None:
    profile = Profile.from_config({
        "filters": ["NodeFit", "ClusterReady"],
        "scores": [{"name": "Headroom", "weight": 3}, "ClusterWeight"],
    })
    assert profile.filters == ("NodeFit", "ClusterReady")
    assert profile.scores == (ScoreEntry("Headroom", 3.0), ScoreEntry("ClusterWeight", 1.0))
    assert profile.reserves == DEFAULT_PROFILE.reserves


def test_yaml_round_trip() -> None:
    profile = Profile.from_yaml(
        "filters: [ClusterReady, NodeFit]\n"
        "scores:\n  - {name: ClusterWeight, weight: 0.5}\n"
        "reserves: [FleetReservation]\n"
    )
    assert profile == Profile(("ClusterReady", "NodeFit"), (ScoreEntry("ClusterWeight", 0.5),))
    assert Profile.from_config(profile.to_config()) == profile


BAD: list[tuple[str, Any, str]] = [
    ("unknown-filter", {"filters": ["ClusterReady", "GpuMagic"]},
     "filters[1]: unknown plugin 'GpuMagic'"),
    ("unknown-score", {"scores": [{"name": "Nope"}]}, "scores[0]: unknown plugin 'Nope'"),
    ("unknown-reserve", {"reserves": ["Nope"]}, "reserves[0]: unknown plugin 'Nope'"),
    ("unknown-key", {"filter": ["ClusterReady"]}, "unknown key 'filter'"),
    ("negative-weight", {"scores": [{"name": "Headroom", "weight": -1}]}, "weight -1"),
    ("bool-weight", {"scores": [{"name": "Headroom", "weight": True}]}, "weight True"),
    ("text-weight", {"scores": [{"name": "Headroom", "weight": "2"}]}, "weight '2'"),
    ("infinite-weight", {"scores": [{"name": "Headroom", "weight": float("inf")}]}, "weight inf"),
    ("unknown-entry-key", {"scores": [{"name": "Headroom", "wieght": 2}]}, "unknown key 'wieght'"),
    ("repeated", {"filters": ["NodeFit", "NodeFit"]}, "NodeFit is listed twice"),
    ("not-a-list", {"filters": "NodeFit"}, "filters must be a list"),
    ("not-a-mapping", ["NodeFit"], "must be a mapping"),
]


@pytest.mark.parametrize(("config", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_profiles_are_refused(config: Any, message: str) -> None:
    with pytest.raises(InvalidInput, match=message.replace("[", r"\[").replace("]", r"\]")):
        Profile.from_config(config)


def test_bad_yaml_is_refused() -> None:
    with pytest.raises(InvalidInput, match="not valid YAML"):
        Profile.from_yaml("filters: [a, b")


def test_plugin_without_that_extension_point_is_refused() -> None:
    profile = Profile.from_config({"filters": ["ClusterWeight"]})
    with pytest.raises(InvalidInput, match="ClusterWeight has no filter extension point"):
        Scheduler(fleet_of({}), profile)
