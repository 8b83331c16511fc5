"""Agent identity from a client certificate, over real gRPC on loopback with TLS.

An agent enrolls on the registration listener (join token + CSR) and streams over mutual
TLS; the cluster comes from its certificate. Each way in that must not work is refused,
audited where the hub can see it (with the address it came from), and changes nothing:
no certificate, a certificate of a foreign CA (both refused by the TLS layer before any hub
code runs), a certificate of another cluster reporting this cluster's task, an expired and
a revoked certificate, a replayed join token. Renewal works over mutual TLS; the deprecated
bearer listener still works, and says so.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from fuyao.wire.v1 import agent_pb2 as pb
from hub.store.tables import TABLES
from member_agent.identity import new_key
from tests.hub.agentkit import RawAgent, enroll, gpu_node
from tests.hub.conftest import HubHarness, free_port, start_harness, stop_harness
from tests.hub.test_agent_channel import inventoried, join, task, until

A100 = "NVIDIA-A100-PCIE-40GB"
ADDRESS = ("ipv4:127.0.0.1", "ipv6:")


@pytest.fixture
async def tls(tmp_path: Path) -> AsyncIterator[HubHarness]:
    h = await start_harness(tmp_path / "hub", tls=True, agent_bearer_port=free_port())
    try:
        yield h
    finally:
        await stop_harness(h)


def ca(h: HubHarness) -> bytes:
    assert h.hub.pki is not None
    return h.hub.pki.ca_cert


async def mtls_agent(h: HubHarness, name: str, nodes: list[Any], **join_extra: Any,
                     ) -> tuple[RawAgent, tuple[bytes, bytes]]:
    """Join ``name``, enroll, connect over mutual TLS, wait for Ready."""
    client = await enroll(h.register_address, ca(h), name, await join(h, name, **join_extra))
    agent = RawAgent(h.agent_address, name, ca(h), client)
    await agent.connect(nodes)
    await until(h, lambda: inventoried(h, name, len(nodes)))
    return agent, client


def certificates(h: HubHarness) -> list[tuple[Any, ...]]:
    with h.hub.store._engine.connect() as conn:
        table = TABLES["agent_certificates"]
        rows = conn.execute(table.select().order_by(table.c.issued_at, table.c.serial))
        return [tuple(r) for r in rows]


def state(h: HubHarness) -> tuple[Any, ...]:
    """What a refusal must not change: clusters, certificates, tasks."""
    clusters = [(c.name, c.state, c.nodes) for c in h.hub.cluster_views()]
    tasks = sorted((t.name, t.state.value, t.cluster, t.generation)
                   for t in h.hub.tasks.active.values())
    return clusters, certificates(h), tasks


def audits(h: HubHarness, action: str) -> list[dict[str, Any]]:
    return h.hub.store.audit_log(limit=50, action=action)


def foreign_certificate(cluster: str) -> tuple[bytes, bytes]:
    """A client certificate for ``cluster`` from a CA that is not the hub's."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fuyao-hub CA")])
    now = dt.datetime.now(dt.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cluster)]))
            .issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.UniformResourceIdentifier(f"fuyao://cluster/{cluster}")]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


async def test_an_enrolled_agent_streams_as_the_cluster_its_certificate_names(
        tls: HubHarness) -> None:
    east, (_, cert) = await mtls_agent(tls, "east", [gpu_node("a-0", A100, 8)])
    parsed = x509.load_pem_x509_certificate(cert)
    assert parsed.subject.rfc4514_string() == "CN=east"
    [row] = certificates(tls)
    assert (row[0], row[1]) == (format(parsed.serial_number, "x"), "east")
    view = (await tls.api.get("/api/v1/clusters/east")).json()
    assert (view["state"], view["gpus"]) == ("Ready", {"A100": 8})
    [enrolled] = audits(tls, "agent.register")
    assert enrolled["actor"] == "agent:east" and enrolled["result"].startswith("ok: certificate")
    assert enrolled["source"].startswith(ADDRESS)
    await east.close()


