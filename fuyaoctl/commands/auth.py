"""``fuyaoctl auth``: API tokens (``token create|list|revoke``, admin only) and ``whoami``."""

from __future__ import annotations

import click

from fuyao.identity import Role
from fuyaoctl.context import AppContext, output_option, seconds


@click.group("auth")
@output_option
def auth() -> None:
    """Who you are, and the hub's API tokens."""


@auth.command("whoami")
@output_option
@click.pass_obj
def whoami(app: AppContext) -> None:
    """The name, role and queues of the token in use."""
    app.render().whoami(app.client().whoami())


@auth.group("token")
@output_option
def token() -> None:
    """API tokens: create, list, revoke (admin)."""


@token.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice([r.value for r in Role]), required=True,
              help="admin, operator, submitter (needs --queue) or viewer.")
@click.option("--queue", "queues", multiple=True, metavar="QUEUE",
              help="A queue a submitter may use; repeatable.")
@click.option("--expires", metavar="DURATION", callback=seconds,
              help="Lifetime, e.g. 30d, 12h (default: no expiry).")
@output_option
@click.pass_obj
def create(app: AppContext, name: str, role: str, queues: tuple[str, ...],
           expires: int | None) -> None:
    """Create token NAME; its secret is printed once."""
    app.render().token_created(app.client().create_token(
        name, role, queues=queues, expires_in_seconds=expires))


@token.command("list")
@output_option
@click.pass_obj
def list_tokens(app: AppContext) -> None:
    """List tokens (never their secrets)."""
    app.render().tokens(app.client().list_tokens())


@token.command("revoke")
@click.argument("name")
@output_option
@click.pass_obj
def revoke(app: AppContext, name: str) -> None:
    """Revoke token NAME at once."""
    app.render().token_revoked(app.client().revoke_token(name))
