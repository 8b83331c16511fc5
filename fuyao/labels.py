"""Node label normalization: what a real node carries -> the canonical ``fuyao.io/*`` keys.

Both member backends call ``normalize_node`` on every node they report (the Kubernetes
backend with the node's labels and ``status.allocatable``, the simulated backend with its
fleet file's labels and resources), then ``devices_for`` to list the node's accelerator
devices. The hub never sees raw vendor labels, only what this module derives, so selectors
mean the same on every member.

Where each key comes from (first source that has it wins):

- model: admin ``fuyao.io/gpu-model`` / ``fuyao.io/npu-model`` -> GFD ``nvidia.com/gpu.product``
  -> GKE ``cloud.google.com/gke-accelerator`` -> ``accelerator=nvidia-*``; for NPU nodes
  Ascend ``node.kubernetes.io/npu.chip.name`` -> ``accelerator=huawei-*`` -> the resource name.
- count: admin ``fuyao.io/gpu-count`` -> allocatable ``nvidia.com/gpu`` / ``huawei.com/Ascend*``
  -> GFD ``nvidia.com/gpu.count``.
- memory per device: admin ``fuyao.io/gpu-memory`` -> GFD ``nvidia.com/gpu.memory`` (MiB)
  -> memory written in the product string -> the catalog's nominal memory.

The ``gpu-*`` count, memory, vendor and node keys describe the node's accelerators of
either kind (the task API counts NPUs as ``gpu`` devices too); the model is kind-specific:
``gpu-model`` on GPU nodes, ``npu-model`` on NPU nodes, so a GPU selector never picks an NPU.
Node data that cannot be parsed is logged and ignored, never raised: one odd node must not
stop an agent from reporting its cluster.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

from fuyao.catalog import DEFAULT_CATALOG, UNKNOWN_VENDOR, Catalog
from fuyao.errors import InvalidInput
from fuyao.inventory import MAX_DEVICES_PER_NODE, DeviceInfo
from fuyao.quantity import format_mib, parse_count, parse_memory_mib_label

GPU_MODEL = "fuyao.io/gpu-model"
GPU_MEMORY = "fuyao.io/gpu-memory"
GPU_COUNT = "fuyao.io/gpu-count"
GPU_VENDOR = "fuyao.io/gpu-vendor"
GPU_NODE = "fuyao.io/gpu-node"
NVLINK = "fuyao.io/nvlink-enabled"
PCIE_BANDWIDTH = "fuyao.io/pcie-bandwidth"
NPU_MODEL = "fuyao.io/npu-model"
SITE = "fuyao.io/site"
REGION = "fuyao.io/region"
ARCH = "kubernetes.io/arch"
PREFIX = "fuyao.io/"

GPU_RESOURCE = "nvidia.com/gpu"
NPU_RESOURCE = "huawei.com/Ascend910"
# Every extended resource counted as accelerator devices, with the NPU family it implies.
NPU_RESOURCES: dict[str, str] = {
    NPU_RESOURCE: "huawei-Ascend910",
    "huawei.com/Ascend310P": "310P",
    "huawei.com/Ascend310": "huawei-Ascend310",
}

GFD_PRODUCT = "nvidia.com/gpu.product"
GFD_MEMORY = "nvidia.com/gpu.memory"
GFD_COUNT = "nvidia.com/gpu.count"
GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"
ASCEND_CHIP = "node.kubernetes.io/npu.chip.name"
ASCEND_ACCELERATOR = "accelerator"
K8S_REGION = "topology.kubernetes.io/region"
K8S_REGION_BETA = "failure-domain.beta.kubernetes.io/region"
K8S_ARCH_BETA = "beta.kubernetes.io/arch"
DEFAULT_ARCH = "amd64"
# Sanity bounds on node data: beyond them a value is a typo, not hardware
# (MAX_DEVICES_PER_NODE, from fuyao.inventory: the hub refuses a wire node beyond it too).
MAX_DEVICE_MEMORY_MIB = 16 * 1024 * 1024  # 16 TiB
_BIG_EXPONENT = re.compile(r"[eE][+-]?\d{3,}")

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NormalizedNode:
    """A node's labels with the derived ``fuyao.io/*`` keys, and its accelerators."""

    labels: dict[str, str]
    accelerator_model: str | None
    accelerator_count: int
    accelerator_memory_mib: int


@dataclass(frozen=True, slots=True)
class _Accelerator:
    """What the vendor labels and resources say about a node's devices."""

    raw_model: str | None
    kind: str
    vendor: str
    count: int | None


