"""Store methods for who may do what: API tokens, join tokens, agent certificates, audit.

A mixin of ``hub.store.Store`` (kept apart so the store module stays readable); called by
``hub.auth`` (API tokens), ``hub.clusters`` and ``hub.agentpki`` (join tokens, agent
certificates) and by every audited operation. Secrets are never stored: only their hashes.
Audit rows are only ever inserted; nothing here (or anywhere) updates or deletes one.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from fuyao.errors import Conflict, InvalidInput, NotFound
from hub.store import convert
from hub.store.records import (
    AgentCertificateRecord,
    ApiTokenRecord,
    AuditRecord,
    JoinTokenRecord,
)
from hub.store.tables import TABLES, AgentCertificateRow, ApiTokenRow, AuditRow, JoinTokenRow

JOIN_TOKEN_ID_LEN = 12   # characters of the token's hash shown as its id


AUDIT = TABLES["audit_log"]


def audit_values(rec: AuditRecord, at: datetime | None = None) -> dict[str, Any]:
    """The stored columns of one audit record (at ``at``, else now), its fields bounded:
    a Core insert's parameters (``Store.write`` inserts a submit's record so, without the
    ORM's unit of work)."""
    when = datetime.now(UTC) if at is None else convert.utc(at, "at")
    return {"at": when, "actor": rec.actor[:200], "action": rec.action[:100],
            "target": rec.target[:500], "result": rec.result[:2000], "role": rec.role,
            "source": rec.source[:100], "request_id": rec.request_id[:100]}


def audit_row(rec: AuditRecord, at: datetime | None = None) -> AuditRow:
    """The stored row of one audit record (``audit_values``) as the ORM adds it."""
    return AuditRow(**audit_values(rec, at))


def _token_record(row: ApiTokenRow) -> ApiTokenRecord:
    return ApiTokenRecord(
        id=row.id, name=row.name, token_hash=row.token_hash, role=row.role,
        queues=list(row.queues), created_at=convert.must(row.created_at),
        expires_at=convert.aware(row.expires_at), revoked_at=convert.aware(row.revoked_at),
        last_used_at=convert.aware(row.last_used_at),
    )


