"""A stand-in for the Kubernetes v1.36 API server and control plane, for tests (never shipped).

No API server can run on the test machine, so this serves the API paths the kube backend
and the hub's push join call over real HTTP(S), for the real ``kubernetes`` client, and
behaves as v1.36 does where a client can tell (see ``server``, ``cluster``, ``admission``
and ``scheduler``). It is not a Kubernetes: no etcd, no garbage collector, one scheduler
profile, no preemption.
"""

from __future__ import annotations

from tests.agent.kubestandin.server import KubeStandIn

__all__ = ["KubeStandIn"]
