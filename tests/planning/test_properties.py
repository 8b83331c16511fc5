"""Rules that hold for every small fleet: fit counts and fragmentation stay consistent."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fuyao.capacity import Shape
from fuyao.spec import TaskSpec
from hub.fleet import FleetView
from hub.placement import DEFAULT_PROFILE
from hub.planning.fit import count_fit
from hub.planning.fragmentation import fragmented_devices, resolve
from tests.placement.builders import fleet_of, node

FREES = st.lists(st.sampled_from([0, 250, 500, 750, 1000]), min_size=1, max_size=8)
NODES = st.lists(FREES, min_size=1, max_size=3)
GPUS = st.sampled_from(["250m", "500m", "1", "2", "4", "8"])


def build(clusters: list[list[list[int]]], headroom: float) -> FleetView:
    return fleet_of({f"c{i}": [node(f"c{i}n{j}", "H100", len(frees), free_milli=frees)
                               for j, frees in enumerate(nodes)]
                     for i, nodes in enumerate(clusters)}, headroom=headroom)


@settings(max_examples=60, deadline=None)
@given(st.lists(NODES, min_size=1, max_size=3), GPUS,
       st.sampled_from([0.0, 0.1, 0.25, 0.5]))
def test_fit_counts_add_up_and_less_headroom_never_fits_fewer(
        clusters: list[list[list[int]]], gpu: str, headroom: float) -> None:
    spec = TaskSpec(name="p", gpu=gpu)
    answer = count_fit(build(clusters, headroom), DEFAULT_PROFILE, spec, limit=1000)
    assert answer.total == sum(answer.clusters.values())
    assert not answer.capped and set(answer.limited_by) == set(answer.clusters)
    free_milli = sum(sum(frees) for nodes in clusters for frees in nodes)
    assert answer.total * spec.requests().gpu_milli <= free_milli
    looser = count_fit(build(clusters, 0.0), DEFAULT_PROFILE, spec, limit=1000)
    assert looser.total >= answer.total
    # a cordoned cluster fits nothing; the others are unaffected
    fleet = build(clusters, headroom)
    fleet.set_cordoned("c0", True)
    cordoned = count_fit(fleet, DEFAULT_PROFILE, spec, limit=1000)
    assert cordoned.clusters["c0"] == 0
    assert cordoned.total == answer.total - answer.clusters["c0"]


@settings(max_examples=60, deadline=None)
@given(NODES, st.lists(GPUS, min_size=1, max_size=4))
def test_fragmentation_is_never_more_than_what_is_free(nodes: list[list[int]],
                                                       gpus: list[str]) -> None:
    cluster = build([nodes], 0.0).cluster("c0")
    assert cluster is not None
    frag = fragmented_devices(cluster, resolve([Shape(gpu=g) for g in gpus])).get("H100", 0.0)
    free = sum(sum(frees) for frees in nodes) / 1000
    assert -1e-9 <= frag <= free + 1e-9
