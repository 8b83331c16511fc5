"""A request's rendered selector texts are kept, carried by ``flagged``, and never stale.

``PlacementRequest`` (compiled with the engine) renders ``selector_key`` and
``cluster_key`` on first read and keeps them; ``flagged`` builds a copy with other flags
and carries them over instead of ``dataclasses.replace``. For any request and flags it must
give what ``replace`` gives - equal, of equal hash, the same texts - and a ``replace`` that
changes a selector, a pickle or a copy must never carry a text of the old selector.
"""

from __future__ import annotations

import copy
import pickle
from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from fuyao.selector import parse_selector
from fuyao.spec import TaskSpec
from hub.activetask import placement_request
from hub.placement.framework import PlacementRequest

SELECTORS = ["", "zone=a", "zone in (a, b), tier!=spot"]
TEXTS = ("selector_key", "cluster_key")


def request(selector: str, cluster_selector: str, priority: int, gpu: int,
            ) -> PlacementRequest:
    extra: dict[str, Any] = {"gpu": gpu} if gpu else {}
    spec = TaskSpec(name="t", cpu="500m", memory="1Gi", selector=selector,
                    cluster_selector=cluster_selector, **extra)
    return placement_request("id-1", spec, priority)


@given(selector=st.sampled_from(SELECTORS), cluster_selector=st.sampled_from(SELECTORS),
       priority=st.integers(-5, 5), gpu=st.integers(0, 4),
       failover=st.booleans(), exclude=st.frozensets(st.sampled_from(["c0", "c1", "c2"])),
       was_failover=st.booleans(), read=st.sets(st.sampled_from(TEXTS)))
def test_flagged_is_replace_with_the_rendered_texts_kept(
        selector: str, cluster_selector: str, priority: int, gpu: int, failover: bool,
        exclude: frozenset[str], was_failover: bool, read: set[str]) -> None:
    base = request(selector, cluster_selector, priority, gpu)
    if was_failover:
        base = base.flagged(True, frozenset({"c9"}))
    for key in read:
        getattr(base, key)
    got, want = base.flagged(failover, exclude), replace(base, failover=failover,
                                                         exclude=exclude)
    assert type(got) is type(want)
    assert got == want and hash(got) == hash(want) and repr(got) == repr(want)
    assert (got.failover, got.exclude) == (failover, exclude)
    # the texts read on the base travel with the copy (not rendered again), the others not
    assert got._selector_key == (base.selector_key if "selector_key" in read else None)
    assert got._cluster_key == (base.cluster_key if "cluster_key" in read else None)
    assert got.selector_key == want.selector_key and got.cluster_key == want.cluster_key


def test_a_new_selector_is_rendered_anew_by_replace_pickle_and_copy() -> None:
    base = request("pool=a", "tier=gold", 0, 1)
    texts = (base.selector_key, base.cluster_key)
    assert texts == (str(base.selector), f"{base.cluster_selector}||")
    assert "pool=a" in texts[0] and "tier=gold" in texts[1]
    changed = replace(base, selector=parse_selector("pool=b"),
                      cluster_selector=parse_selector("tier=spot"))
    assert (changed.selector_key, changed.cluster_key) == (
        str(changed.selector), f"{changed.cluster_selector}||")
    assert "pool=b" in changed.selector_key and "tier=spot" in changed.cluster_key
    for again in (pickle.loads(pickle.dumps(base)), copy.copy(base), copy.deepcopy(base)):
        assert again == base and hash(again) == hash(base)
        assert (again.selector_key, again.cluster_key) == texts


def test_a_request_stays_frozen_and_shows_no_rendered_text() -> None:
    base = request("zone=a", "", 3, 0)
    base.selector_key  # noqa: B018 - rendered and kept
    try:
        base.priority = 4  # type: ignore[misc]
    except AttributeError:   # dataclasses.FrozenInstanceError is one
        pass
    else:
        raise AssertionError("a request's fields can be assigned")
    assert base.priority == 3
    assert "_selector_key" not in repr(base)
    assert base == request("zone=a", "", 3, 0)   # a rendered text is not compared
