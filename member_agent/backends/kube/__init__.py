"""The ``kube`` backend: a Kubernetes member cluster through the official ``kubernetes`` client.

``backend`` (list+watch, pods per task copy), ``convert`` (V1Node -> NodeInfo, pods -> phase),
``manifest`` (Pod manifests, node affinity from selectors), ``member`` (namespace,
ServiceAccount wait, PriorityClasses, PodGroups), ``reasons`` (why a pod stopped),
``options`` (settings). Tested against an in-process stand-in of the Kubernetes v1.36 API
(``tests/agent/kubestandin/``), not a real API server.
"""

from __future__ import annotations

from member_agent.backends.kube.backend import KubeBackend

__all__ = ["KubeBackend"]
