"""Enrollment and renewal of the agent's client certificate (agents of a TLS hub).

Called by ``member_agent.connection.Agent`` when it has ``--ca-cert``: ``ensure`` before the
first stream (enroll on the hub's registration listener, ``--register``, default port 8850
on each ``--hub`` host, with the join token and a CSR; or, for an agent registered before
certificates, trade its saved bearer credential once); ``credentials`` for every channel to
the agent port (mutual TLS); ``keep_renewed`` during each stream (``Renew`` at 2/3 of the
certificate's life, with a new key); ``recover`` when the hub refuses the certificate
(revoked or expired): enroll again if the token file holds a token not used yet. Keys and
certificates are kept by ``member_agent.identity``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import grpc

import member_agent
from fuyao.errors import Conflict, FuyaoError, InvalidInput, Transient, Unauthenticated
from fuyao.wire.v1 import agent_pb2 as pb
from fuyao.wire.v1 import agent_pb2_grpc as pb_grpc
from member_agent.hubs import HubList, parse_hubs
from member_agent.identity import AgentIdentity, IdentityStore, new_key, token_digest
from member_agent.state import CredentialStore, read_token

log = logging.getLogger(__name__)
DEFAULT_REGISTER_PORT = 8850
TOKEN_HINT = ("the join token is invalid, expired or already used; issue a new one with "
              "`fuyaoctl cluster token create {cluster}` and write it to the token file")


def register_addresses(register: str | None, hubs: tuple[str, ...]) -> tuple[str, ...]:
    """``--register`` as given, else port 8850 on each ``--hub`` host."""
    if register:
        return parse_hubs(register, "--register")
    return tuple(f"{hub.rpartition(':')[0]}:{DEFAULT_REGISTER_PORT}" for hub in hubs)


class Enrollment:
    """The agent's certificate: how it gets one, uses it, and keeps it current."""

    def __init__(self, *, cluster: str, state_dir: Path, token_file: Path | None,
                 ca_cert: Path, register: tuple[str, ...]) -> None:
        self.cluster = cluster
        self.token_file = token_file
        self.ca_cert = ca_cert
        self.store = IdentityStore(state_dir, cluster)
        self.legacy = CredentialStore(state_dir, cluster)
        self.registrations = HubList(register)
        self.identity: AgentIdentity | None = None

    # --- getting one ----------------------------------------------------------------

    def _token(self) -> str | None:
        if self.token_file is None:
            return None
        try:
            return read_token(self.token_file)
        except InvalidInput:
            return None

    async def ensure(self) -> AgentIdentity:
        """The saved identity, or a new one (enrolled with a new join token, or traded for a
        bearer credential saved before certificates)."""
        saved = self.store.load()
        token = self._token()
        if saved is not None and (token is None or token_digest(token) == saved.token_sha256):
            self.identity = saved
            return saved
        old = self.legacy.load() if saved is None else None
        if old is not None:
            request = pb.EnrollRequest(cluster=self.cluster, credential=old)
        else:
            request = pb.EnrollRequest(cluster=self.cluster, token=read_token(self.token_file))
        identity = await self._enroll(request, token_digest(token) if token else "")
        if old is not None:
            log.warning("traded the bearer credential of %s for a client certificate (the "
                        "bearer credential is deprecated)", self.cluster)
            self.legacy.path.unlink(missing_ok=True)
        return identity

    async def _enroll(self, request: pb.EnrollRequest, token_sha256: str) -> AgentIdentity:
        key, request.csr = new_key()
        request.agent_version = member_agent.__version__
        address = self.registrations.current
        roots = self._roots()
        try:
            async with grpc.aio.secure_channel(
                    address, grpc.ssl_channel_credentials(root_certificates=roots)) as channel:
                stub = pb_grpc.AgentRegistrationStub(channel)  # type: ignore[no-untyped-call]
                answer: pb.CertificateResponse = await stub.Enroll(request, timeout=30)
        except grpc.aio.AioRpcError as exc:
            raise self._enroll_error(exc, address) from exc
        self.identity = self.store.save(key, answer, token_sha256)
        log.info("enrolled cluster %s on %s: client certificate until %s, saved in %s",
                 self.cluster, address, time.strftime(
                     "%Y-%m-%dT%H:%M:%SZ", time.gmtime(answer.expires_unix_ms / 1000)),
                 self.store.path)
        return self.identity

    def _enroll_error(self, exc: grpc.aio.AioRpcError, address: str) -> FuyaoError:
        code, details = exc.code(), exc.details() or ""
        message = f"enrolling cluster {self.cluster!r} on {address}: {code.name}: {details}"
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.ALREADY_EXISTS):
            kind = Unauthenticated if code is grpc.StatusCode.UNAUTHENTICATED else Conflict
            return kind(f"{message} ({TOKEN_HINT.format(cluster=self.cluster)})")
        if code is grpc.StatusCode.INVALID_ARGUMENT:
            return InvalidInput(message)
        self.registrations.failed()
        return Transient(message + " (is --register the hub's registration port?)")

    async def recover(self) -> bool:
        """The hub refused our certificate: enroll again if the token file holds a join
        token not used yet; False if there is none (the caller gives up)."""
        token = self._token()
        used = self.identity.token_sha256 if self.identity is not None else ""
        if token is None or token_digest(token) == used:
            return False
        log.warning("the hub refused the certificate of %s; enrolling again with the join "
                    "token in %s", self.cluster, self.token_file)
        await self._enroll(pb.EnrollRequest(cluster=self.cluster, token=token),
                           token_digest(token))
        return True

    # --- using and renewing it ------------------------------------------------------

    def _roots(self) -> bytes:
        try:
            return self.ca_cert.read_bytes()
        except OSError as exc:
            raise InvalidInput(f"{self.ca_cert}: cannot read CA certificate") from exc

    def credentials(self) -> grpc.ChannelCredentials:
        """Mutual-TLS credentials for the agent port: the hub CA and our key and cert."""
        assert self.identity is not None, "ensure() first"
        return grpc.ssl_channel_credentials(root_certificates=self._roots(),
                                            private_key=self.identity.key.encode(),
                                            certificate_chain=self.identity.certificate.encode())

    async def renew(self, stub: pb_grpc.AgentChannelStub) -> AgentIdentity:
        """A new certificate for a new key, over the current mutual-TLS channel."""
        assert self.identity is not None
        key, csr = new_key()
        answer: pb.CertificateResponse = await stub.Renew(pb.RenewRequest(csr=csr), timeout=30)
        self.identity = self.store.save(key, answer, self.identity.token_sha256)
        log.info("renewed the client certificate of %s: valid until %s", self.cluster,
                 time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(answer.expires_unix_ms / 1000)))
        return self.identity

    async def keep_renewed(self, stub: pb_grpc.AgentChannelStub) -> None:
        """Renew at 2/3 of each certificate's life while the stream lives; a failed renewal
        is retried sooner the closer expiry is (the next stream retries too)."""
        while True:
            assert self.identity is not None
            now = time.time()
            if now < self.identity.renew_at:
                await asyncio.sleep(min(self.identity.renew_at - now, 3600.0))
                continue
            try:
                await self.renew(stub)
            except (grpc.aio.AioRpcError, FuyaoError) as exc:
                left = self.identity.expires_unix_ms / 1000 - time.time()
                retry = max(1.0, min(60.0, left / 10))
                why = exc.details() if isinstance(exc, grpc.aio.AioRpcError) else exc.message
                log.warning("renewing the client certificate failed (%s); retrying in %.0fs",
                            why, retry)
                await asyncio.sleep(retry)
