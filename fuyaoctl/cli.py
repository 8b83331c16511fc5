"""``fuyaoctl``: the command line for the Fuyao hub (console script ``fuyaoctl.cli:main``).

Thin by design: each command parses its arguments, makes one or two SDK calls (``Client``)
and hands the answer to ``render.Renderer``. One handler, ``FuyaoGroup.invoke``, turns every
``FuyaoError`` into ``error: <message>`` on stderr and the error's exit code (InvalidInput 2,
others 1); click's own usage errors exit 2. ``-o`` is accepted before or after the command.
Tests hand an ``httpx.Client`` in through ``AppContext(http=...)`` (``CliRunner.invoke(obj=)``).
"""

from __future__ import annotations

import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from fuyao import __version__, kubeconfig
from fuyao.errors import FuyaoError
from fuyao.quantity import parse_duration
from fuyao.spec import DEFAULT_HEADROOM, TaskState
from fuyaoctl.client import TERMINAL_STATES
from fuyaoctl.commands import auth as auth_commands
from fuyaoctl.commands import capacity as capacity_commands
from fuyaoctl.commands import catalog as catalog_commands
from fuyaoctl.commands import cluster_token, explain, profile, simulate, taint
from fuyaoctl.commands import config as config_commands
from fuyaoctl.commands import queue as queue_commands
from fuyaoctl.config import Config
from fuyaoctl.context import AppContext, FuyaoGroup, names, output_option, pairs, seconds
from fuyaoctl.render import FORMATS
from fuyaoctl.render_capacity import n1_warning
from fuyaoctl.render_insight import InsightRenderer
from fuyaoctl.taskfile import read_task_file

WAIT_GOALS: dict[str, frozenset[TaskState]] = {
    "Running": frozenset({TaskState.RUNNING, TaskState.SUCCEEDED}),  # started, maybe done
    "Succeeded": frozenset({TaskState.SUCCEEDED}),
    "terminal": TERMINAL_STATES,
}


@click.group(cls=FuyaoGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--hub", metavar="URL", envvar="FUYAO_HUB",
              help="Hub REST address (env FUYAO_HUB; default http://127.0.0.1:8848).")
@click.option("--token", metavar="TOKEN", envvar="FUYAO_TOKEN",
              help="Bearer token for the hub (env FUYAO_TOKEN).")
@click.option("--context", "context_name", metavar="NAME", envvar="FUYAO_CONTEXT",
              help="Context of ~/.config/fuyao/config.yaml to use (default: current).")
@click.option("-o", "--output", type=click.Choice(FORMATS, case_sensitive=False),
              default="table", show_default=True, help="Output format.")
@click.version_option(__version__, prog_name="fuyaoctl")
@click.pass_context
def cli(ctx: click.Context, hub: str | None, token: str | None, context_name: str | None,
        output: str) -> None:
    """Submit tasks to the Fuyao hub and manage its member clusters.

    The hub and token come from --hub/--token, else FUYAO_HUB/FUYAO_TOKEN, else the
    current context of ~/.config/fuyao/config.yaml (fuyaoctl config use-context).
    """
    app = ctx.ensure_object(AppContext)
    app.hub = hub or app.hub
    app.token = token or app.token
    app.output = output.lower()
    if (app.hub is None or app.token is None) and app.http is None:
        try:
            chosen = Config.load().context(context_name)
            if chosen is not None:
                app.hub = app.hub or chosen.hub
                app.token = app.token or chosen.read_token()
        except FuyaoError as exc:
            raise click.UsageError(exc.message) from exc


# -- clusters --------------------------------------------------------------------------------


@cli.group()
@output_option
def cluster() -> None:
    """Member clusters: join, list, describe, cordon, remove."""


@cluster.command("join")
@click.argument("name")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", callback=pairs,
              help="Cluster label (region, site, provider, cost tier); repeatable.")
@click.option("--weight", type=int, default=1, show_default=True,
              help="Placement weight (0-1000); higher gets more tasks.")
@click.option("--headroom", type=float, default=DEFAULT_HEADROOM, show_default=True,
              help="Fraction of capacity kept free for failover.")
@click.option("--token-ttl", metavar="DURATION", callback=seconds,
              help="How long the join token stays valid, e.g. 30m, 24h, 7d (default 24h).")
@click.option("--server", metavar="URL", help="Push mode: the member's API server URL.")
@click.option("--token", metavar="TOKEN", help="Push mode: a bearer token for --server.")
@click.option("--certificate-authority", "ca_file", type=click.Path(path_type=Path),
              help="Push mode: the API server's CA certificate (PEM).")
