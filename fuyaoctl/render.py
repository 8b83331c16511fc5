"""All of fuyaoctl's presentation: rich tables for people, JSON and YAML for scripts.

Called only by ``cli.py``, one method per kind of answer. JSON and YAML print exactly the
models' ``model_dump(mode="json")`` (a list for list commands). Tables are plain columns with
no borders, no colour when stdout is not a terminal and wide enough never to wrap in a pipe;
every cell is literal text (a hub message is never read as rich markup).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import click
import yaml
from pydantic import BaseModel
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from fuyao.identity import JoinTokenView, TokenCreated, TokenView, WhoAmI
from fuyao.pushjoin import PushJoinResponse
from fuyao.queues import QueueView
from fuyao.spec import (
    AuditEntry,
    CapacityRow,
    ClusterView,
    JoinResponse,
    TaskState,
    TaskView,
)

FORMATS: Final = ("table", "json", "yaml")
PIPE_WIDTH: Final = 10_000   # in a pipe, lines are as long as their cells: never wrapped
NONE: Final = "-"
_TRAILING_BLANKS: Final = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$")  # padding after the last cell


def error(message: str) -> None:
    """The one way an error reaches the user: ``error: <message>`` on stderr."""
    click.echo(f"error: {message}", err=True)


class Renderer:
    """Prints hub answers in one output format (``table``, ``json`` or ``yaml``)."""

    def __init__(self, output: str = "table") -> None:
        if output not in FORMATS:
            raise ValueError(f"output format {output!r} is not one of {FORMATS}")
        self.output = output

    # -- clusters ----------------------------------------------------------------------------

    def joined(self, answer: JoinResponse) -> None:
        """``cluster join``: the one-time token and the agent command."""
        if self._dumped(answer):
            return
        lines = [
            f"Cluster {answer.cluster} is registered and waits for its agent.",
            f"The join token below is shown only once; it expires {_when(answer.expires_at)}.",
            "", f"Token: {answer.token}", "",
        ]
        token_file = _flag_value(answer.agent_command, "--token-file")
        if token_file:
            lines += ["Save it where the agent will read it:", "",
                      f"  (umask 077; echo {answer.token} > {token_file})", ""]
        ca_file = _flag_value(answer.agent_command, "--ca-cert")
        if answer.ca_cert and ca_file:
            lines += ["Save the hub's CA certificate (the agent verifies the hub with it):", "",
                      f"  cat > {ca_file} <<'EOF'", answer.ca_cert.strip(), "EOF", ""]
        lines += ["Run this where the agent can reach the hub (in or next to the member "
                  "cluster):", "", f"  {answer.agent_command}", ""]
        lines += helm_install(answer.cluster, _flag_value(answer.agent_command, "--hub"),
                              token_file, ca_file if answer.ca_cert else None)
        self._print("\n".join(lines))

    def push_joined(self, answer: PushJoinResponse) -> None:
        """``cluster join --server/--kubeconfig``: the hub runs this member's agent."""
        if self._dumped(answer):
            return
        self._print(f"Cluster {answer.cluster} is joined in push mode: the hub listed "
                    f"{answer.nodes} node(s) at {answer.server} with the credentials, stored "
                    "them encrypted and runs its agent. `fuyaoctl cluster remove "
                    f"{answer.cluster}` stops it and deletes the credentials.")

    def clusters(self, views: Sequence[ClusterView]) -> None:
        """``cluster list``."""
        if self._dumped(views):
            return
        table = _table("NAME", "STATE", "MODE", "WEIGHT", "HEADROOM", "NODES", "GPUS", "TASKS",
                       "HEARTBEAT", "LABELS")
        for view in views:
            table.add_row(*_cells(
                view.name, view.state, view.mode, view.weight, f"{view.headroom:.0%}", view.nodes,
                _gpus(view.gpus, view.gpus_unschedulable), view.tasks,
                _ago(view.last_heartbeat), _pairs(view.labels),
            ))
        self._print(table if views else "No clusters. Add one with: fuyaoctl cluster join NAME")

    def cluster(self, view: ClusterView) -> None:
        """``cluster describe``."""
        if self._dumped(view):
            return
        self._print(_fields({
            "Name": view.name,
            "State": view.state,
            "Mode": view.mode,
            "Cordoned": "yes" if view.cordoned else "no",
            "Weight": view.weight,
            "Headroom": f"{view.headroom:.0%} kept free for failover",
            "Labels": _pairs(view.labels),
            "Backend": view.backend,
            "Nodes": view.nodes,
            "GPUs": _gpus(view.gpus, view.gpus_unschedulable),
            "Tasks": f"{view.tasks} placed or running",
            "Last heartbeat": _when(view.last_heartbeat),
            "Joined": _when(view.joined_at),
        }))

    def cluster_changed(self, view: ClusterView, verb: str) -> None:
        """``cluster cordon`` / ``uncordon``."""
        if not self._dumped(view):
            self._print(f"cluster {view.name} {verb} (state {view.state})")

    def cluster_removed(self, answer: Mapping[str, Any]) -> None:
        """``cluster remove``: how many tasks went back to the queue."""
        if not self._dumped(dict(answer)):
            count = answer.get("requeued", 0)
            self._print(f"cluster {answer.get('removed')} removed; "
                        f"{count} task{'' if count == 1 else 's'} sent back to the queue")

    # -- tasks -------------------------------------------------------------------------------

    def submitted(self, views: Sequence[TaskView], batch: bool) -> None:
        """``task submit``: one object for one task, an array for a batch."""
        if self._dumped(list(views) if batch else views[0]):
            return
        if not batch:
            self._print(f"task {views[0].name} submitted ({views[0].state})")
            return
        table = _table("NAME", "STATE", "QUEUE")
        for view in views:
            table.add_row(*_cells(view.name, view.state, view.queue))
        self._print(f"{len(views)} tasks submitted:", table)

    def tasks(self, views: Sequence[TaskView]) -> None:
        """``task list``."""
        if self._dumped(views):
            return
        table = _table("NAME", "STATE", "CLUSTER", "NODE", "GPU", "REPLICAS", "QUEUE", "AGE",
                       "MESSAGE")
        table.columns[-1].max_width = 80
        for view in views:
            table.add_row(*_cells(
                view.name, view.state, view.cluster, view.node, _gpu_request(view),
                view.spec.replicas, _queue_cell(view), _ago(view.created_at, suffix=""),
                view.message,
            ))
        self._print(table if views else "No tasks.")

    def task(self, view: TaskView) -> None:
        """``task describe``: spec, state, placement scores, rejection reasons, events."""
        if self._dumped(view):
            return
        spec = view.spec
        requests = f"cpu {spec.cpu}, memory {spec.memory}, gpu {_gpu_request(view) or 0}"
        if spec.gpu_memory is not None:
            requests += f" with {spec.gpu_memory} each"
        parts: list[Any] = [_fields({
            "Name": view.name, "ID": view.id, "State": view.state, "Message": view.message,
            "Cluster": view.cluster, "Node": view.node, "Generation": view.generation,
            "Queue": _queue_cell(view), "Held by": view.held_by, "Priority": view.priority,
            "Created": _when(view.created_at), "Updated": _when(view.updated_at),
            "Image": spec.image, "Command": " ".join(spec.command),
            "Requests": f"{requests} (per replica) x {spec.replicas}",
            "Selector": spec.effective_selector(), "Duration": spec.duration,
            "Labels": _pairs(spec.labels),
            "Failover": _failover(view),
        })]
        if view.parent:
            parts += ["", f"Part of {view.parent} (one cluster's share of its replicas)"]
        if view.parts:
            parts += ["", "Parts (one workload per cluster):", _indent(_parts(view))]
        if view.state is TaskState.QUEUED:
            parts += ["", "Why not placed:", _indent(_reasons(view.reasons))]
        if view.scores:
            parts += ["", "Placement scores (last cycle):", _indent(_scores(view))]
        parts += ["", "Events:", _indent(_events(view) if view.events else "(none)")]
        self._print(*parts)

    def task_changed(self, view: TaskView) -> None:
        """``task cancel`` / ``task wait``: the task's state now."""
        if self._dumped(view):
            return
        where = f" on {view.cluster}" if view.cluster else ""
        where += f" (node {view.node})" if view.node else ""
        message = f": {view.message}" if view.message else ""
        self._print(f"task {view.name} is {view.state}{where}{message}")

    # -- queues ------------------------------------------------------------------------------

    def queues(self, views: Sequence[QueueView]) -> None:
        """``queue list``."""
        if self._dumped(views):
            return
        table = _table("NAME", "PRIORITY", "WEIGHT", "QUOTAS", "BORROW", "IN USE", "SHARE",
                       "FAIR", "QUEUED", "ADMITTED")
        for v in views:
            table.add_row(*_cells(
                v.name, v.priority, v.weight, _pairs(v.quotas), _pairs(v.borrow),
                _pairs(v.usage), f"{v.dominant_share:.0%}", f"{v.fair_share:.0%}", v.queued,
                v.admitted,
            ))
        self._print(table)

    def queue(self, v: QueueView) -> None:
        """``queue describe`` / ``create`` / ``update``: use against quota, shares."""
        if self._dumped(v):
            return
        table = _table("RESOURCE", "QUOTA", "BORROW", "IN USE")
        for resource in sorted({*v.quotas, *v.borrow, *v.usage}):
            table.add_row(*_cells(resource, v.quotas.get(resource, "unlimited"),
                                  v.borrow.get(resource), v.usage.get(resource, "0")))
        parts: list[Any] = [_fields({
            "Name": v.name, "Priority level": v.priority, "Weight": v.weight,
            "Dominant share": f"{v.dominant_share:.1%} of the fleet",
            "Fair share": f"{v.fair_share:.1%} of its level",
            "Tasks": f"{v.queued} queued, {v.admitted} placed or running",
        }), "", "Resources:", _indent(table)]
        for cluster, quotas in sorted(v.cluster_quotas.items()):
            used = v.cluster_usage.get(cluster, {})
            parts.append(f"  on {cluster}: " + ", ".join(
                f"{r} {used.get(r, '0')}/{q}" for r, q in sorted(quotas.items())))
        self._print(*parts)

    def queue_deleted(self, answer: Mapping[str, Any]) -> None:
        """``queue delete``."""
        if not self._dumped(dict(answer)):
            self._print(f"queue {answer.get('deleted')} deleted")

    # -- fleet -------------------------------------------------------------------------------

    def capacity(self, rows: Sequence[CapacityRow]) -> None:
        """``capacity``: per cluster and model, devices / CPU / memory total-alloc-rsvd-free."""
        if self._dumped(rows):
            return
        if not rows:
            self._print("No capacity reported yet (no cluster has an agent connected).")
            return
        table = _table("CLUSTER", "MODEL", "NODES", "DEV", "DEV-ALLOC", "DEV-RSVD", "DEV-FREE",
                       "DEV-UNSCHED", "CPU", "CPU-ALLOC", "CPU-RSVD", "CPU-FREE",
                       "MEM-GIB", "MEM-ALLOC", "MEM-RSVD", "MEM-FREE", "GPU-MEM-GIB",
                       "GPU-MEM-ALLOC", "GPU-MEM-FREE")
        for row in rows:
            table.add_row(*_cells(
                row.cluster, row.model, row.nodes,
                *map(_num, (row.devices_total, row.devices_allocated, row.devices_reserved,
                            row.devices_free, row.devices_unschedulable, row.cpu_total,
                            row.cpu_allocated, row.cpu_reserved, row.cpu_free, row.memory_total_gib,
                            row.memory_allocated_gib, row.memory_reserved_gib,
                            row.memory_free_gib, row.gpu_memory_total_gib,
                            row.gpu_memory_allocated_gib, row.gpu_memory_free_gib)),
            ))
        self._print(table, "RSVD is the headroom kept free for failover; "
                           "FREE = total - allocated - reserved; UNSCHED: idle on cordoned or "
                           "NotReady nodes, never free. CPU in cores, memory in GiB.")

    def audit(self, entries: Sequence[AuditEntry]) -> None:
        """``audit``: newest first."""
        if self._dumped(entries):
            return
        table = _table("TIME", "ACTOR", "ROLE", "SOURCE", "ACTION", "TARGET", "RESULT")
        for e in entries:
            table.add_row(*_cells(f"{e.at:%m-%d %H:%M:%S}", e.actor, e.role, e.source,
                                  e.action, e.target, e.result))
        self._print(table)

    def event(self, event: Mapping[str, Any]) -> None:
        """``task watch`` / ``cluster watch``: one event, one line (JSON Lines with -o json)."""
        if self.output == "json":
            click.echo(json.dumps(dict(event)))
            return
        if self.output == "yaml":
            click.echo("---\n" + yaml.safe_dump(dict(event), sort_keys=False), nl=False)
            return
        at = _clock(datetime.fromisoformat(event["at"])) if event.get("at") else NONE
        where = f" [{event['cluster']} gen {event['generation']}]" if event.get("cluster") else ""
        ident = f"  #{event['id']}" if event.get("id") else ""
        click.echo(f"{at}  {event['type']}/{event['name']}  {event['kind']}  "
                   f"{event['message']}{where}{ident}")

    def hub_status(self, status: Mapping[str, Any]) -> None:
        """``hub status``: the leader, its epoch, and every replica."""
        if self._dumped(dict(status)):
            return
        table = _table("ADDRESS", "ROLE", "AGENTS", "EPOCH", "LAST-SEEN", "ID")
        for r in status.get("replicas", []):
            seen = _ago(datetime.fromisoformat(r["last_seen"])) if r.get("last_seen") else None
            table.add_row(*_cells(r["address"], r["role"], r["agent_address"], r["epoch"],
                                  seen, r["id"]))
        leader = status.get("leader") or "none (no live leader: a standby takes over soon)"
        self._print(_fields({"Leader": leader, "Epoch": status.get("epoch")}), table)

    # -- identities --------------------------------------------------------------------------

    def token_created(self, answer: TokenCreated) -> None:
        """``auth token create``: the secret, once."""
        if self._dumped(answer):
            return
        scope = f" for queues {', '.join(answer.queues)}" if answer.queues else ""
        expiry = f"; it expires {_when(answer.expires_at)}" if answer.expires_at else ""
        self._print(f"Token {answer.name} (role {answer.role.value}{scope}) is shown only "
                    f"once{expiry}:\n\n  {answer.token}\n\nUse it with FUYAO_TOKEN=... or "
                    "fuyaoctl config set-context.")

    def tokens(self, views: Sequence[TokenView]) -> None:
        """``auth token list``."""
        if self._dumped(views):
            return
        table = _table("NAME", "ROLE", "QUEUES", "STATE", "CREATED", "EXPIRES", "LAST USED")
        for v in views:
            table.add_row(*_cells(v.name, v.role.value, ",".join(v.queues), v.state,
                                  _ago(v.created_at), _when(v.expires_at),
                                  _ago(v.last_used_at)))
        self._print(table)

    def token_revoked(self, view: TokenView) -> None:
        """``auth token revoke``."""
        if not self._dumped(view):
            self._print(f"token {view.name} revoked")

    def whoami(self, who: WhoAmI) -> None:
        """``auth whoami``."""
        if self._dumped(who):
            return
        scope = f", queues {', '.join(who.queues)}" if who.queues else ""
        open_hub = " (authentication is OFF on this hub)" if who.auth == "none" else ""
        self._print(f"{who.name}: role {who.role.value}{scope}{open_hub}")

    def join_tokens(self, views: Sequence[JoinTokenView]) -> None:
        """``cluster token list``."""
        if self._dumped(views):
            return
        table = _table("ID", "CLUSTER", "STATE", "CREATED", "EXPIRES", "USED")
        for v in views:
            table.add_row(*_cells(v.id, v.cluster, v.state, _ago(v.created_at),
                                  _when(v.expires_at), _ago(v.used_at)))
        self._print(table)

    def done(self, answer: Mapping[str, Any], message: str) -> None:
        """A small ``{...}`` answer: as data, or one line of text."""
        if not self._dumped(dict(answer)):
            self._print(message)

    # -- plumbing ----------------------------------------------------------------------------

    def _dumped(self, data: BaseModel | Sequence[BaseModel] | dict[str, Any]) -> bool:
        """Print ``data`` as JSON / YAML and return True; False in table mode."""
        if self.output == "table":
            return False
        plain = _plain(data)
        if self.output == "json":
            click.echo(json.dumps(plain, indent=2))
        else:
            click.echo(yaml.safe_dump(plain, sort_keys=False, allow_unicode=True), nl=False)
        return True

    @staticmethod
    def _print(*renderables: Any) -> None:
        console = Console(highlight=False, markup=False, emoji=False)
        if not console.is_terminal:
            console = Console(highlight=False, markup=False, emoji=False,
                              width=max(console.width, PIPE_WIDTH))
        with console.capture() as captured:
            console.print(*renderables, sep="\n")
        lines = (_TRAILING_BLANKS.sub(r"\1", line) for line in captured.get().splitlines())
        click.echo("\n".join(lines), color=console.is_terminal)


