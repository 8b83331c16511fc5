"""What every ``fuyaoctl`` command shares: the ``AppContext`` (hub address, token, output
format, the SDK client), the root group's error handler, and option helpers.

Command modules (``fuyaoctl.cli`` and ``fuyaoctl.commands.*``) import from here, never from
each other, so a new command group is a new module registered with one line in ``cli``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click
import httpx

from fuyao.errors import FuyaoError
from fuyao.quantity import parse_duration
from fuyaoctl import render
from fuyaoctl.client import Client
from fuyaoctl.render import FORMATS, Renderer

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class AppContext:
    """What every command needs: how to reach the hub, and how to print."""

    http: httpx.Client | None = None
    hub: str | None = None
    token: str | None = None
    output: str = "table"
    _client: Client | None = None

    def client(self) -> Client:
        """The SDK client for this invocation (created once)."""
        if self._client is None:
            self._client = Client(self.hub, token=self.token, http=self.http)
            click.get_current_context().call_on_close(self._client.close)
        return self._client

    def render(self) -> Renderer:
        """A renderer for the output format chosen with ``-o``."""
        return Renderer(self.output)


class FuyaoGroup(click.Group):
    """The root group: its ``invoke`` is the one place library errors become exit codes."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except FuyaoError as exc:
            render.error(exc.message)
            ctx.exit(exc.exit_code)


def _remember_output(ctx: click.Context, _: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(AppContext).output = value.lower()


def output_option(func: F) -> F:
    """``-o/--output`` on a subcommand, so ``fuyaoctl task list -o json`` works too."""
    return click.option(
        "-o", "--output", type=click.Choice(FORMATS, case_sensitive=False), default=None,
        expose_value=False, callback=_remember_output,
        help="Output format: table, json or yaml.",
    )(func)


def pairs(_: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param=param)
        pairs[key] = value
    return pairs


def names(_: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    """A repeatable option whose values may also be comma-separated: ``--after a,b --after c``."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def seconds(_: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return round(parse_duration(value))
    except FuyaoError as exc:
        raise click.BadParameter(exc.message, param=param) from exc
