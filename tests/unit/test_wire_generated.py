"""The committed protobuf and gRPC code matches proto/ (python -m fuyao.wire.generate)."""

from __future__ import annotations

from fuyao.wire.generate import stale_files


def test_generated_wire_code_is_up_to_date() -> None:
    assert stale_files() == [], "run `python -m fuyao.wire.generate` and commit the result"
