"""The real agent (``member_agent``) against a real in-process hub with TLS: it enrolls with
its join token, keeps its key and certificate 0600 in its state directory, renews before
expiry over mutual TLS, re-enrolls when a new join token is written to its token file
(credential rotation: the older certificate is revoked, no task moves), and an agent saved
with a bearer credential before certificates trades it for one by itself."""

from __future__ import annotations

import datetime as dt
import json
import stat
from pathlib import Path

from fuyao.errors import Unauthenticated
from member_agent.backends.sim.backend import SimBackend
from member_agent.connection import Agent, AgentConfig
from member_agent.state import CredentialStore
from tests.agent.test_connection import FLEET, running
from tests.hub.conftest import HubHarness, start_harness, stop_harness
from tests.hub.test_agent_certificates import certificates
from tests.hub.test_agent_channel import join, until


def agent(h: HubHarness, state: Path, token: str) -> Agent:
    assert h.hub.pki is not None and h.home is not None
    token_file = state.parent / "east.token"
    token_file.write_text(token + "\n")
    ca = state.parent / "east-ca.crt"
    ca.write_bytes(h.hub.pki.ca_cert)
    config = AgentConfig(hub=h.agent_address, cluster="east", state_dir=state,
                         token_file=token_file, ca_cert=ca, register=h.register_address,
                         heartbeat_interval=0.1, backoff_initial=0.05, backoff_max=0.2)
    return Agent(config, SimBackend(FLEET, time_scale=0.01, retry_interval=0.05))


def serial(state: Path) -> str:
    from cryptography import x509
    data = json.loads((state / "identity.json").read_text())
    return format(x509.load_pem_x509_certificate(data["certificate"].encode()).serial_number,
                  "x")


async def test_the_agent_enrolls_renews_and_re_enrolls_with_a_new_token(
        tmp_path: Path) -> None:
    h = await start_harness(tmp_path / "hub", tls=True, agent_cert_lifetime=3.0)
    state = tmp_path / "agent" / "state"
    state.parent.mkdir()
    try:
        first = serial_after = ""
        async with running(agent(h, state, await join(h, "east"))):
            await until(h, lambda: h.hub.clusters.entries["east"].connected, timeout=15)
            mode = stat.S_IMODE((state / "identity.json").stat().st_mode)
            assert mode == 0o600
            first = serial(state)
            # Renewed at 2/3 of 3 s, over the mutual-TLS port, on the same stream.
            await until(h, lambda: serial(state) != first, timeout=15)
            renewals = h.hub.store.audit_log(action="agent.renew")
            assert renewals and renewals[0]["result"].startswith("ok: certificate")
            assert h.hub.clusters.entries["east"].connected
            serial_after = serial(state)
        # Rotation: a new join token in the token file; the next start enrolls with it.
        token = (await h.api.post("/api/v1/clusters/east/tokens")).json()["token"]
        async with running(agent(h, state, token)):
            await until(h, lambda: serial(state) not in (first, serial_after), timeout=15)
            await until(h, lambda: h.hub.clusters.entries["east"].connected, timeout=15)
            now = dt.datetime.now(dt.UTC)
            current = serial(state)
            for row in certificates(h):
                rec = h.hub.store.agent_certificate(row[0])
                assert rec is not None
                usable = rec.revoked_at is None and rec.expires_at > now
                assert usable == (rec.serial == current), rec
    finally:
        await stop_harness(h)


async def test_an_agent_with_a_saved_bearer_credential_trades_it_for_a_certificate(
        tmp_path: Path) -> None:
    h = await start_harness(tmp_path / "hub", tls=True)
    state = tmp_path / "agent" / "state"
    state.parent.mkdir()
    try:
        token = await join(h, "east")
        credential = await h.hub.clusters.register("east", token)   # as an old agent did
        CredentialStore(state, "east").save(credential)
        async with running(agent(h, state, token)):
            await until(h, lambda: h.hub.clusters.entries["east"].connected, timeout=15)
        assert (state / "identity.json").exists()
        assert not (state / "credential.json").exists()
        [traded] = h.hub.store.audit_log(action="agent.register")
        assert "traded a bearer credential" in traded["result"]
        assert h.hub.metrics.agent_auth.labels(method="bearer", result="ok")._value.get() == 1
        # The credential is gone: trading it again is refused.
        try:
            await h.hub.clusters.authenticate(credential)
            raise AssertionError("the traded credential still authenticates")
        except Unauthenticated:
            pass
    finally:
        await stop_harness(h)
