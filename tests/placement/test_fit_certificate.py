"""Property: a one-replica fit the cache re-checks node by node is the search's answer.

``hub.fleet.certify`` describes what a ``tightest`` one-replica answer of ``find_fit``
rests on; ``still_found`` says, after some nodes changed (``nodes_changed_since``), whether
that answer stands. Whenever it says so, a fresh search must give the same nodes and model.
"""

from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fuyao.inventory import NodeInfo
from fuyao.selector import Selector, parse_selector
from fuyao.spec import ClusterState, TaskRequests
from hub import native
from hub.fleet import Certificate, ClusterInfo, Fit, FleetView, Miss, certify, find_fit, still_found
from hub.fleet.fit import MissKind

from .builders import node, requests

MODELS = (None, "T4", "A100", "H100")
SELECTORS = ("", "gpu-model>=A100", "gpu-model=T4", "zone=y")
SHAPES = ({"gpu_milli": 1000}, {"gpu_milli": 2000}, {"gpu_milli": 250}, {"gpu_milli": 500},
          {"gpu_milli": 1000, "gpu_memory_gib": 60}, {"cpu": 2}, {"cpu": 8, "memory_gib": 64})

specs = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS),
    "gpus": st.integers(1, 8),
    "free_cpu": st.sampled_from([None, 1, 4, 16]),
    "busy": st.lists(st.sampled_from([0, 250, 500, 750, 1000, 1000]), min_size=8, max_size=8),
    "zone": st.sampled_from(["x", "y"]),
    "unschedulable": st.sampled_from([False, False, False, True]),
})


def make(index: int, spec: dict[str, Any]) -> NodeInfo:
    model = spec["model"]
    gpus = spec["gpus"] if model else 0
    return node(f"c-n{index}", model, gpus, free_cpu=spec["free_cpu"],
                free_milli=spec["busy"][:gpus], labels={"zone": spec["zone"]},
                unschedulable=spec["unschedulable"])


@dataclass
class Certified:
    """A one-cluster fleet, a request, the search's answer and its certificate."""

    fleet: FleetView
    cluster: ClusterInfo
    selector: Selector
    requests: TaskRequests
    found: Fit | Miss
    cert: Certificate | None
    stamp: int
    layout: int

    @classmethod
    def of(cls, nodes: list[dict[str, Any]], selector: str, shape: dict[str, int],
           headroom: float) -> Certified:
        fleet = FleetView()
        fleet.upsert_cluster("c", labels={}, weight=1, headroom=headroom,
                             state=ClusterState.READY)
        fleet.replace_nodes("c", [make(i, s) for i, s in enumerate(nodes)])
        cluster = fleet.cluster("c")
        assert cluster is not None
        sel, reqs = parse_selector(selector), requests(**shape)
        found = find_fit(cluster, sel, str(sel), reqs)
        cert = certify(cluster, sel, str(sel), reqs, found)
        return cls(fleet, cluster, sel, reqs, found, cert, cluster.version,
                   cluster.layout_version)

    def check(self) -> None:
        """Where the certificate can be checked and holds, a new search agrees with it."""
        changed = self.cluster.nodes_changed_since(self.stamp)
        if self.cert is None or changed is None or self.cluster.layout_version != self.layout:
            event("not checked")
            return
        key = str(self.selector)
        holds = still_found(self.cluster, self.selector, key, self.requests, self.cert, changed)
        event(f"certified, still found: {holds}")
        if holds:
            assert find_fit(self.cluster, self.selector, key, self.requests) == self.found


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(specs, min_size=4, max_size=12),
       changes=st.lists(st.tuples(st.integers(0, 11), specs), min_size=1, max_size=3),
       selector=st.sampled_from(SELECTORS), shape=st.sampled_from(SHAPES),
       headroom=st.sampled_from([0.0, 0.2]))
def test_a_certified_fit_that_still_holds_is_what_a_search_finds(
    nodes: list[dict[str, Any]], changes: list[tuple[int, dict[str, Any]]],
    selector: str, shape: dict[str, int], headroom: float,
) -> None:
    case = Certified.of(nodes, selector, shape, headroom)
    for index, spec in changes:
        case.fleet.apply_delta("c", [make(index % len(nodes), spec)], [])
    assert case.cluster.nodes_changed_since(case.stamp) is not None
    case.check()


