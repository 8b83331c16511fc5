"""``fuyao-agent sim-member``: run a simulated member cluster as its own process.

The agent (``member_agent.cli`` with ``--backend sim``) calls ``member_backend`` to get a
``MemberBackend`` and the command line that starts this process; users never need to run
it by hand. One member per state directory: it holds ``<state-dir>/member.lock`` (its pid
inside) with ``flock``, so a second one started by a racing agent exits at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import signal
import sys
from pathlib import Path

import click

from fuyao.errors import FuyaoError
from fuyao.fleetfile import load_fleet
from fuyao.nodescheduler import Policy
from member_agent.backends.base import Backend

MEMBER_LOCK = "member.lock"
log = logging.getLogger("member_agent.sim_member")


def member_backend(*, state_dir: Path, cluster: str, fleet: str, time_scale: float,
                   policy: Policy, member_log: Path | None,
                   orphan_timeout: float) -> Backend:
    """The agent's ``MemberBackend``, which starts ``sim-member`` with these settings."""
    from member_agent.backends.sim.remote import MemberBackend

    load_fleet(fleet)        # bad input fails here, in the agent, with exit code 2
    argv = ["sim-member", "--state-dir", str(state_dir.resolve()), "--cluster", cluster,
            "--fleet", fleet, "--time-scale", repr(time_scale), "--sim-policy", policy.value,
            "--orphan-timeout", repr(orphan_timeout)]
    if member_log is not None:
        argv += ["--member-log", str(member_log.resolve())]
    return MemberBackend(state_dir, argv)


def _lock(state_dir: Path) -> int | None:
    """Hold ``member.lock``; None if another member already does."""
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(state_dir / MEMBER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


async def _run(member: object) -> None:
    from member_agent.backends.sim.member import SimMember

    assert isinstance(member, SimMember)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await member.run(stop)


@click.command("sim-member")
@click.option("--state-dir", type=click.Path(path_type=Path), required=True)
@click.option("--cluster", required=True)
@click.option("--fleet", required=True)
@click.option("--time-scale", type=float, default=1.0)
@click.option("--sim-policy", type=click.Choice([p.value for p in Policy]),
              default=Policy.BEST_FIT.value)
@click.option("--member-log", type=click.Path(path_type=Path), default=None)
@click.option("--orphan-timeout", type=float, default=0.0,
              help="Stop after this many seconds without an agent (0: never).")
def sim_member_command(state_dir: Path, cluster: str, fleet: str, time_scale: float,
                       sim_policy: str, member_log: Path | None,
                       orphan_timeout: float) -> None:
    """Run the simulated member of one state directory (started by the agent)."""
    from member_agent.backends.sim.backend import SimBackend
    from member_agent.backends.sim.member import CopyLog, SimMember, member_address

    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    fd = _lock(state_dir)
    if fd is None:
        log.info("another sim member serves %s", state_dir)
        return
    try:
        backend = SimBackend(load_fleet(fleet), time_scale=time_scale,
                             policy=Policy(sim_policy))
        copy_log = CopyLog(member_log, cluster) if member_log is not None else None
        member = SimMember(backend, member_address(state_dir), copy_log=copy_log,
                           orphan_timeout=orphan_timeout)
        asyncio.run(_run(member))
    except FuyaoError as exc:
        click.echo(f"fuyao-agent sim-member: error: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
