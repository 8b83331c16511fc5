"""The agent's list of hub addresses: parsing, and following a standby to the leader."""

from __future__ import annotations

import pytest

from fuyao.errors import InvalidInput
from member_agent.hubs import HubList, leader_hint, parse_hubs


@pytest.mark.parametrize(("value", "wanted"), [
    ("127.0.0.1:8849", ("127.0.0.1:8849",)),
    ("127.0.0.1:8849,127.0.0.1:9849", ("127.0.0.1:8849", "127.0.0.1:9849")),
    (" hub-a:8849 , hub-b:8849 ", ("hub-a:8849", "hub-b:8849")),
    ("[::1]:8849", ("[::1]:8849",)),
])
def test_hub_lists_parse(value: str, wanted: tuple[str, ...]) -> None:
    assert parse_hubs(value) == wanted


@pytest.mark.parametrize(("value", "reason"), [
    ("", "at least one HOST:PORT"),
    (",", "at least one HOST:PORT"),
    ("hub-a", "must be HOST:PORT"),
    ("hub-a:0", "must be HOST:PORT"),
    ("hub-a:70000", "must be HOST:PORT"),
    (":8849", "must be HOST:PORT"),
    ("a:1,a:1", "repeats an address"),
    (",".join(f"h{i}:1" for i in range(17)), "at most 16"),
])
def test_bad_hub_lists_are_refused_with_the_reason(value: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=reason):
        parse_hubs(value)


def test_a_failed_hub_moves_to_the_named_leader_or_else_the_next() -> None:
    hubs = HubList(("a:1", "b:1", "c:1"))
    assert hubs.current == "a:1"
    hubs.failed("c:1")                    # a standby named the leader
    assert hubs.current == "c:1"
    hubs.failed()                         # unreachable: next in order, wrapping
    assert hubs.current == "a:1"
    hubs.failed("elsewhere:1")            # a leader not in the list: next in order
    assert hubs.current == "b:1"
    hubs.failed("b:1")                    # named itself (stale): do not loop on it
    assert hubs.current == "c:1"


def test_the_leader_hint_comes_from_trailing_metadata() -> None:
    assert leader_hint((("fuyao-leader", "b:1"),)) == "b:1"
    assert leader_hint((("fuyao-leader", b"b:1"),)) == "b:1"
    assert leader_hint((("other", "x"),)) is None
    assert leader_hint(None) is None
