"""``fuyaoctl task watch [NAME]`` and ``fuyaoctl cluster watch [NAME]``: follow events live.

Registered in ``fuyaoctl.cli`` (added to the ``task`` and ``cluster`` groups). Both
long-poll ``GET /api/v1/events`` through ``Client.watch``, which resumes after the last
event seen when the hub is lost or fails over. ``task watch NAME`` first prints the task's
history, then follows it and exits when the task ends (0), or when ``--timeout`` passes
first (1); an ended task prints its history and exits at once. Without NAME, and for
``cluster watch``, it follows until Ctrl-C or ``--timeout`` (0). ``--since ID`` resumes
after an event id instead of printing history.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import click

from fuyao.errors import Transient
from fuyaoctl.context import AppContext, output_option, seconds

TERMINAL_KINDS = frozenset({"Succeeded", "Failed", "Cancelled"})
_Key = tuple[datetime, str, int]


def _key(event: dict[str, Any]) -> _Key:
    return (datetime.fromisoformat(event["at"]), event["kind"], int(event.get("generation", 0)))


def _history(app: AppContext, name: str) -> tuple[str, set[_Key], bool]:
    """Print the task's timeline; returns the cursor to follow from, what was printed, and
    whether the task already ended. The cursor is taken first, so nothing falls between."""
    client = app.client()
    cursor = client.events(type="task", name=name, timeout=0)["next"]
    view = client.get_task(name)
    printed: set[_Key] = set()
    for e in view.events:
        event = {"id": None, "type": "task", "name": name, "kind": e.kind,
                 "message": e.message, "at": e.at.isoformat(), "cluster": e.cluster,
                 "generation": e.generation}
        app.render().event(event)
        printed.add(_key(event))
    return cursor, printed, view.state.terminal


@click.command("watch")
@click.argument("name", required=False)
@click.option("--since", metavar="ID", help="Resume after this event id (no history).")
@click.option("--timeout", metavar="DURATION", callback=seconds,
              help="Stop after this long (e.g. 10m). With NAME, reaching it exits 1.")
@output_option
@click.pass_obj
def task_watch(app: AppContext, name: str | None, since: str | None,
               timeout: int | None) -> None:
    """Follow task events live; with NAME, until that task ends."""
    until = None if timeout is None else time.monotonic() + timeout
    printed: set[_Key] = set()
    if name is not None and since is None:
        since, printed, ended = _history(app, name)
        if ended:
            return
    for event in app.client().watch(type="task", name=name, since=since, until=until):
        if _key(event) in printed:
            continue
        app.render().event(event)
        if name is not None and event["kind"] in TERMINAL_KINDS:
            return
    if name is not None:
        state = app.client().get_task(name).state
        raise Transient(f"timed out after {timeout}s watching task {name}; it is {state}")


@click.command("watch")
@click.argument("name", required=False)
@click.option("--since", metavar="ID", help="Resume after this event id.")
@click.option("--timeout", metavar="DURATION", callback=seconds, help="Stop after this long.")
@output_option
@click.pass_obj
def cluster_watch(app: AppContext, name: str | None, since: str | None,
                  timeout: int | None) -> None:
    """Follow cluster events live (state changes, cordons, joins, removals)."""
    until = None if timeout is None else time.monotonic() + timeout
    for event in app.client().watch(type="cluster", name=name, since=since, until=until):
        app.render().event(event)

