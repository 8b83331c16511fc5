"""End to end: a real hub and simulated member agents (processes), the capacity commands
and the web view in headless Chromium showing what the REST API says, following changes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fuyao.capacity import CapacityReport
from fuyaoctl.localstack import LocalStack
from tests.e2e.conftest import FAST_TIMINGS, gpu_pool, write_fleet

pytestmark = pytest.mark.slow

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    """Poll ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def ctl(stack: LocalStack, *args: str) -> Any:
    """``fuyaoctl ... -o json`` against the stack, parsed."""
    done = subprocess.run([sys.executable, "-m", "fuyaoctl", "--hub", stack.url, *args,
                           "-o", "json"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """east: 2 nodes x 8 H100 running an 8-card task; west: 2 nodes x 8 A100."""
    tmp = tmp_path_factory.mktemp("webview")
    config = tmp / "hub.yaml"
    timings = {**FAST_TIMINGS["timings"], "capacity_sample_interval": "1s"}
    config.write_text(yaml.safe_dump({"timings": timings}))
    s = LocalStack(home=tmp / "stack", hub_args=["--config", str(config)],
                   agent_args=["--heartbeat-interval", "0.5"])
    try:
        s.start_hub()
        s.join_and_start("east", write_fleet(tmp / "east.yaml", [gpu_pool("h", H100, 8)]))
        s.join_and_start("west", write_fleet(tmp / "west.yaml", [gpu_pool("a", A100, 8)]))
        s.wait_ready(["east", "west"])
        with s.client() as client:
            client.submit_task({"name": "train", "gpu": 8, "gpu_model": "H100"})
            wait_for("train to run", lambda: client.get_task("train").state == "Running")
        yield s
    finally:
        s.close()


def test_capacity_commands_answer_with_known_numbers(stack: LocalStack) -> None:
    # east: 16 H100, 8 in use, 10% headroom: another 8 would leave 0% < 10%; west: 16 A100,
    # one 8-card task leaves 50%, a second 0%.
    fit = ctl(stack, "capacity", "fit", "--gpu", "8", "--cpu", "1", "--memory", "1Gi")
    assert fit["total"] == 1 and fit["clusters"] == {"east": 0, "west": 1}
    assert fit["limited_by"]["east"] == "below headroom reserve"
    n1 = ctl(stack, "capacity", "n-1")
    assert n1["safe"] is False
    assert n1["clusters"]["east"]["safe"] is False
    assert n1["clusters"]["east"]["short"] == {"H100": 8.0}
    assert n1["clusters"]["west"]["safe"] is True
    report = CapacityReport.model_validate(ctl(stack, "capacity", "--by", "model"))
    assert {(r.model, r.devices_total, r.devices_allocated) for r in report.rows} == {
        ("H100", 16, 8), ("A100", 16, 0)}
    points = wait_for("two samples", lambda: len({p["at"] for p in ctl(
        stack, "capacity", "history", "--since", "1h", "--model", "H100")}) >= 2 and ctl(
        stack, "capacity", "history", "--since", "1h", "--model", "H100"))
    assert {(p["cluster"], p["devices_total"]) for p in points} == {("east", 16)}
    assert points[-1]["devices_allocated"] == 8


def test_web_view_matches_rest_and_follows_the_fleet(stack: LocalStack, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1300})
            page.goto(f"{stack.url}/ui?refresh=700")
            text = _texts(page)
            wait_for("the page to load", lambda: text("updated").startswith("updated"))
            with stack.client() as client:
                report = client.capacity_report()
            for row in report.rows:
                prefix = f"cap-{row.group}-{row.model}"
                assert text(f"{prefix}-total") == _num(row.devices_total)
                assert text(f"{prefix}-alloc") == _num(row.devices_allocated)
                assert text(f"{prefix}-rsvd") == _num(row.devices_reserved)
                assert text(f"{prefix}-free") == _num(row.devices_free)
            assert text("n1-east-safe") == "NO" and text("n1-west-safe") == "yes"
            assert page.get_by_test_id("n1-verdict").get_attribute("data-safe") == "false"
            assert text("cluster-east-tasks") == "1"
            wait_for("a history line", lambda: page.locator(
                "#history polyline[data-model=H100]").count() == 1)

            # Change the fleet: a spare H100 cluster joins (N-1 flips to safe), west is
            # cordoned, and a task that cannot fit shows up as pending with its reasons.
            spare = write_fleet(tmp_path / "spare.yaml", [gpu_pool("s", H100, 8, count=1)])
            stack.join_and_start("spare", spare)
            stack.wait_ready(["spare"])
            with stack.client() as client:
                client.cordon("west")
                client.submit_task({"name": "huge", "gpu": 8, "gpu_model": "T4"})
            wait_for("N-1 to turn safe", lambda: page.get_by_test_id("n1-verdict")
                     .get_attribute("data-safe") == "true")
            wait_for("west to show cordoned", lambda: "ordon" in text("cluster-west-state"))
            wait_for("spare's capacity row", lambda: text("cap-spare-H100-total") == "8")
            wait_for("the pending task", lambda: page.get_by_test_id("pending-huge").count())
            wait_for("the default queue depth", lambda: text("queue-default-queued") == "1")
            page.screenshot(path=str(ARTIFACTS / "web-view.png"), full_page=True)
        finally:
            browser.close()


def _texts(page: Any) -> Callable[[str], str]:
    def text(testid: str) -> str:
        found = page.get_by_test_id(testid)
        return str(found.first.inner_text()).strip() if found.count() else ""
    return text


def _num(x: float) -> str:
    return str(round(x)) if abs(x - round(x)) < 1e-9 else f"{x:.2f}".rstrip("0").rstrip(".")