async def test_no_certificate_or_a_foreign_one_is_refused_audited_and_changes_nothing(
        tls: HubHarness) -> None:
    await join(tls, "east")
    before = state(tls)
    for client in (None, foreign_certificate("east")):
        intruder = RawAgent(tls.agent_address, "east", ca(tls), client)
        await intruder.connect([gpu_node("x-0", A100, 8)])
        assert await intruder.status() == grpc.StatusCode.UNAVAILABLE
        await intruder.close()
    # The TLS layer refused both; the gate in front of the port saw them never reach a call.
    await until(tls, lambda: len(audits(tls, "agent.connect")) >= 1)
    [entry] = audits(tls, "agent.connect")        # one record per host a minute...
    assert entry["result"].startswith("refused: TLS handshake refused: no client certificate")
    assert entry["source"].startswith(ADDRESS) and entry["actor"] == "agent"
    assert state(tls) == before
    refused = tls.hub.metrics.agent_auth.labels(method="certificate", result="refused")
    assert refused._value.get() >= 1


async def test_another_clusters_certificate_cannot_report_this_clusters_task(
        tls: HubHarness) -> None:
    east, _ = await mtls_agent(tls, "east", [gpu_node("a-0", A100, 8)], weight=10)
    west, _ = await mtls_agent(tls, "west", [gpu_node("b-0", A100, 8)], weight=1)
    await tls.api.post("/api/v1/tasks", json={"name": "job", "gpu": 1})
    place = (await east.expect("place")).place
    before = state(tls)
    events = [e["kind"] for e in (await task(tls, "job"))["events"]]
    west.report(place.task_id, place.generation, pb.TASK_PHASE_SUCCEEDED, node="b-0")
    await until(tls, lambda: bool(audits(tls, "agent.report")))
    [entry] = audits(tls, "agent.report")
    assert (entry["actor"], entry["target"]) == ("agent:west", "job")
    assert entry["result"].startswith("refused: cluster west reported a status for task job")
    assert entry["source"].startswith(ADDRESS)
    assert state(tls) == before
    assert [e["kind"] for e in (await task(tls, "job"))["events"]] == events
    await east.close()
    await west.close()


async def test_an_expired_certificate_is_refused_with_the_reason_and_audited(
        tmp_path: Path) -> None:
    h = await start_harness(tmp_path / "hub", tls=True, agent_cert_lifetime=1.0)
    try:
        client = await enroll(h.register_address, ca(h), "east", await join(h, "east"))
        await asyncio.sleep(1.2)
        before = state(h)
        late = RawAgent(h.agent_address, "east", ca(h), client)
        await late.connect([gpu_node("a-0", A100, 8)])
        assert await late.status() == grpc.StatusCode.UNAUTHENTICATED
        assert late.call is not None and "expired at" in (await late.call.details())
        [entry] = audits(h, "agent.connect")
        assert "expired at" in entry["result"] and "cluster token create east" in entry["result"]
        assert entry["source"].startswith(ADDRESS)
        assert state(h) == before
        with pytest.raises(grpc.aio.AioRpcError) as renew:
            await late.renew()
        assert renew.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert state(h) == before
        await late.close()
    finally:
        await stop_harness(h)


async def test_re_registration_revokes_the_old_certificate_and_keeps_the_tasks(
        tls: HubHarness) -> None:
    east, old = await mtls_agent(tls, "east", [gpu_node("a-0", A100, 8)])
    await tls.api.post("/api/v1/tasks", json={"name": "job", "gpu": 1})
    place = (await east.expect("place")).place
    east.report(place.task_id, 1, pb.TASK_PHASE_RUNNING, node="a-0")
    await until(tls, lambda: tls.hub.tasks.by_name("job").state.value == "Running")

    token = (await tls.api.post("/api/v1/clusters/east/tokens")).json()["token"]
    new = await enroll(tls.register_address, ca(tls), "east", token)
    assert await east.status() == grpc.StatusCode.UNAUTHENTICATED   # its stream was ended
    again = RawAgent(tls.agent_address, "east", ca(tls), new)
    await again.connect([gpu_node("a-0", A100, 8)], tasks=[pb.TaskReport(
        task_id=place.task_id, generation=1, phase=pb.TASK_PHASE_RUNNING, node="a-0")])
    await until(tls, lambda: tls.hub.clusters.entries["east"].connected)
    view = await task(tls, "job")
    assert (view["state"], view["generation"]) == ("Running", 1)
    assert "Requeued" not in [e["kind"] for e in view["events"]]

    before = state(tls)
    stale = RawAgent(tls.agent_address, "east", ca(tls), old)
    await stale.connect([])
    assert await stale.status() == grpc.StatusCode.UNAUTHENTICATED
    refused = [a for a in audits(tls, "agent.connect") if "revoked" in a["result"]]
    assert len(refused) == 1 and refused[0]["source"].startswith(ADDRESS)
    assert state(tls) == before
    for agent in (east, again, stale):
        await agent.close()


