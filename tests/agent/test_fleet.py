"""Fleet files and trace node lists: what a sim member is built from, and how bad ones fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuyao.errors import InvalidInput
from fuyao.fleetfile import load_fleet
from fuyao.nodebuild import build_node

TRACE = Path("/work/shared/traces/alibaba-gpu-v2023/openb_node_list_all_node.csv")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "fleets"

GOOD = """
cluster:
  labels: {fuyao.io/region: cn-east, fuyao.io/site: sh-1}
nodePools:
  - name: h100
    count: 2
    labels: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3, nvidia.com/gpu.memory: "81559"}
    allocatable: {cpu: "96", memory: 1Ti, pods: "110", nvidia.com/gpu: "8"}
  - name: cpu
    count: 1
    labels: {kubernetes.io/arch: arm64}
    allocatable: {cpu: 64, memory: 256Gi}
    unschedulable: true
"""


def write(tmp_path: Path, text: str, name: str = "fleet.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_yaml_fleet_expands_pools_into_kubernetes_like_nodes(tmp_path: Path) -> None:
    fleet = load_fleet(str(write(tmp_path, GOOD)))
    assert fleet.cluster_labels == {"fuyao.io/region": "cn-east", "fuyao.io/site": "sh-1"}
    assert [n.name for n in fleet.nodes] == ["h100-0", "h100-1", "cpu-0"]
    h100 = fleet.nodes[0]
    assert h100.labels["kubernetes.io/hostname"] == "h100-0"
    assert h100.labels["kubernetes.io/arch"] == "amd64"  # kubelet's default, as on real nodes
    assert h100.allocatable["nvidia.com/gpu"] == "8"
    cpu = fleet.nodes[2]
    assert cpu.labels["kubernetes.io/arch"] == "arm64"
    assert cpu.allocatable["pods"] == "110"
    assert cpu.unschedulable


def test_fleet_nodes_normalize_like_a_kubernetes_member(tmp_path: Path) -> None:
    fleet = load_fleet(str(write(tmp_path, GOOD)))
    spec = fleet.nodes[0]
    node = build_node(spec.name, spec.labels, spec.allocatable)
    assert node.labels["fuyao.io/gpu-model"] == "H100"
    assert node.labels["fuyao.io/gpu-count"] == "8"
    assert node.allocatable.cpu_milli == 96_000
    assert node.allocatable.memory_mib == 1024 * 1024
    assert node.free == node.allocatable
    assert len(node.devices) == 8
    assert {d.memory_mib for d in node.devices} == {81559}
    assert all(d.free_milli == 1000 for d in node.devices)


BAD = {
    "unknown-top-key": ("nodePool: []\n", "nodePool: unknown key"),
    "unknown-pool-key": (
        "nodePools:\n- {name: a, count: 1, alocatable: {cpu: 1, memory: 1Gi}}\n",
        "nodePools[0].alocatable: unknown key",
    ),
    "missing-count": (
        "nodePools:\n- {name: a, allocatable: {cpu: 1, memory: 1Gi}}\n",
        "nodePools[0].count: required",
    ),
    "negative-count": (
        "nodePools:\n- {name: a, count: -1, allocatable: {cpu: 1, memory: 1Gi}}\n",
        "nodePools[0].count: -1 must be a non-negative integer",
    ),
    "negative-cpu": (
        "nodePools:\n- {name: a, count: 1, allocatable: {cpu: '-4', memory: 1Gi}}\n",
        "nodePools[0].allocatable.cpu: cpu: '-4' must not be negative",
    ),
    "bad-memory": (
        "nodePools:\n- {name: a, count: 1, allocatable: {cpu: 1, memory: lots}}\n",
        "nodePools[0].allocatable.memory: memory: 'lots' is not a quantity",
    ),
    "fractional-gpu-count": (
        "nodePools:\n- {name: a, count: 1, allocatable: {cpu: 1, memory: 1Gi, "
        "nvidia.com/gpu: '1.5'}}\n",
        "nodePools[0].allocatable.nvidia.com/gpu",
    ),
    "missing-memory": (
        "nodePools:\n- {name: a, count: 1, allocatable: {cpu: 1}}\n",
        "nodePools[0].allocatable.memory: required",
    ),
    "bad-pool-name": (
        "nodePools:\n- {name: A_B, count: 1, allocatable: {cpu: 1, memory: 1Gi}}\n",
        "nodePools[0].name: pool name 'A_B'",
    ),
    "duplicate-node": (
        "nodePools:\n- {name: a, count: 1, allocatable: {cpu: 1, memory: 1Gi}}\n"
        "- {name: a, count: 1, allocatable: {cpu: 1, memory: 1Gi}}\n",
        "nodePools[1]: duplicate node 'a-0'",
    ),
    "bad-label-key": (
        "nodePools:\n- {name: a, count: 1, labels: {'bad key': x}, "
        "allocatable: {cpu: 1, memory: 1Gi}}\n",
        "nodePools[0].labels: label key 'bad key'",
    ),
    "list-label-value": (
        "nodePools:\n- {name: a, count: 1, labels: {k: [1]}, allocatable: {cpu: 1, memory: 1Gi}}\n",
        "nodePools[0].labels.k: [1] must be a string or number",
    ),
    "no-pools": ("cluster: {labels: {}}\n", "nodePools: must be a non-empty list"),
    "not-yaml": ("nodePools: [\n", "not valid YAML"),
    "not-a-mapping": ("- 1\n", "(top level): must be a mapping"),
}


@pytest.mark.parametrize(("text", "wanted"), list(BAD.values()), ids=list(BAD))
def test_bad_fleet_file_names_file_and_path(tmp_path: Path, text: str, wanted: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InvalidInput) as info:
        load_fleet(str(path))
    assert str(path) in info.value.message
    assert wanted in info.value.message


def test_missing_fleet_file_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read fleet file"):
        load_fleet(str(tmp_path / "nope.yaml"))


def test_trace_csv_slice_takes_rows_and_normalizes_trace_models() -> None:
    fleet = load_fleet(f"{TRACE}:300:20")
    assert len(fleet.nodes) == 20
    assert fleet.nodes[0].name == "openb-node-0300"
    by_model: dict[str, int] = {}
    for spec in fleet.nodes:
        node = build_node(spec.name, spec.labels, spec.allocatable)
        model = node.labels.get("fuyao.io/gpu-model", "none")
        by_model[model] = by_model.get(model, 0) + len(node.devices)
    v100 = next(
        build_node(s.name, s.labels, s.allocatable)
        for s in fleet.nodes
        if s.labels.get("nvidia.com/gpu.product", "").startswith("V100M")
    )
    assert v100.labels["fuyao.io/gpu-model"] == "V100"
    assert v100.labels["fuyao.io/gpu-memory"] in ("16Gi", "32Gi")
    assert sum(by_model.values()) > 0


def test_trace_csv_cpu_only_rows_have_no_devices() -> None:
    spec = load_fleet(f"{TRACE}:0:1").nodes[0]
    node = build_node(spec.name, spec.labels, spec.allocatable)
    assert node.devices == ()
    assert node.labels["fuyao.io/gpu-node"] == "false"
    assert node.allocatable.cpu_milli == 32_000


def test_trace_csv_without_slice_takes_every_row() -> None:
    assert len(load_fleet(str(TRACE)).nodes) == 1523


@pytest.mark.parametrize(
    ("suffix", "wanted"),
    [(":1520:10", "rows 1520:1530 out of range"), (":5000", "out of range"), (":0:0", "0:0")],
    ids=["past-end", "start-past-end", "empty"],
)
def test_trace_csv_bad_slice(suffix: str, wanted: str) -> None:
    with pytest.raises(InvalidInput, match=wanted):
        load_fleet(f"{TRACE}{suffix}")


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("sn,cpu\nn1,1\n", "missing column(s) cpu_milli, memory_mib, gpu, model"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn1,abc,1024,0,\n", "line 2): cpu_milli: 'abc'"),
        ("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,-5,0,\n", "memory_mib: '-5' must not be"),
        ("sn,cpu_milli,memory_mib,gpu,model\n,1000,5,0,\n", "sn: empty node name"),
    ],
    ids=["missing-columns", "non-number", "negative", "empty-name"],
)
def test_bad_trace_csv(tmp_path: Path, text: str, wanted: str) -> None:
    path = write(tmp_path, text, "nodes.csv")
    with pytest.raises(InvalidInput) as info:
        load_fleet(str(path))
    assert str(path) in info.value.message
    assert wanted in info.value.message


@pytest.mark.parametrize("name", ["gpu-east.yaml", "gpu-west.yaml", "edge-mixed.yaml"])
def test_example_fleets_load(name: str) -> None:
    fleet = load_fleet(str(EXAMPLES / name))
    assert 10 <= len(fleet.nodes) <= 100
    assert fleet.cluster_labels
