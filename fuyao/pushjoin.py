"""REST shapes of a push join (``POST /api/v1/clusters/push``), shared by hub and CLI.

The CLI builds or flattens the kubeconfig (``fuyao.kubeconfig``) and sends it with the usual
join settings; the hub answers without ever echoing the credentials.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from fuyao.kubeconfig import MAX_KUBECONFIG_BYTES
from fuyao.spec import JoinRequest


class PushJoinRequest(JoinRequest):
    """A join whose agent the hub runs itself, with these API credentials."""

    model_config = ConfigDict(extra="forbid")

    kubeconfig: str = Field(max_length=MAX_KUBECONFIG_BYTES,
                            description="one-context kubeconfig, credentials inline")


class PushJoinResponse(BaseModel):
    """What the hub checked and started; never the credentials."""

    cluster: str
    mode: str = "push"
    server: str
    nodes: int = Field(description="nodes the credentials could list")
