"""The registration listener (default port 8850): ``AgentRegistration.Enroll``.

Served by ``hub.server`` with server TLS only: a new agent has no client certificate yet, and
Python gRPC cannot ask for one on some methods of a port and not others, so the agent port
(which requires one) cannot take registrations. ``Enroll`` takes the cluster's one-time join
token (bound to that cluster name, expiring: ``ClusterManager.register``'s rules, in the
store) and a CSR for a key the agent made, and answers a certificate from
``hub.agentpki`` plus the CA. A new registration revokes the cluster's older certificates
and ends its current stream (credential rotation), without touching its tasks. An agent
registered before certificates may trade its bearer credential instead of a token: accepted
for one release, with a warning, an audit record and the ``fuyao_agent_auth`` metric.
Every refusal is audited with the address it came from, and changes nothing.
"""

from __future__ import annotations

import logging

import grpc

from fuyao.errors import FuyaoError, InvalidInput
from fuyao.wire.v1 import agent_pb2 as pb
from fuyao.wire.v1 import agent_pb2_grpc as pb_grpc
from hub.agent_service import abort, refuse_standby
from hub.agentpki import AgentCertificates, Issued
from hub.auth.actor import agent_actor
from hub.clusters import utcnow
from hub.core import Hub
from hub.secrets import hash_secret

log = logging.getLogger(__name__)
DEPRECATED_BEARER = ("the bearer agent credential is deprecated and will be refused by the "
                     "next release")


class AgentRegistration(pb_grpc.AgentRegistrationServicer):
    """Hands out agent client certificates for join tokens."""

    def __init__(self, hub: Hub, certificates: AgentCertificates) -> None:
        self.hub = hub
        self.certificates = certificates

    async def Enroll(
        self, request: pb.EnrollRequest,
        context: grpc.aio.ServicerContext,  # type: ignore[type-arg]
    ) -> pb.CertificateResponse:
        """A certificate for the cluster the token (or old credential) belongs to."""
        if not self.hub.ha.serving:
            await refuse_standby(self.hub, context)
        source = context.peer()
        bearer = bool(request.credential) and not request.token
        try:
            issued = await (self._trade(request) if bearer else self._enroll(request))
        except FuyaoError as exc:
            log.warning("enroll %s from %s refused: %s", request.cluster, source, exc.message)
            await self.hub.audit("agent.register", request.cluster, f"refused: {exc.message}",
                                 agent_actor("", source))
            if bearer:
                self.hub.metrics.agent_auth.labels(method="bearer", result="refused").inc()
            await abort(context, exc)
            raise   # unreachable: abort raises
        # Older certificates and any bearer credential of the cluster stop working now: end
        # the stream one of them holds (a new registration is a new agent).
        self.hub.clusters.forget_credentials(issued.cluster)
        self.hub.sessions.close_cluster(
            issued.cluster, f"cluster {issued.cluster} registered a new agent: this agent's "
            "credential was revoked")
        note = (f"ok: certificate {issued.serial} until {issued.expires_at.isoformat()}"
                + (f", {issued.revoked} older revoked" if issued.revoked else ""))
        if bearer:
            note += f"; traded a bearer credential ({DEPRECATED_BEARER})"
            self.hub.metrics.agent_auth.labels(method="bearer", result="ok").inc()
            log.warning("cluster %s traded its bearer credential for a certificate: %s",
                        issued.cluster, DEPRECATED_BEARER)
        await self.hub.audit("agent.register", issued.cluster, note,
                             agent_actor(issued.cluster, source))
        log.info("cluster %s enrolled: certificate %s", issued.cluster, issued.serial)
        return pb.CertificateResponse(**self.certificates.response_fields(issued))

    async def _enroll(self, request: pb.EnrollRequest) -> Issued:
        cluster = request.cluster
        clusters = self.hub.clusters
        if not request.token:
            raise InvalidInput("a join token (or, deprecated, a bearer credential) is required")
        issued = self.certificates.sign(cluster, request.csr)   # a bad CSR uses no token
        clusters.get_for_token(cluster)
        store = self.hub.writer.store

        def consume() -> int:
            store.consume_join_token(cluster, hash_secret(request.token), utcnow())
            return store.replace_agent_certificates(cluster, issued.serial, issued.issued_at,
                                                    issued.expires_at)

        revoked = await self.hub.writer.call(consume)
        return Issued(cluster, issued.serial, issued.pem, issued.issued_at, issued.expires_at,
                      revoked)

    async def _trade(self, request: pb.EnrollRequest) -> Issued:
        cluster = await self.hub.clusters.authenticate(request.credential)
        if cluster != request.cluster:
            raise InvalidInput(f"the credential is not cluster {request.cluster!r}'s")
        return await self.certificates.record(self.certificates.sign(cluster, request.csr),
                                              replace=True)
