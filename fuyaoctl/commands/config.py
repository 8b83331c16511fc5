"""``fuyaoctl config``: named contexts in ``~/.config/fuyao/config.yaml`` (see
``fuyaoctl.config``): ``get-contexts``, ``current-context``, ``use-context``,
``set-context``, ``delete-context``."""

from __future__ import annotations

import click

from fuyaoctl.config import Config, Context
from fuyaoctl.context import AppContext, output_option


@click.group("config")
def config() -> None:
    """Contexts: which hub, with which token (like kubeconfig)."""


@config.command("get-contexts")
@output_option
@click.pass_obj
def get_contexts(app: AppContext) -> None:
    """List the contexts; '*' marks the current one."""
    cfg = Config.load()
    rows = [{"name": c.name, "hub": c.hub, "current": c.name == cfg.current,
             "credential": "token" if c.token else f"token-file {c.token_file}"
             if c.token_file else "none"} for c in cfg.contexts.values()]
    lines = [f"{'*' if r['current'] else ' '} {r['name']}  {r['hub'] or '-'}  "
             f"{r['credential']}" for r in rows]
    app.render().done({"contexts": rows, "current": cfg.current},
                      "\n".join(lines) or f"no contexts in {cfg.path}")


@config.command("current-context")
def current_context() -> None:
    """Print the current context's name."""
    cfg = Config.load()
    if not cfg.current:
        raise click.ClickException(f"no current context in {cfg.path}")
    click.echo(cfg.current)


@config.command("use-context")
@click.argument("name")
def use_context(name: str) -> None:
    """Make NAME the current context."""
    cfg = Config.load()
    cfg.context(name)     # NotFound if absent
    cfg.current = name
    cfg.save()
    click.echo(f"switched to context {name}")


@config.command("set-context")
@click.argument("name")
@click.option("--hub", "hub_url", metavar="URL", help="Hub REST address.")
@click.option("--token", "token_value", metavar="TOKEN",
              help="Bearer token stored in the file (prefer --token-file).")
@click.option("--token-file", metavar="PATH", help="File holding the token.")
@click.option("--use", is_flag=True, help="Also make it the current context.")
def set_context(name: str, hub_url: str | None, token_value: str | None,
                token_file: str | None, use: bool) -> None:
    """Create or change context NAME."""
    cfg = Config.load()
    ctx = cfg.contexts.get(name) or Context(name)
    ctx.hub = hub_url or ctx.hub
    if token_value or token_file:
        ctx.token, ctx.token_file = token_value, token_file
    cfg.contexts[name] = ctx
    if use or cfg.current is None:
        cfg.current = name
    cfg.save()
    click.echo(f"context {name} saved in {cfg.path}")


@config.command("delete-context")
@click.argument("name")
def delete_context(name: str) -> None:
    """Remove context NAME."""
    cfg = Config.load()
    cfg.context(name)
    del cfg.contexts[name]
    if cfg.current == name:
        cfg.current = None
    cfg.save()
    click.echo(f"context {name} deleted")
