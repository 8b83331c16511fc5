"""The Fuyao member agent (``fuyao-agent``): reports a member cluster to the hub and runs its tasks.

Layers, top to bottom: ``cli`` (flags, exit codes) -> ``connection`` (register, the gRPC
stream, reconnects) -> ``backends`` (``sim``: simulated nodes and a local scheduler;
``kube``: a real Kubernetes cluster through the ``kubernetes`` client). The agent imports the
shared ``fuyao`` package and never ``hub``.
"""

from __future__ import annotations

__version__ = "0.1.0"