def _plain(data: Any) -> Any:
    if isinstance(data, BaseModel):
        return data.model_dump(mode="json")
    if isinstance(data, list | tuple):
        return [_plain(item) for item in data]
    return data


def _indent(renderable: Any) -> Padding:
    return Padding(renderable, (0, 0, 0, 2))


def _table(*headers: str) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for header in headers:
        table.add_column(header, overflow="fold")
    return table


def _cells(*values: Any) -> list[Text]:
    return [Text(NONE if value is None or value == "" else str(value)) for value in values]


def _fields(rows: Mapping[str, Any]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    for key, value in rows.items():
        grid.add_row(*_cells(f"{key}:", value))
    return grid


def _reasons(reasons: Mapping[str, str]) -> Table | str:
    if not reasons:
        return "(no placement attempt yet)"
    table = _table("CLUSTER", "REASON")
    for cluster, reason in sorted(reasons.items()):
        table.add_row(*_cells(cluster, reason))
    return table


def _scores(view: TaskView) -> Table:
    table = _table("CLUSTER", "FEASIBLE", "SCORE", "PLUGINS", "REASON")
    ranked = sorted(view.scores, key=lambda s: (not s.feasible, -(s.score or 0), s.cluster))
    for score in ranked:
        plugins = " ".join(f"{name}={_num(value)}" for name, value in score.plugin_scores.items())
        table.add_row(*_cells(score.cluster, "yes" if score.feasible else "no",
                              None if score.score is None else _num(score.score), plugins,
                              score.reason))
    return table


def _parts(view: TaskView) -> Table:
    table = _table("Part", "Cluster", "Replicas", "State", "Generation")
    for p in view.parts:
        table.add_row(*_cells(p.name, p.cluster, p.replicas, p.state, p.generation))
    return table


def _events(view: TaskView) -> Table:
    table = _table("TIME", "KIND", "CLUSTER", "GEN", "MESSAGE")
    for event in view.events:
        table.add_row(*_cells(_clock(event.at), event.kind, event.cluster, event.generation,
                              event.message))
    return table


def _flag_value(command: str, flag: str) -> str | None:
    """The value of ``flag`` (``--flag F`` or ``--flag=F``) in a shell command, if any."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for index, word in enumerate(words):
        if word.startswith(f"{flag}="):
            return word.partition("=")[2]
        if word == flag and index + 1 < len(words):
            return words[index + 1]
    return None


def _gpu_request(view: TaskView) -> str:
    gpu, model = view.spec.gpu, view.spec.gpu_model
    if gpu in (0, "0", 0.0):
        return ""
    return f"{gpu} {model}" if model else str(gpu)


def _queue_cell(view: TaskView) -> str:
    """``team-a`` or, when queued, ``team-a #3`` (its position in the queue)."""
    if view.queue_position is None:
        return view.queue
    return f"{view.queue} #{view.queue_position}"


def helm_install(cluster: str, hub: str | None, token_file: str | None,
                 ca_file: str | None) -> list[str]:
    """The pull-mode alternative: install ``charts/fuyao-agent`` in the member with Helm."""
    secret = [f"--from-file=token={token_file or cluster + '.token'}"]
    if ca_file:
        secret.append(f"--from-file=ca.crt={ca_file}")
    return [
        "Or install the agent inside the member cluster with Helm (pull mode):", "",
        "  kubectl create namespace fuyao-system",
        "  kubectl -n fuyao-system create secret generic fuyao-join " + " ".join(secret),
        f"  helm install fuyao-agent charts/fuyao-agent -n fuyao-system --set cluster={cluster}"
        f" --set hub={hub or 'HUB_HOST:8849'}" + ("" if ca_file else " --set tls=false"),
    ]


def _gpus(per_model: Mapping[str, int], off: Mapping[str, int] | None = None) -> str:
    """``24xA100 (8 unschedulable)``: totals, and those on cordoned or NotReady nodes."""
    off = off or {}
    return ", ".join(
        f"{count}x{model}" + (f" ({off[model]} unschedulable)" if off.get(model) else "")
        for model, count in sorted(per_model.items()))


def _pairs(labels: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def _num(value: float) -> str:
    if abs(value - round(value)) < 1e-9:
        return str(round(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _ago(moment: datetime | None, suffix: str = " ago") -> str | None:
    if moment is None:
        return None
    return _duration((datetime.now(UTC) - _utc(moment)).total_seconds()) + suffix


def _when(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    stamp = _utc(moment).strftime("%Y-%m-%d %H:%M:%S UTC")
    ahead = (_utc(moment) - datetime.now(UTC)).total_seconds()
    return f"{stamp} (in {_duration(ahead)})" if ahead > 0 else f"{stamp} ({_ago(moment)})"


def _duration(seconds: float) -> str:
    whole = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def _clock(moment: datetime) -> str:
    return _utc(moment).strftime("%m-%d %H:%M:%S")



def _failover(view: TaskView) -> str:
    """The task's failover policy and the hub's eviction rate limit."""
    if view.spec.failover == "never":
        return "never (keeps running through a partition; never re-placed automatically)"
    rate = f", at most {view.eviction_rate:g} tasks/s per lost cluster" \
        if view.eviction_rate else ""
    return f"restart-elsewhere (re-placed once its cluster's lease expired{rate})"
