"""``fuyao-agent watchdog``: stops a Kubernetes member's restartable task pods once its
agent's Lease has expired.

Runs as its own Deployment (``charts/fuyao-agent/templates/watchdog.yaml``), apart from the
agent, with its own ServiceAccount that may only read the Lease and list and delete pods in
the task namespace. Every ``--interval`` seconds ``sweep`` reads the Lease
(``member_agent.kubelease``); when it has expired on the watchdog's own clock, it deletes
every task pod the agent manages except those of ``failover: never`` tasks (label
``fuyao.io/failover=never``). The hub re-places those tasks only after the lease time plus
its safety margin, so they never run in two clusters at once (docs/concepts/lifecycle.md).
"""

from __future__ import annotations

import logging
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from fuyao.errors import FuyaoError, InvalidInput

log = logging.getLogger("member_agent.watchdog")
FAILOVER_LABEL = "fuyao.io/failover"
MANAGED = "app.kubernetes.io/managed-by=fuyao-agent"
RESTARTABLE_PODS = f"{MANAGED},{FAILOVER_LABEL}!=never"


DEFAULT_GRACE = 5


def sweep(api: Any, namespace: str, lease_name: str, now: datetime | None = None,
          grace: int = DEFAULT_GRACE) -> list[str]:
    """One check: if the Lease expired, delete the restartable task pods (``grace`` seconds
    to stop, not the pod's own period: the hub's failover margin must cover it); their
    names."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from member_agent.kubelease import expired

    now = now or datetime.now(UTC)
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(lease_name, namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise
        lease = None
    if not expired(lease, now):
        return []
    core = client.CoreV1Api(api)
    pods = core.list_namespaced_pod(namespace, label_selector=RESTARTABLE_PODS).items
    deleted: list[str] = []
    for pod in pods:
        meta = pod.metadata
        if meta is None or not meta.name:
            continue
        labels = meta.labels or {}
        if (meta.deletion_timestamp is not None or labels.get(FAILOVER_LABEL) == "never"
                or labels.get("app.kubernetes.io/managed-by") != "fuyao-agent"):
            continue     # the selector says the same; checked again in case it was ignored
        try:
            core.delete_namespaced_pod(meta.name, namespace, grace_period_seconds=grace)
        except ApiException as exc:
            if exc.status != 404:
                raise
        deleted.append(meta.name)
    if deleted:
        log.warning("Lease %s/%s expired: deleted %d restartable task pods", namespace,
                    lease_name, len(deleted))
    return deleted


@click.command("watchdog")
@click.option("--kubeconfig", type=click.Path(path_type=Path), default=None)
@click.option("--namespace", default="fuyao-tasks", show_default=True,
              help="The task namespace (where the Lease and the task pods live).")
@click.option("--lease-name", default="fuyao-agent", show_default=True)
@click.option("--interval", type=float, default=1.0, show_default=True,
              help="Seconds between checks.")
@click.option("--grace-period", type=click.IntRange(0, 3600), default=DEFAULT_GRACE,
              show_default=True,
              help="Seconds a fenced pod gets to stop (keep it below the hub's failover_margin).")
def watchdog_command(kubeconfig: Path | None, namespace: str, lease_name: str,
                     interval: float, grace_period: int) -> None:
    """Delete restartable task pods while the agent's Lease is expired."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if interval <= 0:
            raise InvalidInput(f"--interval {interval} must be positive")
        try:
            if kubeconfig is not None:
                config.load_kube_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
            else:
                config.load_incluster_config()  # type: ignore[no-untyped-call]
        except (config.ConfigException, OSError) as exc:
            raise InvalidInput(f"cannot load Kubernetes credentials: {exc}") from exc
        api = client.ApiClient()
        log.info("watching Lease %s/%s every %.1fs", namespace, lease_name, interval)
        while True:
            try:
                sweep(api, namespace, lease_name, grace=grace_period)
            except (ApiException, OSError) as exc:
                log.warning("check failed (will retry): %s", exc)
            time.sleep(interval)
    except FuyaoError as exc:
        click.echo(f"fuyao-agent watchdog: error: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        return
