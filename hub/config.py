"""Hub configuration: ports, store URL, timings and the placement profile.

Built by ``hub.cli`` from flags and an optional YAML file (``--config``); read by
``hub.server`` when it wires the process together. Timings are seconds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from fuyao.errors import InvalidInput
from fuyao.kubefence import DEFAULT_IMAGE as DEFAULT_WATCHDOG_IMAGE
from fuyao.quantity import parse_duration

DEFAULT_API_PORT = 8848
DEFAULT_AGENT_PORT = 8849
DEFAULT_HEALTH_PORT = 8851
DEFAULT_REGISTER_PORT = 8850
AGENT_RECEIVE_LIMIT = 64 * 1024 * 1024    # what a fuyao-agent accepts in one message


@dataclass(frozen=True)
class Timings:
    """How fast the hub notices trouble and acts on it."""

    heartbeat_interval: float = 2.0   # what agents are expected to send (informational)
    unknown_after: float = 10.0       # no heartbeat for this long: Ready -> Unknown
    not_ready_after: float = 40.0     # no heartbeat for this long: Unknown -> NotReady
    eviction_timeout: float = 30.0    # after NotReady this long, its tasks are re-placed
    unschedulable_timeout: float = 60.0  # member says Unschedulable this long: re-place elsewhere
    placement_interval: float = 1.0   # placement cycle at least this often
    monitor_interval: float = 1.0     # health monitor tick
    member_lease: float = 30.0        # members stop restartable copies this long after news
    failover_margin: float = 10.0     # re-place only after member_lease + this of silence
    eviction_rate: float = 1000.0     # tasks/s re-placed per lost cluster (a rate, not seconds)
    capacity_sample_interval: float = 60.0   # capacity history: one sample this often
    capacity_raw_retention: float = 6 * 3600.0   # samples kept as taken this long...
    capacity_bucket: float = 600.0           # ...then averaged into buckets this wide
    capacity_retention: float = 7 * 86400.0  # and dropped after this long


@dataclass(frozen=True)
class HubConfig:
    """Everything ``fuyao-hub serve`` needs to start."""

    home: Path
    db_url: str | None = None
    redis_url: str | None = None      # task and cluster events on a Redis stream (optional)
    host: str = "127.0.0.1"
    api_port: int = DEFAULT_API_PORT
    agent_port: int = DEFAULT_AGENT_PORT
    health_port: int = DEFAULT_HEALTH_PORT
    advertise: str | None = None      # HOST:PORT agents dial; default host:agent_port
    agent_tls: bool = True            # TLS on the agent port with the hub's own CA
    register_port: int = DEFAULT_REGISTER_PORT   # agents enroll here (server TLS only)
    agent_bearer_port: int = 0        # deprecated bearer-credential agent listener (0: off)
    agent_cert_lifetime: float = 24 * 3600.0   # how long the hub accepts a client certificate
    agent_cert_grace: float = 7 * 24 * 3600.0  # X.509 notAfter this much later (see agentpki)
    headroom_priority: int = 1000     # tasks at or above may use the headroom reserve
    timings: Timings = field(default_factory=Timings)
    profile: dict[str, Any] | None = None   # placement profile (hub.placement.profile format)
    catalog: dict[str, Any] | None = None   # models and aliases added (hub.catalogs)
    queueing: dict[str, Any] | None = None  # backfill/preemption (hub.queueing.QueueingConfig)
    auth: str = "token"               # "token" (bearer tokens) or "none" (loopback only)
    api_rate_limit: float = 50.0      # REST requests per second per token (0: no limit)
    api_rate_burst: int = 200         # ... and how many may come at once
    max_body_bytes: int = 4 * 1024 * 1024   # REST request bodies above this: 413
    retain_ended: float = 7 * 24 * 3600.0   # ended tasks are deleted this long after (0: never)
    secrets_key_file: Path | None = None    # encrypts push members' credentials (hub.push)
    push_watchdog_image: str = DEFAULT_WATCHDOG_IMAGE   # fences push members (hub.push.fencing)
    # One message written on an agent stream is at most this many bytes encoded, well under
    # the agent's 64 MiB receive limit; a PlaceTask larger alone fails its task.
    agent_message_limit: int = 16 * 1024 * 1024

    @property
    def store_url(self) -> str:
        """The store URL: ``--db`` or SQLite under the home directory."""
        return self.db_url or f"sqlite:///{(self.home / 'fuyao.db').resolve()}"

    @property
    def agent_address(self) -> str:
        """The address printed in the agent command of a join."""
        if self.advertise:
            return self.advertise
        return f"{self._dial_host}:{self.agent_port}"

    @property
    def register_address(self) -> str:
        """Where agents enroll: the advertised (or listening) host, ``register_port``."""
        host = self.advertise.rsplit(":", 1)[0] if self.advertise else self._dial_host
        return f"{host}:{self.register_port}"

    @property
    def _dial_host(self) -> str:
        return "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host


def default_home() -> Path:
    """``$FUYAO_HOME`` or ``~/.fuyao``."""
    return Path(os.environ.get("FUYAO_HOME") or Path.home() / ".fuyao")


def prepare_home(config: HubConfig) -> None:
    """Create the home directory readable only by its owner (0700), and the SQLite database
    file 0600 before SQLite opens it (its journal files take the same mode)."""
    config.home.mkdir(parents=True, exist_ok=True)
    os.chmod(config.home, 0o700)
    if config.db_url is None:
        db = config.home / "fuyao.db"
        fd = os.open(db, os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)
        os.chmod(db, 0o600)


def load_config_file(path: Path, base: HubConfig) -> HubConfig:
    """Overlay a YAML config file (keys: the HubConfig fields, ``timings``, ``profile``,
    ``queueing``)."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise InvalidInput(f"config file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidInput(f"config file {path}: expected a mapping at the top level")
    allowed = {f.name for f in fields(HubConfig)} - {"home"}
    unknown = set(data) - allowed
    if unknown:
        raise InvalidInput(f"config file {path}: unknown keys {sorted(unknown)}")
    timings = base.timings
    if "timings" in data:
        raw = data.pop("timings") or {}
        known = {f.name for f in fields(Timings)}
        if not isinstance(raw, dict) or set(raw) - known:
            raise InvalidInput(f"config file {path}: timings keys must be among {sorted(known)}")
        timings = replace(timings, **{k: parse_duration(v) for k, v in raw.items()})
        if min(timings.member_lease, timings.eviction_rate) <= 0 or timings.failover_margin < 0:
            raise InvalidInput(f"config file {path}: member_lease and eviction_rate must be "
                               "positive, failover_margin not negative")
    for key in ("retain_ended", "agent_cert_lifetime", "agent_cert_grace"):
        if key in data:
            data[key] = parse_duration(data[key])
    try:
        config = replace(base, timings=timings, **data)
    except TypeError as exc:
        raise InvalidInput(f"config file {path}: {exc}") from exc
    check_config(config, f"config file {path}")
    return config


