"""The hub keeps each node's report in compact form: what it gives back is the report.

``NodeState`` holds no ``NodeInfo`` (memory at 1,000,000 nodes); ``info`` rebuilds one. For
every report - devices of several classes in any order, shares, free memory, unschedulable
nodes - and any hold, the rebuilt report equals the original, a state rebuilt with another
hold still does, ``reports`` tells the same report from a changed one, and the effective
free shares are the reported ones minus the hold.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fuyao.inventory import DeviceInfo, NodeInfo, ResourceAmounts
from hub.fleet import NodeState
from hub.fleet.nodes import Hold

devices = st.lists(st.tuples(st.sampled_from(["A100", "T4"]), st.sampled_from([16, 80]),
                             st.sampled_from([0, 250, 1000]), st.integers(0, 5)), max_size=6)


def report(drawn: list[tuple[str, int, int, int]], cpu: int, unschedulable: bool) -> NodeInfo:
    return NodeInfo("n1", {"zone": "a"}, ResourceAmounts(64_000, 512, 110),
                    ResourceAmounts(cpu, 256, 100),
                    tuple(DeviceInfo(f"n1/gpu{i}", model, memory * 1024, free, memory * 1024 - used)
                          for i, (model, memory, free, used) in enumerate(drawn)),
                    unschedulable)


@given(drawn=devices, cpu=st.integers(0, 64_000), unschedulable=st.booleans(),
       held=st.lists(st.sampled_from([0, 250, 500]), min_size=6, max_size=6))
def test_the_rebuilt_report_is_the_report(drawn: list[tuple[str, int, int, int]], cpu: int,
                                          unschedulable: bool, held: list[int]) -> None:
    info = report(drawn, cpu, unschedulable)
    hold = Hold(1000, 10, 1, {f"n1/gpu{i}": m for i, m in enumerate(held[:len(drawn)]) if m})
    state = NodeState(info, hold)
    assert state.info == info and state.reports(info)
    assert state.held(None).info == info and state.held(None).cpu == cpu
    assert state.cpu == max(0, cpu - 1000) and state.schedulable is not unschedulable
    assert state.dev_free == {d.id: min(1000, max(0, d.free_milli - hold.devices.get(d.id, 0)))
                              for d in info.devices}
    assert not state.reports(report(drawn, cpu + 1, unschedulable))
    if drawn:
        changed = [(m, g, 1000 if f != 1000 else 0, u) for m, g, f, u in drawn]
        assert not state.reports(report(changed, cpu, unschedulable))
