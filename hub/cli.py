"""``fuyao-hub``: the hub's command line (``fuyao-hub serve``).

Parses flags into a ``HubConfig`` and runs ``hub.server.serve``. Configuration errors exit 2
with a message; nothing else lives here.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from dataclasses import replace
from pathlib import Path

import click

from fuyao import __version__
from fuyao.errors import FuyaoError
from fuyao.quantity import parse_duration
from hub.auth.service import AUTH_MODES, check_auth_mode
from hub.config import (
    DEFAULT_AGENT_PORT,
    DEFAULT_API_PORT,
    DEFAULT_HEALTH_PORT,
    DEFAULT_REGISTER_PORT,
    HubConfig,
    Timings,
    check_config,
    default_home,
    load_config_file,
)
from hub.events.redis_stream import check_redis_url
from hub.server import serve


@click.group()
@click.version_option(__version__, prog_name="fuyao-hub")
def main() -> None:
    """Fuyao federation hub."""


@main.command("serve")
@click.option("--home", type=click.Path(path_type=Path), default=None,
              help="State directory (SQLite store). Default $FUYAO_HOME or ~/.fuyao.")
@click.option("--db", "db_url", default=None,
              help="Store URL, e.g. postgresql://user:pw@host/fuyao. Default: SQLite in --home.")
@click.option("--redis", "redis_url", default=None, metavar="URL",
              help="Publish task and cluster events to this Redis (redis://HOST:PORT/DB); "
                   "optional: without it everything works on one hub.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--api-port", type=int, default=DEFAULT_API_PORT, show_default=True)
@click.option("--agent-port", type=int, default=DEFAULT_AGENT_PORT, show_default=True)
@click.option("--health-port", type=int, default=DEFAULT_HEALTH_PORT, show_default=True)
@click.option("--register-port", type=int, default=DEFAULT_REGISTER_PORT, show_default=True,
              help="Agents enroll here (join token + CSR -> client certificate); server TLS "
                   "only. Not used with --agent-insecure.")
@click.option("--agent-bearer-port", type=int, default=0, show_default=True,
              help="Deprecated: also accept agents that still use a bearer credential on "
                   "this port (server TLS only), for one release; 0: off.")
@click.option("--agent-cert-lifetime", default=None, metavar="DURATION",
              help="How long an agent client certificate is accepted (default 24h); agents "
                   "renew at 2/3 of it.")
@click.option("--advertise", default=None,
              help="HOST:PORT agents dial (shown in join commands). Default host:agent-port.")
@click.option("--agent-insecure", is_flag=True, default=False,
              help="Serve the agent port without TLS (behind a TLS-terminating proxy).")
@click.option("--config", "config_file", type=click.Path(path_type=Path, exists=True,
                                                        dir_okay=False), default=None,
              help="YAML file: timings, placement profile, headroom_priority.")
@click.option("--auth", "auth_mode", type=click.Choice(AUTH_MODES), default="token",
              show_default=True,
              help="REST authentication: bearer tokens, or none (loopback --host only).")
@click.option("--rate-limit", type=click.FloatRange(min=0), default=None,
              help="REST requests per second per token (default 50; 0: no limit).")
@click.option("--secrets-key-file", type=click.Path(path_type=Path), default=None,
              help="Key file (32+ random bytes, outside the database) that encrypts push-"
                   "joined members' credentials; without it the hub takes no push joins.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
def serve_cmd(home: Path | None, db_url: str | None, redis_url: str | None, host: str,
              api_port: int,
              agent_port: int, health_port: int, register_port: int, agent_bearer_port: int,
              agent_cert_lifetime: str | None, advertise: str | None,
              agent_insecure: bool, config_file: Path | None, secrets_key_file: Path | None,
              auth_mode: str, rate_limit: float | None, log_level: str) -> None:
    """Run the hub: REST API, agent channel, placement loop, store.

    On first start it writes an admin token to <home>/admin.token (0600).
    """
    logging.basicConfig(level=log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = HubConfig(home=home or default_home(), db_url=db_url, redis_url=redis_url, host=host,
                       api_port=api_port, agent_port=agent_port, health_port=health_port,
                       register_port=register_port, agent_bearer_port=agent_bearer_port,
                       advertise=advertise, agent_tls=not agent_insecure, timings=Timings(),
                       secrets_key_file=secrets_key_file, auth=auth_mode)
    try:
        if config_file is not None:
            config = load_config_file(config_file, config)
        if rate_limit is not None:
            config = replace(config, api_rate_limit=rate_limit)
        if agent_cert_lifetime is not None:
            config = replace(config, agent_cert_lifetime=parse_duration(agent_cert_lifetime))
        check_config(config)
        check_auth_mode(config.auth, config.host)
        if config.redis_url is not None:
            check_redis_url(config.redis_url)
        asyncio.run(serve(replace(config)))
    except FuyaoError as exc:
        click.echo(f"error: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