def check_config(config: HubConfig, where: str = "configuration") -> None:
    """Refuse settings that contradict each other or are out of range."""
    t = config.timings
    problems = [f"timings.{f.name} must be a number of seconds from 0 to 10^7"
                for f in fields(Timings)
                if not isinstance(getattr(t, f.name), (int, float))
                or not 0 <= getattr(t, f.name) < 10 ** 7]
    if not problems and t.not_ready_after < t.unknown_after:
        problems.append(f"timings.not_ready_after ({t.not_ready_after:g}s) must not be shorter "
                        f"than timings.unknown_after ({t.unknown_after:g}s): a cluster is "
                        "Unknown before it is NotReady")
    if not 1024 <= config.max_body_bytes <= 1024 ** 3:
        problems.append("max_body_bytes must be between 1024 and 1073741824")
    if config.api_rate_limit < 0 or config.api_rate_burst < 1:
        problems.append("api_rate_limit must be >= 0 and api_rate_burst >= 1")
    if not 1024 <= config.agent_message_limit <= AGENT_RECEIVE_LIMIT // 2:
        problems.append(f"agent_message_limit must be between 1024 and "
                        f"{AGENT_RECEIVE_LIMIT // 2} bytes (half the agent's receive limit)")
    if not 1 <= config.agent_cert_lifetime <= 366 * 86400 or not (
            0 <= config.agent_cert_grace <= 366 * 86400):
        problems.append("agent_cert_lifetime must be from 1 s to 366 days, agent_cert_grace "
                        "from 0 to 366 days")
    if config.retain_ended < 0:
        problems.append("retain_ended must not be negative")
    if problems:
        raise InvalidInput(f"{where}: " + "; ".join(problems))