class IdentityStore:
    """API tokens, join tokens, agent certificates and the audit log."""

    def _read(self, what: str) -> AbstractContextManager[Session]:
        raise NotImplementedError

    def _write(self, what: str) -> AbstractContextManager[Session]:
        raise NotImplementedError

    # ---- API tokens

    def add_api_token(self, rec: ApiTokenRecord) -> None:
        """Store a new token; a revoked token of the same name is replaced, a live one is a
        Conflict."""
        with self._write(f"add api token {rec.name}") as s:
            old = s.exec(select(ApiTokenRow).where(ApiTokenRow.name == rec.name)).first()
            if old is not None:
                if old.revoked_at is None:
                    raise Conflict(f"token {rec.name} already exists: revoke it first, or "
                                   "choose another name")
                s.delete(old)
                s.flush()
            s.add(ApiTokenRow(
                id=rec.id, name=rec.name, token_hash=rec.token_hash, role=rec.role,
                queues=list(rec.queues), created_at=convert.utc(rec.created_at, "created_at"),
                expires_at=convert.utc_or_none(rec.expires_at, "expires_at")))

    def api_token(self, token_id: str) -> ApiTokenRecord | None:
        """The token with this id (the public part of the bearer token), or None."""
        with self._read("get api token") as s:
            row = s.get(ApiTokenRow, token_id)
            return None if row is None else _token_record(row)

    def list_api_tokens(self) -> list[ApiTokenRecord]:
        """Every token (revoked ones too), by name."""
        with self._read("list api tokens") as s:
            rows = s.exec(select(ApiTokenRow).order_by(col(ApiTokenRow.name))).all()
            return [_token_record(r) for r in rows]

    def revoke_api_token(self, name: str, at: datetime) -> ApiTokenRecord:
        """Mark a token revoked (it stays listed); NotFound if no such live token."""
        with self._write(f"revoke api token {name}") as s:
            row = s.exec(select(ApiTokenRow).where(ApiTokenRow.name == name)).first()
            if row is None or row.revoked_at is not None:
                raise NotFound(f"token {name} not found" if row is None
                               else f"token {name} is already revoked")
            row.revoked_at = convert.utc(at, "at")
            s.flush()
            return _token_record(row)

    def touch_api_token(self, token_id: str, at: datetime) -> None:
        """Record a token's last use."""
        with self._write("touch api token") as s:
            row = s.get(ApiTokenRow, token_id)
            if row is not None:
                row.last_used_at = convert.utc(at, "at")

    # ---- join tokens (the hash is the key; its prefix is the id people see)

    def list_join_tokens(self, cluster: str) -> list[JoinTokenRecord]:
        """A cluster's join tokens, oldest first."""
        with self._read(f"list join tokens of {cluster}") as s:
            rows = s.exec(select(JoinTokenRow).where(JoinTokenRow.cluster == cluster)
                          .order_by(col(JoinTokenRow.created_at))).all()
            return [JoinTokenRecord(
                id=r.token_hash[:JOIN_TOKEN_ID_LEN], cluster=r.cluster,
                created_at=convert.must(r.created_at), expires_at=convert.must(r.expires_at),
                used_at=convert.aware(r.used_at)) for r in rows]

    def revoke_join_token(self, cluster: str, token_id: str) -> None:
        """Delete a join token by its id; NotFound if the cluster has no such token."""
        if len(token_id) != JOIN_TOKEN_ID_LEN:
            raise NotFound(f"join token {token_id} not found for cluster {cluster}")
        with self._write(f"revoke join token of {cluster}") as s:
            rows = s.exec(select(JoinTokenRow).where(
                JoinTokenRow.cluster == cluster,
                col(JoinTokenRow.token_hash).startswith(token_id))).all()
            if len(rows) != 1:
                raise NotFound(f"join token {token_id} not found for cluster {cluster}")
            s.delete(rows[0])

    # ---- agent certificates

    def add_agent_certificate(self, serial: str, cluster: str, issued_at: datetime,
                              expires_at: datetime) -> None:
        """Remember a certificate issued to ``cluster``'s agent."""
        with self._write(f"add certificate for {cluster}") as s:
            s.add(AgentCertificateRow(serial=serial, cluster=cluster,
                                      issued_at=convert.utc(issued_at, "issued_at"),
                                      expires_at=convert.utc(expires_at, "expires_at")))

    def revoke_agent_certificates(self, cluster: str, at: datetime) -> int:
        """Revoke every unexpired certificate of ``cluster``; returns how many."""
        when = convert.utc(at, "at")
        table = AgentCertificateRow.__table__   # type: ignore[attr-defined]
        with self._write(f"revoke certificates of {cluster}") as s:
            done = s.connection().execute(
                sa.update(table).where(table.c.cluster == cluster,
                                       table.c.revoked_at.is_(None),
                                       table.c.expires_at > when).values(revoked_at=when))
            return int(done.rowcount)

    def agent_certificate(self, serial: str) -> AgentCertificateRecord | None:
        """The certificate with this serial, if the hub issued it."""
        with self._read("get certificate") as s:
            row = s.get(AgentCertificateRow, serial)
            if row is None:
                return None
            return AgentCertificateRecord(
                serial=row.serial, cluster=row.cluster, issued_at=convert.must(row.issued_at),
                expires_at=convert.must(row.expires_at), revoked_at=convert.aware(row.revoked_at))

    def replace_agent_certificates(self, cluster: str, serial: str, issued_at: datetime,
                                   expires_at: datetime) -> int:
        """A new registration of ``cluster``'s agent: revoke its older certificates and drop
        its bearer credential, then remember the new certificate, in one transaction;
        returns how many certificates were revoked."""
        when = convert.utc(issued_at, "issued_at")
        table = AgentCertificateRow.__table__   # type: ignore[attr-defined]
        credentials = TABLES["cluster_credentials"]
        with self._write(f"replace certificates of {cluster}") as s:
            conn = s.connection()
            done = conn.execute(
                sa.update(table).where(table.c.cluster == cluster, table.c.revoked_at.is_(None),
                                       table.c.expires_at > when).values(revoked_at=when))
            conn.execute(sa.delete(credentials).where(credentials.c.cluster == cluster))
            s.add(AgentCertificateRow(serial=serial, cluster=cluster, issued_at=when,
                                      expires_at=convert.utc(expires_at, "expires_at")))
            return int(done.rowcount)

    def agent_certificate_revoked(self, serial: str) -> bool:
        """True if the hub revoked (or never issued) the certificate with this serial."""
        with self._read("check certificate") as s:
            row = s.get(AgentCertificateRow, serial)
            return row is None or row.revoked_at is not None

    # ---- audit

    def audit(self, actor: str | AuditRecord, action: str = "", target: str = "",
              result: str = "", at: datetime | None = None) -> None:
        """Record one mutation: who (actor) did what (action) to which target, and the result.

        ``actor`` may be a whole ``AuditRecord`` (with role, source address, request id)."""
        rec = actor if isinstance(actor, AuditRecord) else AuditRecord(actor, action, target,
                                                                       result)
        with self._write(f"audit {rec.action}") as s:
            s.add(audit_row(rec, at))

    def audit_log(self, limit: int = 100, *, since: datetime | None = None,
                  actor: str | None = None, action: str | None = None,
                  target: str | None = None) -> list[dict[str, Any]]:
        """The newest ``limit`` audit entries matching the filters, newest first.

        ``action`` matches a whole action or a prefix ending in '.' (``task.``)."""
        if limit < 1:
            raise InvalidInput(f"audit log limit must be at least 1, got {limit}")
        query = select(AuditRow)
        if since is not None:
            query = query.where(AuditRow.at >= convert.utc(since, "since"))
        if actor is not None:
            query = query.where(AuditRow.actor == actor)
        if action is not None:
            query = query.where(col(AuditRow.action).startswith(action) if action.endswith(".")
                                else AuditRow.action == action)
        if target is not None:
            query = query.where(AuditRow.target == target)
        with self._read("read audit log") as s:
            query = query.order_by(col(AuditRow.at).desc(), col(AuditRow.id).desc()).limit(limit)
            return [
                {"id": r.id, "at": convert.must(r.at), "actor": r.actor, "role": r.role,
                 "action": r.action, "target": r.target, "result": r.result,
                 "source": r.source, "request_id": r.request_id}
                for r in s.exec(query).all()
            ]


__all__ = ["JOIN_TOKEN_ID_LEN", "IdentityStore"]
