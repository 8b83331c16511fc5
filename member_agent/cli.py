"""``fuyao-agent``: the member agent's command line (the console script runs
``member_agent.launch:main``, which sets gRPC's runtime settings first, then ``main``).

Thin: parse flags, build the backend and the ``Agent``, run it until SIGTERM/SIGINT, and
turn errors into a message and an exit code (bad input 2, refused by the hub or other
errors 1, clean shutdown 0).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path

import click

from fuyao.errors import FuyaoError, InvalidInput
from fuyao.nodescheduler import Policy
from fuyao.spec import check_labels, check_name
from member_agent.backends.base import Backend
from member_agent.backends.kube.options import DEFAULT_TOLERATIONS, GANG_MODES, KubeOptions
from member_agent.connection import Agent, AgentConfig
from member_agent.simcli import member_backend, sim_member_command
from member_agent.state import default_state_dir

log = logging.getLogger("member_agent")


def build_backend(
    backend: str,
    *,
    fleet: str | None,
    time_scale: float,
    policy: Policy,
    kubeconfig: Path | None,
    kube: KubeOptions | None = None,
    context: str | None = None,
    state_dir: Path | None = None,
    cluster: str = "",
    member_log: Path | None = None,
    member_orphan_timeout: float = 0.0,
) -> Backend:
    """The chosen backend, its inputs validated (raises ``InvalidInput``)."""
    if backend == "sim":
        from fuyao.fleetfile import load_fleet
        from member_agent.backends.sim.backend import SimBackend

        if not fleet:
            raise InvalidInput("--backend sim needs --fleet FILE.yaml or FILE.csv[:START:COUNT]")
        if time_scale <= 0:
            raise InvalidInput(f"--time-scale {time_scale} must be positive")
        if state_dir is None:     # in-process member: its copies die with the agent
            return SimBackend(load_fleet(fleet), time_scale=time_scale, policy=policy)
        return member_backend(state_dir=state_dir, cluster=cluster, fleet=fleet,
                              time_scale=time_scale, policy=policy, member_log=member_log,
                              orphan_timeout=member_orphan_timeout)
    from member_agent.backends.kube import KubeBackend

    return KubeBackend.from_kubeconfig(kubeconfig, kube or KubeOptions(), context=context)


def _labels(pairs: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    labels: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise InvalidInput(f"--cluster-label {pair!r} must be KEY=VALUE")
        labels[key.strip()] = value.strip()
    try:
        check_labels(labels)
    except ValueError as exc:
        raise InvalidInput(f"--cluster-label: {exc}") from exc
    return tuple(sorted(labels.items()))


async def _run_until_signalled(agent: Agent) -> None:
    task = asyncio.create_task(agent.run(), name="agent")
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    log.info("agent stopped")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--hub", required=True,
              help="Hub agent endpoint HOST:PORT (gRPC, default :8849); several hub "
                   "replicas as HOST:PORT,HOST:PORT (the agent finds the leader).")
@click.option("--cluster", required=True, help="This member's cluster name, as joined.")
@click.option("--token-file", type=click.Path(path_type=Path), help="Join token to register with.")
@click.option("--backend", type=click.Choice(["sim", "kube"]), required=True)
@click.option("--fleet", help="sim: fleet YAML, or a trace node list FILE.csv[:START[:COUNT]].")
@click.option("--state-dir", type=click.Path(path_type=Path),
              help="Where the agent keeps its key and certificate (or credential), 0600.")
@click.option("--kubeconfig", type=click.Path(path_type=Path),
              help="kube: kubeconfig file ('-': read it from stdin).")
@click.option("--context", "kube_context", help="kube: the kubeconfig context to use.")
@click.option("--namespace", default="fuyao-tasks", show_default=True, help="kube: pod namespace.")
@click.option("--label-nodes/--no-label-nodes", default=True, show_default=True,
              help="kube: write the derived fuyao.io/* labels onto the nodes.")
@click.option("--finished-pod-ttl", type=float, default=600.0, show_default=True,
              help="kube: seconds finished pods are kept (for logs) before they are deleted.")
@click.option("--scheduler-name", default="", help="kube: schedulerName of task pods.")
@click.option("--gpu-toleration", "gpu_tolerations", multiple=True,
              help="kube: taint key GPU pods tolerate (repeatable; default: "
                   + ", ".join(DEFAULT_TOLERATIONS) + ").")
@click.option("--priority-classes/--no-priority-classes", default=True, show_default=True,
              help="kube: map task priority to PriorityClass fuyao-priority-N.")
@click.option("--gang", "gang_mode", type=click.Choice(GANG_MODES), default="agent",
              show_default=True, help="kube: who keeps a multi-replica task all-or-nothing.")
@click.option("--gang-timeout", type=float, default=120.0, show_default=True,
              help="kube, --gang agent: seconds for all replicas to bind before rollback.")
@click.option("--gpu-memory-resource", default="",
              help="kube: HAMi-style GPU memory resource (e.g. nvidia.com/gpumem).")
@click.option("--gpu-cores-resource", default="",
              help="kube: HAMi-style GPU cores resource (e.g. nvidia.com/gpucores).")
@click.option("--heartbeat-interval", type=float, default=2.0, show_default=True)
@click.option("--time-scale", type=float, default=1.0, show_default=True,
              help="sim: multiply task durations by this (0.01 = 100x faster).")
@click.option("--sim-policy", type=click.Choice([p.value for p in Policy]),
              default=Policy.BEST_FIT.value, show_default=True, help="sim: node scoring.")
@click.option("--lease-name", default="fuyao-agent", show_default=True,
              help="kube: the Lease (in --namespace) renewed while the hub session is live.")
@click.option("--member-log", type=click.Path(path_type=Path, dir_okay=False),
              help="sim: the member appends one JSON line per copy start/stop here.")
@click.option("--member-orphan-timeout", type=float, default=0.0, show_default=True,
              help="sim: the member process stops after this long without an agent (0: never).")
@click.option("--ca-cert", type=click.Path(path_type=Path),
              help="Hub CA cert: enables TLS, and a client certificate the agent enrolls for "
                   "(its key never leaves --state-dir).")
@click.option("--register", "register", metavar="HOST:PORT[,...]",
              help="The hub's registration listener(s), where the agent enrolls with its join "
                   "token (renewals go over --hub). Default: port 8850 on each "
                   "--hub host.")
@click.option("--cluster-label", "cluster_labels", multiple=True, help="KEY=VALUE sent in Hello.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]),
              default="info", show_default=True)
def command(
    hub: str,
    cluster: str,
    token_file: Path | None,
    backend: str,
    fleet: str | None,
    state_dir: Path | None,
    kubeconfig: Path | None,
    kube_context: str | None,
    namespace: str,
    label_nodes: bool,
    finished_pod_ttl: float,
    scheduler_name: str,
    gpu_tolerations: tuple[str, ...],
    priority_classes: bool,
    gang_mode: str,
    gang_timeout: float,
    gpu_memory_resource: str,
    gpu_cores_resource: str,
    heartbeat_interval: float,
    time_scale: float,
    sim_policy: str,
    lease_name: str,
    member_log: Path | None,
    member_orphan_timeout: float,
    ca_cert: Path | None,
    register: str | None,
    cluster_labels: tuple[str, ...],
    log_level: str,
) -> None:
    """Report this member cluster to a Fuyao hub and run the tasks it places here."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        try:
            check_name(cluster, "cluster name")
        except ValueError as exc:
            raise InvalidInput(str(exc)) from exc
        if heartbeat_interval <= 0:
            raise InvalidInput(f"--heartbeat-interval {heartbeat_interval} must be positive")
        state_dir = state_dir or default_state_dir(cluster, token_file)
        config = AgentConfig(
            hub=hub,
            cluster=cluster,
            state_dir=state_dir,
            token_file=token_file,
            heartbeat_interval=heartbeat_interval,
            ca_cert=ca_cert,
            register=register,
            cluster_labels=_labels(cluster_labels),
        )
        chosen = build_backend(
            backend,
            fleet=fleet,
            time_scale=time_scale,
            policy=Policy(sim_policy),
            kubeconfig=kubeconfig,
            context=kube_context,
            kube=KubeOptions(
                namespace=namespace, label_nodes=label_nodes, finished_pod_ttl=finished_pod_ttl,
                scheduler_name=scheduler_name,
                gpu_tolerations=gpu_tolerations or DEFAULT_TOLERATIONS,
                priority_classes=priority_classes, gang=gang_mode, gang_timeout=gang_timeout,
                gpu_memory_resource=gpu_memory_resource, gpu_cores_resource=gpu_cores_resource,
            ) if backend == "kube" else None,
            state_dir=state_dir,
            cluster=cluster,
            member_log=member_log,
            member_orphan_timeout=member_orphan_timeout,
        )
        lease = None
        if backend == "kube":
            from member_agent.backends.kube import KubeBackend
            from member_agent.kubelease import KubeLease

            assert isinstance(chosen, KubeBackend)
            lease = KubeLease(chosen.api_client, namespace, lease_name)
        asyncio.run(_run_until_signalled(Agent(config, chosen, lease)))
    except FuyaoError as exc:
        click.echo(f"fuyao-agent: error: {exc.message}", err=True)
        sys.exit(exc.exit_code)


def main() -> None:
    """Console-script entry point: ``fuyao-agent [sim-member] ...``."""
    if sys.argv[1:2] == ["sim-member"]:
        sim_member_command(sys.argv[2:])
    elif sys.argv[1:2] == ["watchdog"]:
        from member_agent.watchdog import watchdog_command

        watchdog_command(sys.argv[2:])
    else:
        command()


if __name__ == "__main__":
    main()
