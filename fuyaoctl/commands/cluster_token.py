"""``fuyaoctl cluster token``: join tokens of an existing cluster (``create|list|revoke``).

A new join token re-registers the cluster's agent, replacing a lost or leaked credential,
without touching the cluster's tasks (``cluster remove`` would requeue them all).
"""

from __future__ import annotations

import click

from fuyaoctl.context import AppContext, output_option, seconds


@click.group("token")
@output_option
def token() -> None:
    """Join tokens of an existing cluster: create, list, revoke."""


@token.command("create")
@click.argument("name")
@click.option("--expires", metavar="DURATION", callback=seconds,
              help="How long the token stays valid, e.g. 30m, 24h (default 24h).")
@output_option
@click.pass_obj
def create(app: AppContext, name: str, expires: int | None) -> None:
    """A new one-time join token for cluster NAME (rotates its agent credential)."""
    app.render().joined(app.client().create_join_token(name, ttl_seconds=expires))


@token.command("list")
@click.argument("name")
@output_option
@click.pass_obj
def list_tokens(app: AppContext, name: str) -> None:
    """Cluster NAME's join tokens (never the secrets)."""
    app.render().join_tokens(app.client().list_join_tokens(name))


@token.command("revoke")
@click.argument("name")
@click.argument("token_id")
@output_option
@click.pass_obj
def revoke(app: AppContext, name: str, token_id: str) -> None:
    """Revoke join token TOKEN_ID (from 'cluster token list') of cluster NAME."""
    answer = app.client().revoke_join_token(name, token_id)
    app.render().done(answer, f"join token {token_id} of cluster {name} revoked")