@click.option("--kubeconfig", type=click.Path(path_type=Path),
              help="Push mode: a kubeconfig with the member's credentials.")
@click.option("--context", help="Push mode: the kubeconfig context (default: current).")
@output_option
@click.pass_obj
def cluster_join(app: AppContext, name: str, labels: dict[str, str], weight: int,
                 headroom: float, token_ttl: int | None, server: str | None,
                 token: str | None, ca_file: Path | None, kubeconfig: Path | None,
                 context: str | None) -> None:
    """Register cluster NAME and print its one-time join token and agent command.

    Push mode (--server/--token/--certificate-authority, or --kubeconfig [--context]): the
    hub checks the credentials can list nodes, stores them encrypted and runs the agent.
    """
    pushed = push_credentials(server, token, ca_file, kubeconfig, context, name)
    if pushed is not None:
        result = app.client().push_join_cluster(name, pushed, labels=labels, weight=weight,
                                                headroom=headroom)
        app.render().push_joined(result)
        return
    answer = app.client().join_cluster(
        name, labels=labels, weight=weight, headroom=headroom, token_ttl_seconds=token_ttl
    )
    app.render().joined(answer)


@cluster.command("list")
@output_option
@click.pass_obj
def cluster_list(app: AppContext) -> None:
    """List member clusters (and a warning when the fleet is not N-1 safe)."""
    views = app.client().list_clusters()
    app.render().clusters(views)
    if views and app.output == "table":
        warning = n1_warning(app.client().capacity_n_minus_one())
        if warning:
            click.echo(warning)


@cluster.command("describe")
@click.argument("name")
@output_option
@click.pass_obj
def cluster_describe(app: AppContext, name: str) -> None:
    """Show one cluster in detail."""
    app.render().cluster(app.client().get_cluster(name))


@cluster.command("cordon")
@click.argument("name")
@output_option
@click.pass_obj
def cluster_cordon(app: AppContext, name: str) -> None:
    """Stop new placements on NAME; running tasks stay."""
    app.render().cluster_changed(app.client().cordon(name), "cordoned")


@cluster.command("uncordon")
@click.argument("name")
@output_option
@click.pass_obj
def cluster_uncordon(app: AppContext, name: str) -> None:
    """Allow new placements on NAME again."""
    app.render().cluster_changed(app.client().uncordon(name), "uncordoned")


@cluster.command("remove")
@click.argument("name")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@output_option
@click.pass_obj
def cluster_remove(app: AppContext, name: str, yes: bool) -> None:
    """Remove NAME from the fleet; its tasks go back to the queue."""
    if not yes:
        click.confirm(f"Remove cluster {name}? Its tasks go back to the queue.", abort=True)
    app.render().cluster_removed(app.client().remove_cluster(name))


# -- tasks -----------------------------------------------------------------------------------


@cli.group()
@output_option
def task() -> None:
    """Tasks: submit, list, describe, cancel, wait."""


@task.command("submit")
@click.option("-f", "--file", "path", metavar="FILE",
              help="Task YAML: one task or a batch; '-' reads stdin.")
@click.option("--name", help="Task name (lowercase letters, digits, '-').")
@click.option("--image", help="Container image.")
@click.option("--command", help="Command as one shell-quoted string, e.g. 'python train.py'.")
@click.option("--cpu", help="CPU per replica: 4, 500m.")
@click.option("--memory", help="Memory per replica: 16Gi, 512Mi.")
@click.option("--gpu", metavar="N", help="GPUs per replica: 8, or a share like 0.5.")
@click.option("--gpu-model", metavar="MODEL", help="H100, A100|H100 or >=A100.")
@click.option("--gpu-memory", help="Minimum memory per GPU: 40Gi.")
@click.option("--gpu-mem", metavar="SIZE",
              help="GPU memory sharing: this much of one GPU's memory, e.g. 8Gi.")
@click.option("--selector", metavar="EXPR", help="Node selector: 'kubernetes.io/arch = arm64'.")
@click.option("--queue", help="Queue name (default: default).")
@click.option("--priority", type=int, help="Priority; higher is placed first.")
@click.option("--replicas", type=int, help="Number of replicas.")
@click.option("--duration", help="Run time on sim members: 30s, 5m.")
@click.option("--failover", type=click.Choice(["restart-elsewhere", "never"]),
              help="When its cluster is lost: re-place it (default) or leave it running.")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", callback=pairs,
              help="Task label; repeatable.")
