"""Capacity rows: per cluster and accelerator model, what is used, reserved and free.

``FleetView.capacity`` calls ``capacity_rows`` for the REST capacity view and the CLI's
``fuyaoctl capacity``. Devices count whole cards (a share in use counts as its fraction).
Nodes that are cordoned or NotReady are in the total, as ``kubectl get nodes`` lists them,
but never free: their idle part is ``unschedulable``. The reserve is the cluster's headroom
fraction of the schedulable nodes' total, and ``free`` is what is left of that total after
allocations there and the reserve, never below zero. CPU is in cores and memory in GiB.
"""

from __future__ import annotations

from fuyao.spec import CapacityRow
from hub.fleet.cluster import ClusterInfo
from hub.fleet.nodes import WHOLE

_DIGITS = 3


def capacity_rows(cluster: ClusterInfo) -> list[CapacityRow]:
    """One row per accelerator model of the cluster (``none`` for CPU-only nodes), by model."""
    rows: list[CapacityRow] = []
    totals = cluster.totals()
    device_memory = _device_memory(cluster)
    h = cluster.headroom
    for model in sorted(totals):
        t = totals[model]
        devices = _split(t.devices, t.used_milli / WHOLE, t.off_devices,
                         t.off_used_milli / WHOLE, h)
        cpu = _split(t.cpu_total / 1000, t.cpu_used / 1000, t.off_cpu_total / 1000,
                     t.off_cpu_used / 1000, h)
        mem = _split(t.mem_total / 1024, t.mem_used / 1024, t.off_mem_total / 1024,
                     t.off_mem_used / 1024, h)
        rows.append(CapacityRow(
            cluster=cluster.name, model=model, nodes=t.nodes, devices_total=t.devices,
            devices_allocated=devices[0], devices_reserved=devices[1], devices_free=devices[2],
            devices_unschedulable=devices[3],
            cpu_total=round(t.cpu_total / 1000, _DIGITS), cpu_allocated=cpu[0],
            cpu_reserved=cpu[1], cpu_free=cpu[2], cpu_unschedulable=cpu[3],
            memory_total_gib=round(t.mem_total / 1024, _DIGITS), memory_allocated_gib=mem[0],
            memory_reserved_gib=mem[1], memory_free_gib=mem[2], memory_unschedulable_gib=mem[3],
            **device_memory.get(model, {}),
        ))
    return rows


def _device_memory(cluster: ClusterInfo) -> dict[str, dict[str, float]]:
    """Per model: device memory total / allocated / free in GiB. A device gives memory in
    proportion to its share (GPU memory sharing, ``hub.placement.memshare``), so a device
    with a quarter of its share in use has a quarter of its memory allocated."""
    sums: dict[str, list[float]] = {}
    for node in cluster.nodes():
        for (model, memory), slot in node.classes.items():
            for free in slot.frees:
                total, used = sums.setdefault(model, [0.0, 0.0])
                sums[model] = [total + memory, used + memory * (WHOLE - free) / WHOLE]
    return {model: {"gpu_memory_total_gib": round(total / 1024, _DIGITS),
                    "gpu_memory_allocated_gib": round(used / 1024, _DIGITS),
                    "gpu_memory_free_gib": round((total - used) / 1024, _DIGITS)}
            for model, (total, used) in sums.items()}


def _split(
    total: float, allocated: float, off_total: float, off_allocated: float, headroom: float
) -> tuple[float, float, float, float]:
    """(allocated, reserved, free, unschedulable) of one resource, rounded for display."""
    open_total = total - off_total
    reserved = headroom * open_total
    free = max(0.0, open_total - (allocated - off_allocated) - reserved)
    idle_off = max(0.0, off_total - off_allocated)
    return (round(allocated, _DIGITS), round(reserved, _DIGITS), round(free, _DIGITS),
            round(idle_off, _DIGITS))
