"""The ``fuyao-agent`` console script's first module: gRPC's runtime settings, then the CLI.

gRPC core reads ``GRPC_EXPERIMENTS`` once, when ``grpc`` is first imported, so the agent's
setting has to be in the environment before ``member_agent.cli`` (which imports ``grpc``)
loads; this module imports nothing that imports ``grpc`` and sets it first.

The setting: ``-event_engine_client``, the agent's one channel to the hub on gRPC core's
iomgr client path instead of the EventEngine client. An agent does a few messages a second
to tens a second on one stream, where each message's wake-ups and thread hops cost more than
its bytes; on the iomgr path a client at an agent's pace took 0.735x the CPU a message
(``bench/grpc_paced.py``; docs/benchmarks.md, the e2e section's "Twenty-third pass"). An
operator's own ``GRPC_EXPERIMENTS`` is kept as given (``GRPC_EXPERIMENTS=`` runs the agent
on gRPC's defaults). A gRPC release without the experiment logs "Unknown experiment" once
and runs on its default path.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

AGENT_GRPC_EXPERIMENTS = "-event_engine_client"


def configure_grpc(environ: MutableMapping[str, str] = os.environ) -> str:
    """Put the agent's gRPC experiments in ``environ`` unless it names its own; returns what
    gRPC will read."""
    return environ.setdefault("GRPC_EXPERIMENTS", AGENT_GRPC_EXPERIMENTS)


def main() -> None:
    """``fuyao-agent``: set gRPC's runtime settings, then run the command line."""
    configure_grpc()
    from member_agent.cli import main as cli_main  # after the setting: it imports grpc

    cli_main()