def normalize_node(
    raw_labels: Mapping[str, str],
    allocatable: Mapping[str, str | int],
    *,
    catalog: Catalog = DEFAULT_CATALOG,
    overrides: Mapping[str, str] | None = None,
) -> NormalizedNode:
    """Derive the canonical keys; raw ``fuyao.io/*`` labels and ``overrides`` win over them."""
    admin = {k: v for k, v in raw_labels.items() if k.startswith(PREFIX)}
    admin.update(overrides or {})
    found = _detect(raw_labels, allocatable)

    admin_model = admin.get(GPU_MODEL) or admin.get(NPU_MODEL)
    model, string_memory = catalog.canonical(admin_model or found.raw_model or "")
    entry = catalog.get(model) if model else None
    if entry is not None:
        kind = entry.kind
    elif admin.get(NPU_MODEL) and not admin.get(GPU_MODEL):
        kind = "npu"
    else:
        kind = found.kind
    admin_count = _count(admin.get(GPU_COUNT), "admin label " + GPU_COUNT)
    count = _first(admin_count, found.count, 0)
    admin_memory = _memory(admin.get(GPU_MEMORY), "admin label " + GPU_MEMORY)
    memory = _first(
        admin_memory,
        _memory(raw_labels.get(GFD_MEMORY), GFD_MEMORY),
        string_memory,
        entry.memory_mib if entry else 0,
    )

    labels = dict(raw_labels)
    labels[GPU_NODE] = "true" if count > 0 else "false"
    labels[GPU_COUNT] = str(count)
    labels[ARCH] = raw_labels.get(ARCH) or raw_labels.get(K8S_ARCH_BETA) or DEFAULT_ARCH
    if model:
        labels[NPU_MODEL if kind == "npu" else GPU_MODEL] = model
    if model or count:
        labels[GPU_VENDOR] = entry.vendor if entry else found.vendor
    if memory > 0:
        labels[GPU_MEMORY] = format_mib(memory)
    if _has_sxm(admin_model or found.raw_model or ""):
        labels[NVLINK] = "true"
    region = raw_labels.get(K8S_REGION) or raw_labels.get(K8S_REGION_BETA)
    if region:
        labels[REGION] = region
    labels.update(admin)
    # Admin values the code can read are written back in canonical form.
    if admin_model and model:
        labels.pop(GPU_MODEL if kind == "npu" else NPU_MODEL, None)
        labels[NPU_MODEL if kind == "npu" else GPU_MODEL] = model
    if admin_count is not None:
        labels[GPU_COUNT] = str(admin_count)
    if admin_memory is not None:
        labels[GPU_MEMORY] = format_mib(admin_memory)
    accelerator = model or ("unknown" if count > 0 else None)
    return NormalizedNode(labels, accelerator, count, memory)


def devices_for(node_name: str, normalized: NormalizedNode) -> tuple[DeviceInfo, ...]:
    """One free ``DeviceInfo`` per accelerator, ids ``"<node>/gpu<i>"``."""
    model = normalized.accelerator_model or "unknown"
    memory = normalized.accelerator_memory_mib
    return tuple(
        DeviceInfo(
            id=f"{node_name}/gpu{i}",
            model=model,
            memory_mib=memory,
            free_milli=1000,
            free_memory_mib=memory,
        )
        for i in range(normalized.accelerator_count)
    )


def _detect(labels: Mapping[str, str], allocatable: Mapping[str, str | int]) -> _Accelerator:
    """The node's accelerators as the vendor labels and extended resources report them."""
    gpu_count = _count(allocatable.get(GPU_RESOURCE), "allocatable " + GPU_RESOURCE)
    if gpu_count is None:
        gpu_count = _count(labels.get(GFD_COUNT), GFD_COUNT)
    accelerator = labels.get(ASCEND_ACCELERATOR, "")
    product = (
        labels.get(GFD_PRODUCT)
        or labels.get(GKE_ACCELERATOR)
        or (accelerator if accelerator.lower().startswith("nvidia-") else None)
    )
    npu_count: int | None = None
    npu_family: str | None = None
    for resource, family in NPU_RESOURCES.items():
        n = _count(allocatable.get(resource), "allocatable " + resource)
        if n is not None:
            npu_count = (npu_count or 0) + n
            npu_family = npu_family or family
    chip = labels.get(ASCEND_CHIP) or (
        accelerator if accelerator.lower().startswith("huawei-") else npu_family
    )
    if gpu_count or (product and not npu_count):
        return _Accelerator(product, "gpu", "nvidia", gpu_count)
    if npu_count is not None or chip:
        return _Accelerator(chip, "npu", "huawei", npu_count)
    return _Accelerator(None, "gpu", UNKNOWN_VENDOR, gpu_count)


def _first(*values: int | None) -> int:
    """The first value that is not None (the last one always is an int)."""
    for value in values:
        if value is not None:
            return value
    return 0


def plausible_number(value: str | int) -> bool:
    """A cheap guard before parsing node data as a quantity: short, no huge exponent.

    ``fuyao.quantity`` would turn ``1e999999`` into a million-digit integer (seconds of CPU)
    and ``1e9999999`` into a ``decimal.Overflow``; node data must never cost that or raise.
    """
    if isinstance(value, int):
        return abs(value) < 10**18
    return len(value) <= 32 and _BIG_EXPONENT.search(value) is None


def _count(value: str | int | None, source: str) -> int | None:
    if value is None:
        return None
    try:
        if not plausible_number(value):
            raise InvalidInput(f"{source}: {value!r} is not a plausible device count")
        count = parse_count(value, what=source)
        if count > MAX_DEVICES_PER_NODE:
            raise InvalidInput(f"{source}: {count} devices, more than {MAX_DEVICES_PER_NODE}")
        return count
    except InvalidInput as exc:
        log.warning("ignoring node value %s", exc)
        return None


def _memory(value: str | None, source: str) -> int | None:
    if value is None:
        return None
    try:
        if not plausible_number(value):
            raise InvalidInput(f"{source}: {value!r} is not a plausible memory size")
        memory = parse_memory_mib_label(value)
        if memory > MAX_DEVICE_MEMORY_MIB:
            raise InvalidInput(f"{source}: {value!r} is more memory than any device has")
        return memory
    except InvalidInput as exc:
        log.warning("ignoring node value %s", exc)
        return None


def _has_sxm(product: str) -> bool:
    """SXM modules are NVLink-connected; other form factors may or may not be."""
    lowered = product.lower()
    return "-sxm" in lowered or lowered.startswith("sxm")
