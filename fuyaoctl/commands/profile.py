"""``fuyaoctl profile apply -f FILE | list | describe NAME | delete NAME``: ComputeProfiles."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import yaml

from fuyao.computeprofile import ComputeProfile, ProfileView, parse_profile
from fuyao.errors import InvalidInput
from fuyaoctl.context import AppContext, output_option
from fuyaoctl.render import Renderer, _cells, _fields, _table


@click.group("profile")
@output_option
def profile() -> None:
    """ComputeProfiles: named, versioned task templates with a node selector."""


@profile.command("apply")
@click.option("-f", "--file", "path", required=True, metavar="FILE",
              help="Profile YAML ('-' reads stdin).")
@output_option
@click.pass_obj
def profile_apply(app: AppContext, path: str) -> None:
    """Create or update the profile in FILE (checked before it is sent)."""
    view = app.client().apply_profile(read_profile(path))
    r = ProfileRenderer(app.output)
    if not r._dumped(view):
        click.echo(f"profile {view.name} applied (version {view.version})")


@profile.command("list")
@output_option
@click.pass_obj
def profile_list(app: AppContext) -> None:
    """List profiles."""
    ProfileRenderer(app.output).profiles(app.client().list_profiles())


@profile.command("describe")
@click.argument("name")
@output_option
@click.pass_obj
def profile_describe(app: AppContext, name: str) -> None:
    """Show a profile: template, selector, version and the queued tasks using it."""
    ProfileRenderer(app.output).profile(app.client().get_profile(name))


@profile.command("delete")
@click.argument("name")
@output_option
@click.pass_obj
def profile_delete(app: AppContext, name: str) -> None:
    """Delete a profile (refused while queued tasks use it)."""
    answer = app.client().delete_profile(name)
    if not Renderer(app.output)._dumped(answer):
        click.echo(f"profile {name} deleted")


def read_profile(path: str) -> ComputeProfile:
    """A profile file, parsed and checked (``InvalidInput`` -> exit 2)."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        data = yaml.safe_load(text)
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise InvalidInput(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: expected a mapping with name, template, selector")
    try:
        return parse_profile(data)
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc.message}") from exc


class ProfileRenderer(Renderer):
    """Tables for profiles."""

    def profiles(self, views: list[ProfileView]) -> None:
        """``profile list``."""
        if self._dumped(views):
            return
        table = _table("NAME", "VERSION", "TEMPLATE", "SELECTOR", "QUEUED")
        for v in views:
            template = " ".join(f"{k}={val}" for k, val in v.template.items())
            table.add_row(*_cells(v.name, v.version, template, v.selector_text,
                                  len(v.queued_tasks)))
        self._print(table)

    def profile(self, view: ProfileView) -> None:
        """``profile describe``."""
        if self._dumped(view):
            return
        self._print(_fields({
            "Name": view.name, "Version": view.version, "Description": view.description,
            "Template": ", ".join(f"{k}={v}" for k, v in view.template.items()),
            "Selector": view.selector_text, "Updated": view.updated_at.isoformat(),
            "Queued tasks": ", ".join(view.queued_tasks),
        }))