@click.option("--profile", metavar="NAME", help="ComputeProfile to build the task from.")
@click.option("--gang", is_flag=True, default=None,
              help="All replicas in one cluster or none.")
@click.option("--spread", type=click.Choice(["aggregated", "weighted"]),
              help="gang off: divide replicas across clusters: aggregated (fewest "
                   "clusters, default) or weighted.")
@click.option("--spread-weight", "spread_weights", multiple=True, metavar="CLUSTER=W",
              callback=pairs, help="--spread weighted: a cluster's static weight; repeatable.")
@click.option("--spread-dynamic", is_flag=True, default=None,
              help="--spread weighted by how many replicas each cluster can take now.")
@click.option("--min-replicas", type=int,
              help="Run once this many replicas are placed and running (gang off).")
@click.option("--after", multiple=True, metavar="TASK", callback=names,
              help="Start only once TASK succeeded; repeatable or comma-separated.")
@click.option("--image-platform", "image_platforms", multiple=True, metavar="OS/ARCH",
              callback=names, help="Platform the image runs on (linux/amd64); repeatable.")
@click.option("--dry-run", is_flag=True,
              help="Print where it would go (cluster, nodes, scores) and why; store nothing.")
@click.option("--preemptible/--not-preemptible", default=None,
              help="May it be evicted for higher-priority work? (default: yes)")
@output_option
@click.pass_obj
def task_submit(app: AppContext, /, path: str | None, dry_run: bool, **flags: Any) -> None:
    """Submit a task from a YAML file (-f) or from flags."""
    given = {key: value for key, value in flags.items() if value not in (None, {}, "", [])}
    if path is not None and given:
        raise click.UsageError("use either -f FILE or task flags, not both")
    if path is not None:
        tasks = read_task_file(path)
        client = app.client()
        if dry_run:
            for spec in tasks.specs:
                InsightRenderer(app.output).dry_run(client.dry_run(spec))
            return
        if tasks.batch or len(tasks.specs) > 1:
            app.render().submitted(client.submit_tasks(tasks.specs), batch=True)
        else:
            app.render().submitted([client.submit_task(tasks.specs[0])], batch=False)
        return
    if "name" not in given:
        raise click.UsageError("give -f FILE, or at least --name (and --image, --gpu, ...)")
    if "command" in given:
        try:
            given["command"] = shlex.split(given["command"])
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--command") from exc
    if dry_run:
        InsightRenderer(app.output).dry_run(app.client().dry_run(given))
        return
    view = app.client().submit_task(given)
    app.render().submitted([view], batch=False)


@task.command("list")
@click.option("--state", type=click.Choice([s.value for s in TaskState], case_sensitive=False),
              help="Only tasks in this state.")
@click.option("--cluster", metavar="NAME", help="Only tasks placed on this cluster.")
@click.option("--limit", type=click.IntRange(1, 1000), default=None,
              help="One page of at most this many tasks (the next page's token goes to "
                   "stderr); default: every task.")
@click.option("--continue", "continue_", metavar="TOKEN",
              help="Continue a paged list from the token a previous page printed.")
@output_option
@click.pass_obj
def task_list(app: AppContext, state: str | None, cluster: str | None, limit: int | None,
              continue_: str | None) -> None:
    """List tasks."""
    client = app.client()
    if limit is None:
        app.render().tasks(client.list_tasks(state=state, cluster=cluster, continue_=continue_))
        return
    views, token = client.list_tasks_page(state=state, cluster=cluster, limit=limit,
                                          continue_=continue_)
    app.render().tasks(views)
    if token:
        click.echo(f"more tasks: fuyaoctl task list --limit {limit} --continue {token}",
                   err=True)


@task.command("describe")
@click.argument("name")
@output_option
@click.pass_obj
def task_describe(app: AppContext, name: str) -> None:
    """Show a task: spec, state, events, placement scores and why it is not placed."""
    app.render().task(app.client().get_task(name))


@task.command("cancel")
@click.argument("name")
@output_option
@click.pass_obj
def task_cancel(app: AppContext, name: str) -> None:
    """Cancel a task wherever it is."""
    app.render().task_changed(app.client().cancel_task(name))


@task.command("delete")
@click.argument("name")
@output_option
@click.pass_obj
def task_delete(app: AppContext, name: str) -> None:
    """Delete a task that has ended; its name can be used again (the audit log keeps it)."""
    app.render().done(app.client().delete_task(name), f"task {name} deleted")


