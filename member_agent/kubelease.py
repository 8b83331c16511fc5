"""Fencing for Kubernetes members: the agent's Lease object and the watchdog's check of it.

``KubeLease`` is the ``LeaseHolder`` the agent (``member_agent.connection``) renews for
``--backend kube``: a ``coordination.k8s.io/v1`` Lease (default ``fuyao-agent`` in the task
namespace) whose ``renewTime`` is when the proven request left the agent (wall clock) and
whose ``leaseDurationSeconds`` is the hub's lease time rounded down. ``expired`` is the
rule the watchdog (``member_agent.watchdog``) applies with its own clock. A renewal never
moves ``renewTime`` backwards, so a late one (the agent was frozen) changes nothing.
"""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fuyao.errors import Transient

DEFAULT_LEASE_NAME = "fuyao-agent"


def lease_deadline(lease: Any) -> datetime | None:
    """When the Lease runs out (``renewTime + leaseDurationSeconds``), or None if never
    renewed."""
    spec = lease.spec
    if spec is None or spec.renew_time is None or not spec.lease_duration_seconds:
        return None
    renewed: datetime = spec.renew_time
    if renewed.tzinfo is None:
        renewed = renewed.replace(tzinfo=UTC)
    return renewed + timedelta(seconds=spec.lease_duration_seconds)


def expired(lease: Any | None, now: datetime) -> bool:
    """The watchdog's rule: no Lease, a Lease never renewed, or one past its deadline."""
    deadline = None if lease is None else lease_deadline(lease)
    return deadline is None or now >= deadline


class KubeLease:
    """The member's Lease, renewed by the agent on proof of a live hub session."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str = DEFAULT_LEASE_NAME,
                 holder: str = "fuyao-agent") -> None:
        self.api = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self.holder = holder

    async def renew_lease(self, sent_monotonic: float, lease_seconds: float) -> None:
        """Set ``renewTime`` to when the proof's request left (never backwards)."""
        renewed = datetime.now(UTC) - timedelta(seconds=time.monotonic() - sent_monotonic)
        duration = max(1, math.floor(lease_seconds))
        await asyncio.to_thread(self._write, renewed, duration)

    def _write(self, renewed: datetime, duration: int) -> None:
        try:
            try:
                lease = self.api.read_namespaced_lease(self.name, self.namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                body = client.V1Lease(
                    metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
                    spec=client.V1LeaseSpec(holder_identity=self.holder, renew_time=renewed,
                                            lease_duration_seconds=duration))
                self.api.create_namespaced_lease(self.namespace, body)
                return
            current = lease_deadline(lease)
            if current is not None and current >= renewed + timedelta(seconds=duration):
                return                       # a late renewal: it would only shorten it
            lease.spec = lease.spec or client.V1LeaseSpec()
            lease.spec.renew_time = renewed
            lease.spec.lease_duration_seconds = duration
            lease.spec.holder_identity = self.holder
            self.api.replace_namespaced_lease(self.name, self.namespace, lease)
        except ApiException as exc:
            raise Transient(f"cannot renew Lease {self.namespace}/{self.name}: "
                            f"{exc.status} {exc.reason}") from exc
        except Exception as exc:    # the connection itself (urllib3, OSError)
            raise Transient(f"cannot renew Lease {self.namespace}/{self.name}: "
                            f"{type(exc).__name__}: {exc}") from exc
