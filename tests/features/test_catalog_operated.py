"""The GPU catalog, operated: models and aliases from the hub's configuration, nodes
normalized on receipt, the member pinned by the names it knows; ``GET /api/v1/catalog``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from fuyao.catalog import DEFAULT_CATALOG
from fuyao.errors import InvalidInput
from fuyao.labels import GPU_MODEL
from fuyao.selector import parse_selector
from hub.activetask import member_selector
from hub.catalogs import OperatedCatalog
from tests.features.conftest import Fleet
from tests.hub.agentkit import gpu_node

CONFIG = {"models": [{"name": "RTX4090", "vendor": "nvidia", "kind": "gpu", "rank": 65,
                      "memory": "24Gi"}],
          "aliases": {"GeForce-RTX-4090-Special": "RTX4090", "v100-pcie": "V100"}}


@pytest.fixture
def operated() -> Iterator[OperatedCatalog]:
    catalog = OperatedCatalog(CONFIG)
    undo = catalog.install()
    try:
        yield catalog
    finally:
        undo()


def test_new_models_rank_in_selectors(operated: OperatedCatalog) -> None:
    at_least_a10 = parse_selector("gpu-model >= A10")
    assert at_least_a10.matches({GPU_MODEL: "RTX4090"})
    assert not parse_selector("gpu-model >= A100").matches({GPU_MODEL: "RTX4090"})
    assert DEFAULT_CATALOG.canonical("v100-pcie")[0] == "V100"


def test_a_node_is_normalized_on_receipt_and_the_member_pinned_by_its_own_name() -> None:
    reported = gpu_node("n1", "GeForce-RTX-4090-Special", 2)   # as an agent without it sends
    assert reported.labels[GPU_MODEL] == "GEFORCE-RTX-4090-SPECIAL"
    operated = OperatedCatalog(CONFIG)
    undo = operated.install()
    try:
        node = operated.normalize(reported)
        assert node.labels[GPU_MODEL] == "RTX4090"
        assert node.labels["fuyao.io/gpu-vendor"] == "nvidia"
        assert {d.model for d in node.devices} == {"RTX4090"}
        pinned = member_selector("fuyao.io/gpu-model >= A10, kubernetes.io/arch = amd64",
                                 "RTX4090", 1000)
    finally:
        undo()
    assert pinned == ("kubernetes.io/arch=amd64, "
                      "fuyao.io/gpu-model in (RTX4090, GEFORCE-RTX-4090-SPECIAL)")
    assert parse_selector(pinned).matches(reported.labels)   # what the member will see


def test_without_a_catalog_config_nothing_changes() -> None:
    plain = OperatedCatalog(None)
    node = gpu_node("n1", "NVIDIA-A100-SXM4-80GB", 8)
    assert plain.normalize(node) is node
    assert member_selector("", "A100", 1000) == "fuyao.io/gpu-model = A100"


@pytest.mark.parametrize(("config", "message"), [
    ({"modles": []}, "expected a mapping with 'models'"),
    ({"models": [{"name": "X", "rank": -1}]}, "rank -1 must be 1..10000"),
    ({"models": [{"name": "X", "kind": "tpu"}]}, "kind must be 'gpu' or 'npu'"),
    ({"models": [{"vendor": "x"}]}, "needs name"),
])
def test_bad_catalog_config_is_refused(config: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        OperatedCatalog(config).install()
    assert DEFAULT_CATALOG.get("X") is None


async def test_catalog_endpoint_lists_models_aliases_and_ranks(fleet: Fleet) -> None:
    body = (await fleet.h.api.get("/api/v1/catalog")).json()
    by_name = {m["name"]: m for m in body["models"]}
    assert (by_name["A100"]["rank"], by_name["A100"]["vendor"], by_name["A100"]["kind"]) == (
        70, "nvidia", "gpu")
    assert [m["name"] for m in body["models"]][:3] == ["T4", "P100", "V100"]


def test_hub_config_file_carries_a_catalog(tmp_path: Path) -> None:
    from hub.config import HubConfig, load_config_file

    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({"catalog": CONFIG}))
    assert load_config_file(path, HubConfig(home=tmp_path)).catalog == CONFIG
