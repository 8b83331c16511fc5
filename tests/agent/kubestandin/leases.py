"""The stand-in's ``coordination.k8s.io/v1`` Leases: get, create and replace (PUT), with a
``resourceVersion`` per write, as the agent's Lease and the fencing watchdog use them
(``member_agent.kubelease``, ``member_agent.watchdog``). Routed by ``server``."""

from __future__ import annotations

import copy
import threading
from typing import Any

from tests.agent.kubestandin.admission import Refused


class Leases:
    """Lease objects by (namespace, name)."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self._rv = 0
        self._lock = threading.Lock()

    def serve(self, method: str, ns: str, name: str | None, body: Any) -> tuple[int, Any]:
        """One API call on ``/apis/coordination.k8s.io/v1/namespaces/NS/leases[/NAME]``."""
        with self._lock:
            if method == "POST" and name is None:
                name = body["metadata"]["name"]
                if (ns, name) in self.items:
                    raise Refused(409, "AlreadyExists",
                                  f'leases.coordination.k8s.io "{name}" already exists')
                return 201, self._store(ns, name, body)
            if name is None or (ns, name) not in self.items:
                raise Refused(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found')
            if method == "GET":
                return 200, copy.deepcopy(self.items[(ns, name)])
            if method == "PUT":
                current = self.items[(ns, name)]["metadata"]["resourceVersion"]
                sent = (body.get("metadata") or {}).get("resourceVersion")
                if sent is not None and sent != current:
                    raise Refused(409, "Conflict", f'Operation cannot be fulfilled on '
                                  f'leases.coordination.k8s.io "{name}": the object has been '
                                  "modified; please apply your changes to the latest version")
                return 200, self._store(ns, name, body)
            raise Refused(405, "MethodNotAllowed", f"{method} leases is not served here")

    def _store(self, ns: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        self._rv += 1
        lease = copy.deepcopy(body)
        lease.update({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"})
        lease.setdefault("metadata", {}).update(
            {"name": name, "namespace": ns, "resourceVersion": str(self._rv)})
        self.items[(ns, name)] = lease
        return copy.deepcopy(lease)
