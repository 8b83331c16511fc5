"""One agent CA for every hub replica on a database, kept in the store (``ha_pki``).

Called by ``Hub.start`` before ``hub.pki.ensure_pki``. Agents verify the hub with one CA
certificate (``--ca-cert``) whichever replica they dial, so the replicas must sign their
serving certificates with the same CA. The first hub to start on a database stores its CA
(created under its home if it has none); every later one copies it into its home and
re-issues its serving certificate if the CA changed. The CA key thus lives in the database
as it does in the home directory: protect both alike (see ``docs/ha.md``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from cryptography.hazmat.primitives import serialization
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from fuyao.errors import Transient
from hub.ha.tables import PKI
from hub.pki import load_or_create_ca, write_private
from hub.store.engine import WRITE_OPTION

log = logging.getLogger(__name__)
_SERVER_FILES = ("agent-server.key", "agent-server.crt", "agent-server.names.json")


def share_ca(engine: Engine, home: Path) -> None:
    """Make ``<home>/pki/ca.*`` the CA stored in the database, storing ours if none is."""
    pki = home / "pki"
    pki.mkdir(parents=True, exist_ok=True)
    try:
        stored = _stored(engine)
        if stored is None:
            key, cert = load_or_create_ca(pki)
            key_pem = key.private_bytes(serialization.Encoding.PEM,
                                        serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()).decode()
            cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
            try:
                with engine.connect() as conn:
                    conn.execution_options(**{WRITE_OPTION: True})
                    with conn.begin():
                        conn.execute(sa.insert(PKI).values(id=1, ca_cert=cert_pem,
                                                           ca_key=key_pem,
                                                           created_at=datetime.now(UTC)))
                return
            except IntegrityError:
                stored = _stored(engine)     # another replica stored its CA first
                assert stored is not None
    except SQLAlchemyError as exc:
        raise Transient(f"cannot read or store the shared agent CA: {exc}") from exc
    cert_pem, key_pem = stored
    crt_path = pki / "ca.crt"
    if crt_path.exists() and crt_path.read_text() == cert_pem:
        return
    log.info("using the agent CA stored in the database (shared by every hub replica)")
    write_private(pki / "ca.key", key_pem.encode())
    crt_path.write_text(cert_pem)
    for name in _SERVER_FILES:      # signed by another CA: issue it again
        (pki / name).unlink(missing_ok=True)


def _stored(engine: Engine) -> tuple[str, str] | None:
    with engine.connect() as conn:
        row = conn.execute(sa.select(PKI.c.ca_cert, PKI.c.ca_key).where(PKI.c.id == 1)).first()
    return None if row is None else (str(row.ca_cert), str(row.ca_key))