async def test_cluster_remove_revokes_its_certificates(tls: HubHarness) -> None:
    east, client = await mtls_agent(tls, "east", [gpu_node("a-0", A100, 8)])
    r = await tls.api.delete("/api/v1/clusters/east")
    assert r.status_code == 200, r.text
    [row] = certificates(tls)
    assert row[4] is not None                             # revoked_at
    [removed] = audits(tls, "cluster.remove")
    assert "1 agent certificate(s) revoked" in removed["result"]
    await join(tls, "east")                               # the same name, joined again
    before = state(tls)
    ghost = RawAgent(tls.agent_address, "east", ca(tls), client)
    await ghost.connect([gpu_node("a-0", A100, 8)])
    assert await ghost.status() == grpc.StatusCode.UNAUTHENTICATED
    assert state(tls) == before
    assert tls.hub.clusters.entries["east"].record.state == "Joining"
    await east.close()
    await ghost.close()


async def test_a_replayed_join_token_is_refused_audited_and_issues_nothing(
        tls: HubHarness) -> None:
    token = await join(tls, "east")
    await enroll(tls.register_address, ca(tls), "east", token)
    before = state(tls)
    with pytest.raises(grpc.aio.AioRpcError) as replayed:
        await enroll(tls.register_address, ca(tls), "east", token)
    assert replayed.value.code() == grpc.StatusCode.ALREADY_EXISTS
    with pytest.raises(grpc.aio.AioRpcError) as other:
        await enroll(tls.register_address, ca(tls), "west", token)
    assert other.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert state(tls) == before
    refusals = [a for a in audits(tls, "agent.register") if a["result"].startswith("refused")]
    assert len(refusals) == 2 and all(a["source"].startswith(ADDRESS) for a in refusals)
    assert "already used" in refusals[1]["result"]


async def test_renewal_over_mutual_tls_issues_a_new_certificate_that_works(
        tls: HubHarness) -> None:
    east, _ = await mtls_agent(tls, "east", [gpu_node("a-0", A100, 8)])
    key, csr = new_key()
    answer = await east.stub.Renew(pb.RenewRequest(csr=csr))
    assert answer.cluster == "east" and answer.expires_unix_ms > answer.issued_unix_ms
    rows = certificates(tls)
    assert [(r[1], r[4]) for r in rows] == [("east", None), ("east", None)]
    [renewed] = audits(tls, "agent.renew")
    assert renewed["actor"] == "agent:east" and renewed["result"].startswith("ok: certificate")
    await east.close()
    await until(tls, lambda: not tls.hub.clusters.entries["east"].connected)
    # The renewed certificate (with its new key) is the cluster's identity on a new stream.
    again = RawAgent(tls.agent_address, "east", ca(tls), (key, answer.certificate))
    await again.connect([gpu_node("a-0", A100, 8)])
    await until(tls, lambda: tls.hub.clusters.entries["east"].connected)
    await again.close()


async def test_the_deprecated_bearer_listener_works_and_warns(
        tls: HubHarness, caplog: pytest.LogCaptureFixture) -> None:
    bearer = f"127.0.0.1:{tls.hub.config.agent_bearer_port}"
    old = RawAgent(bearer, "east", ca(tls))
    await old.register(await join(tls, "east"))
    with caplog.at_level(logging.WARNING, "hub.agent_service"):
        await old.connect([gpu_node("a-0", A100, 8)])
        await until(tls, lambda: tls.hub.clusters.entries["east"].record.state == "Ready")
    assert any("deprecated" in r.getMessage() for r in caplog.records)
    [entry] = audits(tls, "agent.connect")
    assert entry["actor"] == "agent:east" and "deprecated" in entry["result"]
    metric = tls.hub.metrics.agent_auth.labels(method="bearer", result="ok")
    assert metric._value.get() == 1
    # An upgraded agent trades the same credential for a certificate, once.
    client = await enroll(tls.register_address, ca(tls), "east", credential=old.credential)
    assert await old.status() == grpc.StatusCode.UNAUTHENTICATED   # its stream was ended
    again = RawAgent(tls.agent_address, "east", ca(tls), client)
    await again.connect([gpu_node("a-0", A100, 8)])
    await until(tls, lambda: tls.hub.clusters.entries["east"].connected)
    with pytest.raises(grpc.aio.AioRpcError):
        await enroll(tls.register_address, ca(tls), "east", credential=old.credential)
    await old.close()
    await again.close()
