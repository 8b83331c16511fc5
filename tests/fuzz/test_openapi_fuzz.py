"""schemathesis against the hub's own OpenAPI document, on a real hub process.

A real ``fuyao-hub serve`` (SQLite, one simulated member, the rate limit off) is fuzzed
through HTTP with the admin token: every operation of ``/openapi.json`` gets a bounded number
of generated requests, valid and invalid. Each answer must not be a server error (5xx), must
have the documented content type, and must match the documented schema for its status. The
counts (operations, requests, answers per status class, modes that passed) are written to
``test-artifacts/openapi-fuzz.json`` and quoted in ``docs/security.md``.

``FUYAO_FUZZ_EXAMPLES`` sets the examples per operation (default 25; CI uses the default).
"""

from __future__ import annotations

import json
import os
import secrets
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode, checks
from schemathesis.core.result import Ok

from fuyaoctl.localstack import LocalStack

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("FUYAO_FUZZ_EXAMPLES", "25"))
ROOT = Path(__file__).resolve().parents[2]
ARTIFACT = ROOT / "test-artifacts" / "openapi-fuzz.json"
EXAMPLES_DIR = ROOT / "examples"
LONG_POLL: dict[str, dict[str, Any]] = {"GET /api/v1/events": {"query": {"timeout": 0}}}
CHECKS = [checks.not_a_server_error, checks.response_schema_conformance,
          checks.content_type_conformance]


class Tally:
    """What the fuzz run sent and got back, per operation."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.passed: list[str] = []     # generation modes whose every check held

    def record(self, operation: str, status: int) -> None:
        self.requests[operation] += 1
        self.statuses[f"{status // 100}xx"] += 1

    def write(self) -> None:
        ARTIFACT.parent.mkdir(exist_ok=True)
        ARTIFACT.write_text(json.dumps({
            "examples_per_operation": EXAMPLES,
            "operations": len(self.requests),
            "requests": sum(self.requests.values()),
            "statuses": dict(sorted(self.statuses.items())),
            "modes_passed": self.passed,
            "per_operation": dict(sorted(self.requests.items())),
        }, indent=2) + "\n")


TALLY = Tally()


@pytest.fixture(scope="module")
def fuzz_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalStack, str]]:
    """A hub with one member, and a dedicated admin token whose name fuzzing cannot guess."""
    home = tmp_path_factory.mktemp("fuzz")
    with LocalStack(home, hub_args=["--rate-limit", "0"]) as stack:
        stack.start_hub()
        stack.join_and_start("gpu-east", EXAMPLES_DIR / "fleets" / "gpu-east.yaml")
        stack.wait_ready(["gpu-east"])
        with stack.client() as client:
            created = client.create_token(f"fuzz-{secrets.token_hex(6)}", role="admin")
        yield stack, created.token
    TALLY.write()


def fuzz_operation(operation: Any, mode: GenerationMode, token: str) -> None:
    """Send up to ``EXAMPLES`` generated requests to one operation; a failed check raises
    with the request to reproduce it (no shrinking: the server's state moves on)."""
    label = f"{operation.label} ({mode.value})"

    # The long poll would hold each request up to 30 s; its waiting has its own tests.
    overrides = LONG_POLL.get(operation.label, {})
    strategy = operation.as_strategy(generation_mode=mode, **overrides)

    @given(case=strategy)
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    def run(case: Any) -> None:
        response = case.call(headers={"Authorization": f"Bearer {token}"})
        TALLY.record(label, response.status_code)
        case.validate_response(response, checks=CHECKS)

    try:
        run()
    except Unsatisfiable:
        # Nothing of this operation can be made invalid (no parameters, no body).
        assert mode is GenerationMode.NEGATIVE, label


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
                         ids=["valid", "invalid"])
def test_no_server_error_and_every_answer_matches_the_schema(
        fuzz_stack: tuple[LocalStack, str], mode: GenerationMode) -> None:
    stack, token = fuzz_stack
    schema = schemathesis.openapi.from_url(f"{stack.url}/openapi.json")
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), f"the hub's OpenAPI document is invalid: {result}"
        operations.append(result.ok())
    assert len(operations) >= 40, "the hub documents every route"
    for operation in operations:
        fuzz_operation(operation, mode, token)
    TALLY.passed.append(mode.value)