@task.command("wait")
@click.argument("name")
@click.option("--for", "goal", type=click.Choice(list(WAIT_GOALS), case_sensitive=False),
              default="terminal", show_default=True,
              help="Running (started), Succeeded, or terminal (Succeeded, Failed, Cancelled).")
@click.option("--timeout", type=click.FloatRange(min=0), default=60.0, show_default=True,
              help="Seconds to wait before giving up (exit 1).")
@click.option("--interval", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="Seconds between polls.")
@output_option
@click.pass_obj
def task_wait(app: AppContext, name: str, goal: str, timeout: float, interval: float) -> None:
    """Wait until a task reaches a state; exit 1 if it never can or time runs out."""
    view = app.client().wait_for_task(
        name, WAIT_GOALS[goal], timeout=timeout, interval=interval
    )
    app.render().task_changed(view)


# -- fleet -----------------------------------------------------------------------------------


def _since(_: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--since``: a duration back from now (1h, 2d) or an ISO time."""
    if value is None:
        return None
    try:
        return (datetime.now(UTC) - timedelta(seconds=parse_duration(value))).isoformat()
    except FuyaoError:
        pass
    try:
        return datetime.fromisoformat(value).isoformat()
    except ValueError:
        raise click.BadParameter(f"{value!r} is neither a duration (1h, 2d) nor an ISO time",
                                 param=param) from None


@cli.command("audit")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True,
              help="How many entries, newest first.")
@click.option("--since", callback=_since, metavar="WHEN",
              help="Only entries since a duration ago (1h, 2d) or an ISO time.")
@click.option("--actor", metavar="NAME", help="Only this actor (token name, system, "
                                              "agent:<cluster>).")
@click.option("--action", metavar="ACTION", help="Only this action (task.cancel) or prefix "
                                                 "ending in '.' (task.).")
@click.option("--target", metavar="NAME", help="Only this target.")
@output_option
@click.pass_obj
def audit(app: AppContext, limit: int, since: str | None, actor: str | None,
          action: str | None, target: str | None) -> None:
    """Who changed what, when, from where: joins, cordons, removals, submits, cancels,
    deletions, tokens, registrations, the hub's own failovers, and refusals."""
    app.render().audit(app.client().audit_log(limit, since=since, actor=actor, action=action,
                                              target=target))


# -- command groups from fuyaoctl.commands (one line each, alphabetical) --------------------
from fuyaoctl.commands import hub as _hub  # noqa: E402
from fuyaoctl.commands import watch as _watch  # noqa: E402

cli.add_command(_hub.hub)
task.add_command(_watch.task_watch)
cluster.add_command(_watch.cluster_watch)

task.add_command(explain.task_explain)
cluster.add_command(taint.cluster_taint)
cli.add_command(catalog_commands.catalog)
cli.add_command(profile.profile)
cli.add_command(queue_commands.queue)
cli.add_command(simulate.simulate)

cli.add_command(capacity_commands.capacity)
cli.add_command(auth_commands.auth)
cluster.add_command(cluster_token.token)
cli.add_command(config_commands.config)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="fuyaoctl")


if __name__ == "__main__":
    main()


def push_credentials(server: str | None, token: str | None, ca_file: Path | None,
                     kubeconfig_file: Path | None, context: str | None, name: str) -> str | None:
    """The kubeconfig text a push join sends, or None for a pull join (``UsageError`` on a
    mix of flags that cannot go together)."""
    if kubeconfig_file is not None:
        if server or token or ca_file:
            raise click.UsageError("--kubeconfig cannot go with --server/--token/"
                                   "--certificate-authority")
        try:
            text = kubeconfig_file.read_text()
        except OSError as exc:
            raise click.UsageError(f"--kubeconfig {kubeconfig_file}: {exc.strerror}") from exc
        return kubeconfig.dumps(kubeconfig.flatten(text, kubeconfig_file.parent, context))
    if context:
        raise click.UsageError("--context needs --kubeconfig")
    if server is None:
        if token or ca_file:
            raise click.UsageError("--token and --certificate-authority need --server")
        return None
    if not token:
        raise click.UsageError("--server needs --token (and --certificate-authority)")
    ca = b""
    if ca_file is not None:
        try:
            ca = ca_file.read_bytes()
        except OSError as exc:
            raise click.UsageError(f"--certificate-authority {ca_file}: {exc.strerror}") from exc
    return kubeconfig.dumps(kubeconfig.build(name, server, token, ca))