occupancy = st.tuples(st.integers(0, 11),
                      st.lists(st.sampled_from([0, 250, 500, 750, 1000, 1000]),
                               min_size=8, max_size=8),
                      st.sampled_from([None, 1, 4, 16]))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(specs, min_size=4, max_size=12),
       changes=st.lists(occupancy, min_size=1, max_size=4),
       selector=st.sampled_from(SELECTORS), shape=st.sampled_from(SHAPES),
       headroom=st.sampled_from([0.0, 0.2]))
def test_a_certificate_holds_only_while_the_search_agrees_as_cards_come_and_go(
    nodes: list[dict[str, Any]], changes: list[tuple[int, list[int], int | None]],
    selector: str, shape: dict[str, int], headroom: float,
) -> None:
    """Nodes keep their model, cards and labels and only their free shares and cpu move
    (what reservations and agents' reports mostly do): the layout stays, so certificates
    are checked far more often than above, and one that holds names what a search finds."""
    case = Certified.of(nodes, selector, shape, headroom)
    for index, busy, free_cpu in changes:
        spec = nodes[index % len(nodes)]
        case.fleet.apply_delta("c", [make(index % len(nodes),
                                          {**spec, "busy": busy, "free_cpu": free_cpu})], [])
    case.check()



@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(specs, min_size=4, max_size=12),
       steps=st.lists(st.one_of(st.just(None), occupancy), min_size=2, max_size=8),
       selector=st.sampled_from(SELECTORS), shape=st.sampled_from(SHAPES),
       headroom=st.sampled_from([0.0, 0.2]))
def test_a_certificate_follows_reservations_on_the_node_it_names(
    nodes: list[dict[str, Any]], steps: list[tuple[int, list[int], int | None] | None],
    selector: str, shape: dict[str, int], headroom: float,
) -> None:
    """Tasks of one shape placed one after another where the search says (``None``), between
    reports, checked as the fit cache checks them: each check covers the nodes changed
    since the last one, a certificate that holds is kept and names what a search finds,
    and one that does not is replaced by the certificate of the search's new answer."""
    case = Certified.of(nodes, selector, shape, headroom)
    key = str(case.selector)
    for step, change in enumerate(steps):
        if change is None:
            if isinstance(case.found, Fit):
                case.fleet.reserve("c", f"t{step}", case.requests, case.found.nodes,
                                   model=case.found.model)
        else:
            index, busy, free_cpu = change
            spec = nodes[index % len(nodes)]
            case.fleet.apply_delta("c", [make(index % len(nodes),
                                              {**spec, "busy": busy, "free_cpu": free_cpu})], [])
        changed = case.cluster.nodes_changed_since(case.stamp)
        holds = False
        if case.cert is not None and changed is not None and (
                case.cluster.layout_version == case.layout):
            holds = still_found(case.cluster, case.selector, key, case.requests, case.cert,
                                changed)
            event(f"kept: {holds}")
        if holds:
            assert find_fit(case.cluster, case.selector, key, case.requests) == case.found
        else:
            case.found = find_fit(case.cluster, case.selector, key, case.requests)
            case.cert = certify(case.cluster, case.selector, key, case.requests, case.found)
            case.layout = case.cluster.layout_version
        case.stamp = case.cluster.version


def test_a_fit_and_a_certificate_survive_pickle_and_copy_and_stay_read_only() -> None:
    """They are hand-written classes (a compiled frozen dataclass builds slowly): what the
    dataclasses gave - equality, hashing, pickling, copying - still holds."""
    fit = Fit(("n1", "n2"), "H100")
    assert pickle.loads(pickle.dumps(fit)) == fit == copy.deepcopy(fit) == copy.copy(fit)
    assert hash(Fit(("n1", "n2"), "H100")) == hash(fit) and fit != Fit(("n1",), "H100")
    assert fit != Miss(MissKind.GPU) and repr(fit) == "Fit(nodes=('n1', 'n2'), model='H100')"
    assert fit == mock.ANY   # the other side answers where a Fit does not
    cert = Certificate("n1", None, 0, (0, 1))
    assert repr(pickle.loads(pickle.dumps(cert))) == repr(cert)
    if native.STATE.compiled:   # Final attributes are read-only once compiled (mypy: always)
        with pytest.raises(AttributeError):
            fit.model = "A100"  # type: ignore[misc]
