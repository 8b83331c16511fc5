"""``fuyaoctl queue``: bad input is refused before anything reaches the hub (exit 2)."""

from __future__ import annotations

import pytest

from tests.cli.conftest import Run


@pytest.mark.parametrize(("args", "text"), [
    (["queue", "create", "q", "--quota", "gpu=-1"], "gpu quantity '-1' must not be negative"),
    (["queue", "create", "q", "--quota", "tpu=1"], "unknown resource 'tpu'"),
    (["queue", "create", "q", "--quota", "gpu"], "is not KEY=VALUE"),
    (["queue", "create", "q", "--cluster-quota", "gpu=1"], "is not CLUSTER:RESOURCE=QUANTITY"),
    (["queue", "create", "q", "--weight", "0"], "weight"),
    (["queue", "update", "q"], "nothing to change"),
])
def test_bad_queue_input_exits_2(run: Run, args: list[str], text: str) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert text in result.output
