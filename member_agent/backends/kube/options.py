"""How the kube backend uses its member: namespace, scheduler, tolerations, gangs, sharing.

Built by ``member_agent.cli`` from ``--kube-*`` flags (or by tests directly) and read by the
backend and ``manifest``. Every field has the default a stock cluster (kube-scheduler, the
NVIDIA device plugin, no gang scheduler) needs; see docs/kubernetes.md for each.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuyao.errors import InvalidInput

GANG_MODES = ("agent", "volcano", "coscheduling")
DEFAULT_TOLERATIONS = ("nvidia.com/gpu", "amd.com/gpu", "huawei.com/Ascend910")


@dataclass(frozen=True, slots=True)
class KubeOptions:
    """The kube backend's settings."""

    namespace: str = "fuyao-tasks"
    label_nodes: bool = True
    scheduler_name: str = ""            # "" = the member's default scheduler
    gpu_tolerations: tuple[str, ...] = DEFAULT_TOLERATIONS   # taint keys tolerated (Exists)
    priority_classes: bool = True       # map a task's priority to a PriorityClass
    gang: str = "agent"                 # agent | volcano | coscheduling
    gang_timeout: float = 120.0         # agent gangs: all replicas bound within this, or none
    gpu_memory_resource: str = ""       # HAMi-style per-card memory (MiB), e.g. nvidia.com/gpumem
    gpu_cores_resource: str = ""        # HAMi-style per-card compute (%), e.g. nvidia.com/gpucores
    finished_pod_ttl: float = 600.0     # finished pods kept this long for logs
    account_timeout: float = 60.0       # wait this long for a new namespace's ServiceAccount
    watch_timeout: int = 300
    retry_seconds: float = 2.0

    def __post_init__(self) -> None:
        if self.gang not in GANG_MODES:
            raise InvalidInput(f"gang mode {self.gang!r} must be one of {', '.join(GANG_MODES)}")
        for name, value in (("finished pod TTL", self.finished_pod_ttl),
                            ("gang timeout", self.gang_timeout),
                            ("ServiceAccount wait", self.account_timeout)):
            if value < 0:
                raise InvalidInput(f"{name} {value} must not be negative")
        if bool(self.gpu_memory_resource) != bool(self.gpu_cores_resource):
            raise InvalidInput("GPU sharing needs both the memory and the cores resource names")

    @property
    def sharing(self) -> bool:
        """The member shares cards through HAMi-style resources."""
        return bool(self.gpu_memory_resource)
