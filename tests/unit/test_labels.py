"""Node label normalization: real node labels -> canonical fuyao.io/* keys and devices."""

from __future__ import annotations

import logging

import pytest

from fuyao.catalog import DEFAULT_CATALOG
from fuyao.inventory import DeviceInfo
from fuyao.labels import (
    ARCH,
    GPU_COUNT,
    GPU_MEMORY,
    GPU_MODEL,
    GPU_NODE,
    GPU_RESOURCE,
    GPU_VENDOR,
    NPU_MODEL,
    NPU_RESOURCE,
    NVLINK,
    REGION,
    SITE,
    devices_for,
    normalize_node,
    plausible_number,
)

GFD_A100 = {
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    "nvidia.com/gpu.memory": "81920",
    "nvidia.com/gpu.count": "8",
    "topology.kubernetes.io/region": "cn-east",
    "topology.kubernetes.io/zone": "cn-east-1a",
    "kubernetes.io/hostname": "gpu-a-01",
}


# name, raw labels, allocatable, the fuyao.io/* keys wanted (exactly), model, count, memory
CASES = [
    (
        "gfd-a100",
        GFD_A100,
        {GPU_RESOURCE: "8", "cpu": "96"},
        {GPU_MODEL: "A100", GPU_COUNT: "8", GPU_MEMORY: "80Gi", GPU_VENDOR: "nvidia",
         GPU_NODE: "true", NVLINK: "true", REGION: "cn-east"},
        ("A100", 8, 81920),
    ),
    (
        "gfd-v100-pcie-memory-from-product",
        {"nvidia.com/gpu.product": "Tesla-V100-PCIE-16GB", "nvidia.com/gpu.count": "4"},
        {},
        {GPU_MODEL: "V100", GPU_COUNT: "4", GPU_MEMORY: "16Gi", GPU_VENDOR: "nvidia",
         GPU_NODE: "true"},
        ("V100", 4, 16384),
    ),
    (
        "gfd-measured-memory-not-whole-gi",
        {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"},
        {GPU_RESOURCE: 8},
        {GPU_MODEL: "H100", GPU_COUNT: "8", GPU_MEMORY: "81559Mi", GPU_VENDOR: "nvidia",
         GPU_NODE: "true"},
        ("H100", 8, 81559),
    ),
    (
        "allocatable-count-wins-over-label",
        {"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.count": "4"},
        {GPU_RESOURCE: "2"},
        {GPU_MODEL: "T4", GPU_COUNT: "2", GPU_MEMORY: "16Gi", GPU_VENDOR: "nvidia",
         GPU_NODE: "true"},
        ("T4", 2, 16384),
    ),
    (
        "all-gpus-unhealthy",
        {"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.count": "4"},
        {GPU_RESOURCE: "0"},
        {GPU_MODEL: "T4", GPU_COUNT: "0", GPU_MEMORY: "16Gi", GPU_VENDOR: "nvidia",
         GPU_NODE: "false"},
        ("T4", 0, 16384),
    ),
    (
        "gke-accelerator",
        {"cloud.google.com/gke-accelerator": "nvidia-l4"},
        {GPU_RESOURCE: "1"},
        {GPU_MODEL: "L4", GPU_COUNT: "1", GPU_MEMORY: "24Gi", GPU_VENDOR: "nvidia",
         GPU_NODE: "true"},
        ("L4", 1, 24576),
    ),
    (
        "gpus-without-product-label",
        {},
        {GPU_RESOURCE: "2"},
        {GPU_COUNT: "2", GPU_VENDOR: "nvidia", GPU_NODE: "true"},
        ("unknown", 2, 0),
    ),
    (
        "unknown-product-kept-cleaned",
        {"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-4090"},
        {GPU_RESOURCE: "1"},
        {GPU_MODEL: "GEFORCE-RTX-4090", GPU_COUNT: "1", GPU_VENDOR: "nvidia", GPU_NODE: "true"},
        ("GEFORCE-RTX-4090", 1, 0),
    ),
    (
        "ascend-910b-chip-name",
        {"accelerator": "huawei-Ascend910", "node.kubernetes.io/npu.chip.name": "910B3",
         "kubernetes.io/arch": "arm64"},
        {NPU_RESOURCE: "8"},
        {NPU_MODEL: "910B", GPU_COUNT: "8", GPU_MEMORY: "64Gi", GPU_VENDOR: "huawei",
         GPU_NODE: "true"},
        ("910B", 8, 65536),
    ),
    (
        "ascend-family-only",
        {"accelerator": "huawei-Ascend910"},
        {NPU_RESOURCE: 8},
        {NPU_MODEL: "910", GPU_COUNT: "8", GPU_VENDOR: "huawei", GPU_NODE: "true"},
        ("910", 8, 0),
    ),
    (
        "ascend-310p-resource-only",
        {},
        {"huawei.com/Ascend310P": "4"},
        {NPU_MODEL: "310P", GPU_COUNT: "4", GPU_MEMORY: "24Gi", GPU_VENDOR: "huawei",
         GPU_NODE: "true"},
        ("310P", 4, 24576),
    ),
    (
        "cpu-only",
        {"kubernetes.io/hostname": "cpu-01"},
        {"cpu": "64", "memory": "256Gi"},
        {GPU_COUNT: "0", GPU_NODE: "false"},
        (None, 0, 0),
    ),
    (
        "trace-model-as-admin-label",
        {GPU_MODEL: "V100M32"},
        {GPU_RESOURCE: 8},
        {GPU_MODEL: "V100", GPU_COUNT: "8", GPU_MEMORY: "32Gi", GPU_VENDOR: "nvidia",
         GPU_NODE: "true"},
        ("V100", 8, 32768),
    ),
    (
        "trace-undisclosed-model",
        {GPU_MODEL: "G2", GPU_COUNT: "2"},
        {},
        {GPU_MODEL: "G2", GPU_COUNT: "2", GPU_VENDOR: "unknown", GPU_NODE: "true"},
        ("G2", 2, 0),
    ),
    (
        "admin-labels-win-and-are-canonicalized",
        {**GFD_A100, GPU_MODEL: "h100", GPU_MEMORY: "98304", SITE: "lab-3", NVLINK: "false"},
        {GPU_RESOURCE: "8"},
        {GPU_MODEL: "H100", GPU_COUNT: "8", GPU_MEMORY: "96Gi", GPU_VENDOR: "nvidia",
         GPU_NODE: "true", NVLINK: "false", REGION: "cn-east", SITE: "lab-3"},
        ("H100", 8, 98304),
    ),
    (
        "admin-npu-model-on-gpu-key-moves-to-npu-key",
        {GPU_MODEL: "Ascend910B"},
        {NPU_RESOURCE: "8"},
        {NPU_MODEL: "910B", GPU_COUNT: "8", GPU_MEMORY: "64Gi", GPU_VENDOR: "huawei",
         GPU_NODE: "true"},
        ("910B", 8, 65536),
    ),
    (
        "unreadable-admin-value-is-kept-verbatim",
        {"nvidia.com/gpu.product": "Tesla-T4", GPU_MEMORY: "lots"},
        {GPU_RESOURCE: "1"},
        {GPU_MODEL: "T4", GPU_COUNT: "1", GPU_MEMORY: "lots", GPU_VENDOR: "nvidia",
         GPU_NODE: "true"},
        ("T4", 1, 16384),
    ),
]


@pytest.mark.parametrize(
    ("raw", "allocatable", "wanted", "summary"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_normalize_node(
    raw: dict[str, str],
    allocatable: dict[str, str | int],
    wanted: dict[str, str],
    summary: tuple[str | None, int, int],
) -> None:
    node = normalize_node(raw, allocatable)
    derived = {k: v for k, v in node.labels.items() if k.startswith("fuyao.io/")}
    assert derived == wanted
    assert (node.accelerator_model, node.accelerator_count, node.accelerator_memory_mib) == summary


def test_original_labels_are_all_kept() -> None:
    node = normalize_node(GFD_A100, {GPU_RESOURCE: "8"})
    for key, value in GFD_A100.items():
        assert node.labels[key] == value


@pytest.mark.parametrize(
    ("raw", "arch"),
    [({}, "amd64"), ({ARCH: "arm64"}, "arm64"), ({"beta.kubernetes.io/arch": "arm64"}, "arm64")],
    ids=["default", "kubernetes.io", "legacy-beta"],
)
def test_arch_defaults_to_amd64(raw: dict[str, str], arch: str) -> None:
    assert normalize_node(raw, {}).labels[ARCH] == arch


def test_legacy_region_label_is_read() -> None:
    node = normalize_node({"failure-domain.beta.kubernetes.io/region": "eu-1"}, {})
    assert node.labels[REGION] == "eu-1"


def test_overrides_argument_beats_raw_admin_labels() -> None:
    raw = {"nvidia.com/gpu.product": "Tesla-T4", GPU_MODEL: "V100", SITE: "a"}
    node = normalize_node(raw, {GPU_RESOURCE: 4}, overrides={GPU_MODEL: "A10", SITE: "b"})
    assert node.labels[GPU_MODEL] == "A10" and node.labels[SITE] == "b"
    assert node.accelerator_model == "A10"
    assert node.accelerator_memory_mib == 24576


def test_admin_count_override_makes_a_gpu_node() -> None:
    node = normalize_node({}, {}, overrides={GPU_MODEL: "T4", GPU_COUNT: "4"})
    assert node.accelerator_count == 4
    assert node.labels[GPU_NODE] == "true"
    assert len(devices_for("n", node)) == 4


def test_operator_aliases_apply_through_the_catalog() -> None:
    catalog = DEFAULT_CATALOG.with_aliases({"huawei-Ascend910": "910B"})
    node = normalize_node({"accelerator": "huawei-Ascend910"}, {NPU_RESOURCE: "8"},
                          catalog=catalog)
    assert node.labels[NPU_MODEL] == "910B"
    assert node.accelerator_memory_mib == 65536


@pytest.mark.parametrize(
    ("allocatable", "labels"),
    [
        ({GPU_RESOURCE: "lots"}, {}),
        ({GPU_RESOURCE: "1.5"}, {}),
        ({GPU_RESOURCE: "-2"}, {}),
        ({GPU_RESOURCE: "1e999999"}, {}),
        ({GPU_RESOURCE: "100000"}, {}),
        ({}, {"nvidia.com/gpu.count": "many"}),
        ({}, {GPU_COUNT: "1e12"}),
    ],
    ids=["word", "fraction", "negative", "huge-exponent", "too-many", "bad-label", "bad-admin"],
)
def test_unreadable_counts_are_ignored_not_raised(
    allocatable: dict[str, str | int], labels: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="fuyao.labels"):
        node = normalize_node({"nvidia.com/gpu.product": "Tesla-T4", **labels}, allocatable)
    assert node.accelerator_count == 0
    assert "ignoring node value" in caplog.text


@pytest.mark.parametrize(
    "memory", ["80 gigs", "-1", "1e999", "99999999999"], ids=["word", "negative", "exp", "huge"]
)
def test_unreadable_gfd_memory_falls_back_to_product_string(memory: str) -> None:
    raw = {"nvidia.com/gpu.product": "NVIDIA-A100-PCIE-40GB", "nvidia.com/gpu.memory": memory}
    node = normalize_node(raw, {GPU_RESOURCE: "1"})
    assert node.accelerator_memory_mib == 40960
    assert node.labels[GPU_MEMORY] == "40Gi"


def test_devices_for_lists_every_device_free() -> None:
    node = normalize_node(GFD_A100, {GPU_RESOURCE: "2"})
    assert devices_for("gpu-a-01", node) == (
        DeviceInfo("gpu-a-01/gpu0", "A100", 81920, 1000, 81920),
        DeviceInfo("gpu-a-01/gpu1", "A100", 81920, 1000, 81920),
    )


def test_devices_for_cpu_node_is_empty() -> None:
    assert devices_for("cpu-01", normalize_node({}, {"cpu": "8"})) == ()


def test_devices_for_unknown_model_says_unknown() -> None:
    devices = devices_for("n", normalize_node({}, {GPU_RESOURCE: "1"}))
    assert [d.model for d in devices] == ["unknown"]


@pytest.mark.parametrize(
    ("value", "ok"),
    [("8", True), (8, True), ("80Gi", True), ("1e3", True), ("1e999", False),
     ("9" * 40, False), (10**20, False)],
)
def test_plausible_number(value: str | int, ok: bool) -> None:
    assert plausible_number(value) is ok
