"""Fixtures for end-to-end tests: a real hub process and real agent processes on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from fuyaoctl.localstack import LocalStack

FAST_TIMINGS = {
    "timings": {
        "unknown_after": "3s",
        "not_ready_after": "5s",
        "eviction_timeout": "2s",
        "unschedulable_timeout": "5s",
        "placement_interval": "0.5s",
        "monitor_interval": "0.5s",
        "member_lease": "4s",
        "failover_margin": "1s",
    }
}


def write_fleet(path: Path, pools: list[dict[str, object]]) -> Path:
    """A fleet file with the given node pools."""
    path.write_text(yaml.safe_dump({"nodePools": pools}))
    return path


def gpu_pool(name: str, product: str, gpus: int, count: int = 2) -> dict[str, object]:
    """A pool of GPU nodes as GPU Feature Discovery labels them."""
    return {
        "name": name,
        "count": count,
        "labels": {"kubernetes.io/arch": "amd64", "nvidia.com/gpu.product": product},
        "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110",
                        "nvidia.com/gpu": str(gpus)},
    }


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    """A hub with fast failure-detection timings; agents heartbeat every 0.5 s."""
    config = tmp_path / "hub.yaml"
    config.write_text(yaml.safe_dump(FAST_TIMINGS))
    s = LocalStack(home=tmp_path / "stack", hub_args=["--config", str(config)],
                   agent_args=["--heartbeat-interval", "0.5"])
    try:
        yield s
    finally:
        s.close()
