"""Agent configuration: one YAML file plus `RAGDRIFT_...` environment overrides.

Every key is validated at start-up, and an error names the bad key by its
dotted path. Environment variables address nested keys with a double
underscore: `RAGDRIFT_KAFKA__BOOTSTRAP_SERVERS=broker:9092`. Secrets never sit
in the file: any `kafka.client` key may instead be given as `<key>_file`
(a path whose content, one line, is read) or through the environment. No
error, repr or printout shows a secret: the value of a key named like one
(agent/io/secrets.py), the salt, or the credentials of a URL.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent.core.config import LABEL_DIMENSIONS, PIPELINE_VERSION, CoreConfig
from agent.core.labels import OTHER
from agent.core.pipelines import NO_VERSION
from agent.io.kafka.options import CONFLUENT, KAFKA_PYTHON, LIBRARIES, check_librdkafka, check_options
from agent.io.secrets import MASK, SecretError, one_line, redact_url, secret_name
from agent.io.settings import checks
from agent.io.settings.drift import DriftSettings, check_drift
from agent.io.settings.judgment import JudgmentSettings, check_judgment
from agent.io.settings.live_gate import LiveGateSettings, check_live_gate

ENV_PREFIX = "RAGDRIFT_"


class ConfigError(ValueError):
    """A configuration problem, naming the key."""


@dataclass(frozen=True, kw_only=True)
class KafkaSettings:
    bootstrap_servers: str = "localhost:9092"
    topics: list[str] = field(default_factory=lambda: ["retrieval.v1"])
    group_id: str = "ragdrift"
    dead_letter_topic: str = "retrieval.v1.dlq"
    auto_offset_reset: str = "earliest"
    max_message_bytes: int = 1 << 20
    poll_timeout_ms: int = 500
    max_poll_records: int = 2000
    session_timeout_ms: int = 10000
    heartbeat_interval_ms: int = 3000
    # How often the log end of each owned partition is asked for: lag stays
    # true while consumption is paused, and a failed answer marks the broker
    # unreachable (ragdrift_kafka_unreachable_seconds).
    probe_interval_seconds: float = 5.0
    # The client library: kafka-python, or confluent-kafka (librdkafka, the
    # `confluent` extra). The settings below take the chosen library's names.
    library: str = KAFKA_PYTHON
    # Passed through to the consumer and producer as they are: kafka-python's
    # security_protocol, sasl_mechanism, ssl_cafile, ...; librdkafka's
    # security.protocol, sasl.mechanism, ssl.ca.location, ...
    client: dict[str, Any] = field(default_factory=dict)
    # Passed to one client only, after `client` (agent/io/kafka/options.py).
    consumer: dict[str, Any] = field(default_factory=dict)  # fetch_max_bytes, isolation_level, ...
    producer: dict[str, Any] = field(default_factory=dict)  # compression_type, ...


@dataclass(frozen=True)
class StoreSettings:
    url: str = "sqlite:///ragdrift-state.db"
    schema: str | None = None
    checkpoint_interval_seconds: float = 5.0


@dataclass(frozen=True)
class TlsSettings:
    cert_file: str | None = None
    key_file: str | None = None


@dataclass(frozen=True, kw_only=True)
class MetricsSettings:
    address: str = "0.0.0.0"
    port: int = 9108
    top_n: int = 50
    snapshot_interval_seconds: float = 1.0
    ready_max_lag: int = 100000
    stalled_after_seconds: float = 60.0
    score_buckets: dict[str, list[float]] = field(default_factory=dict)
    tls: TlsSettings = field(default_factory=TlsSettings)


@dataclass(frozen=True, kw_only=True)
class WindowSettings:
    windows: dict[str, int] = field(default_factory=lambda: {"5m": 300, "1h": 3600, "24h": 86400})
    lateness_seconds: int = 300
    max_future_seconds: int = 3600
    max_label_values: int = 200
    labels: dict[str, list[str]] = field(default_factory=dict)
    # A `pipeline_version` label on every family with an app label (off: the output is as without it).
    by_pipeline_version: bool = False
    max_pipeline_versions: int = 4
    pipeline_version_idle_seconds: int = 900  # a version without an event for this long gives its place up
    vocabulary_bits: int = 1 << 20
    vocabulary_hashes: int = 7


@dataclass(frozen=True)
class LogSettings:
    format: str = "auto"  # auto: readable on a terminal, JSON otherwise
    level: str = "INFO"


@dataclass(frozen=True, repr=False, kw_only=True)
class Settings:
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    windows: WindowSettings = field(default_factory=WindowSettings)
    logging: LogSettings = field(default_factory=LogSettings)
    judgment: JudgmentSettings = field(default_factory=JudgmentSettings)
    drift: DriftSettings = field(default_factory=DriftSettings)
    live_gate: LiveGateSettings = field(default_factory=LiveGateSettings)

    def redacted(self) -> dict:
        """The settings as plain data with secrets masked, for printing."""
        doc = dataclasses.asdict(self)
        for section in ("client", "consumer", "producer"):
            doc["kafka"][section] = {k: (MASK if secret_name(k) else v) for k, v in doc["kafka"][section].items()}
        doc["judgment"]["salt"] = MASK if self.judgment.salt else ""
        doc["store"]["url"] = redact_url(self.store.url)
        for section in ("resolver", "label_studio"):
            if doc["judgment"][section]["url"]:
                doc["judgment"][section]["url"] = redact_url(doc["judgment"][section]["url"])
        return doc

    def __repr__(self) -> str:
        return f"Settings({self.redacted()!r})"

    def core(self) -> CoreConfig:
        """The slice of the settings the pure core sees."""
        w = self.windows
        by_app = {k: tuple(v) for k, v in self.metrics.score_buckets.items() if k != "default"}
        buckets = {"score": tuple(self.metrics.score_buckets["default"])} if "default" in self.metrics.score_buckets else {}
        return CoreConfig(
            windows=tuple(w.windows.items()),
            lateness_seconds=w.lateness_seconds,
            max_future_seconds=w.max_future_seconds,
            label_values={k: tuple(v) for k, v in w.labels.items()},
            max_label_values=w.max_label_values,
            by_pipeline_version=w.by_pipeline_version,
            max_pipeline_versions=w.max_pipeline_versions,
            pipeline_version_idle_seconds=w.pipeline_version_idle_seconds,
            buckets=buckets,
            score_buckets_by_app=by_app,
            vocabulary_bits=w.vocabulary_bits,
            vocabulary_hashes=w.vocabulary_hashes,
        )


def load(path: str | os.PathLike | None = None, environ: dict[str, str] | None = None) -> Settings:
    """Read, override from the environment, resolve secret files, validate."""
    raw: dict = {}
    if path is not None:
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
        try:
            raw = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
        except RecursionError:
            raise ConfigError(f"config file {path} is nested too deeply to read") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"config file {path}: top level must be a mapping")
    _apply_env(raw, os.environ if environ is None else environ)
    client = raw.get("kafka", {}).get("client") if isinstance(raw.get("kafka"), dict) else None
    if isinstance(client, dict):
        _read_secret_files(client)
    settings = _build(Settings, raw, "")
    _check(settings)
    return settings


class _EnvText(str):
    """A value from the environment, still text: typed when its key's type is known."""

    variable: str


def _apply_env(raw: dict, environ: typing.Mapping[str, str]) -> None:
    # Only SECTION__KEY names are configuration, so the RAGDRIFT_PORT-style
    # variables Kubernetes makes for a Service named ragdrift are left alone.
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name[len(ENV_PREFIX):]:
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX):].split("__")]
        node = raw
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{name}: {'.'.join(path)} does not name a nested key")
        text = _EnvText(value)
        text.variable = name
        node[path[-1]] = text


def _from_env(text: _EnvText, hint: Any, where: str) -> Any:
    """Strings stay verbatim (secrets above all); other types are read as YAML."""
    if hint is str or (hint is Any and _secret_key(where)):
        return str(text)
    try:
        return yaml.safe_load(text) if text else str(text)
    except yaml.YAMLError:
        raise ConfigError(f"{where}: {text.variable} is not a valid value") from None


def _secret_key(key: str) -> bool:
    return secret_name(key.rsplit(".", 1)[-1])


def _read_secret_files(client: dict) -> None:
    # The clients' own path options (kafka-python's ssl_cafile, librdkafka's
    # ssl.ca.location, ...) do not end in "_file", so they pass through as paths.
    for key in [k for k in client if k.endswith("_file")]:
        target = key[: -len("_file")]
        try:
            client[target] = one_line(Path(client.pop(key)).read_bytes(), "the secret file")
        except OSError as exc:
            raise ConfigError(f"kafka.client.{key}: cannot read secret file: {exc.strerror}") from None
        except SecretError as exc:
            raise ConfigError(f"kafka.client.{key}: {exc}") from None


def _build(cls: Any, raw: Any, where: str):  # cls: a dataclass
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where or 'config'}: expected a mapping")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        key = f"{where}.{unknown[0]}" if where else unknown[0]
        raise ConfigError(f"{key}: unknown key (known: {', '.join(sorted(fields))})")
    hints = typing.get_type_hints(cls)
    values = {name: _coerce(hints[name], raw[name], f"{where}.{name}" if where else name) for name in raw}
    return cls(**values)


def _coerce(hint: Any, value: Any, where: str) -> Any:
    if isinstance(value, _EnvText):
        plain = [a for a in typing.get_args(hint) if a is not type(None)]
        value = _from_env(value, plain[0] if typing.get_origin(hint) in (typing.Union, types.UnionType) else hint, where)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, where)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        return _coerce(next(a for a in args if a is not type(None)), value, where)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list")
        return [_coerce(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping")
        return {str(k): _coerce(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if hint is Any:
        return value
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > sys.float_info.max:
            raise ConfigError(f"{where}: must be a finite number")
        return float(value)
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        shown = "" if _secret_key(where) else f" {value!r}"
        raise ConfigError(f"{where}: expected {hint.__name__}, got {type(value).__name__}{shown}"
                          + (" (quote it in YAML)" if hint is str else ""))
    return value


def _encoded_credentials(url: str) -> bool:
    """Whether the URL's userinfo is unambiguous: one "@", no "/" before it.

    SQLAlchemy would take the rest of a password with a raw "@" for the host
    and show it in its errors."""
    before_query = url.partition("://")[2].partition("?")[0]
    userinfo, at, _ = before_query.rpartition("@")
    return not at or ("@" not in userinfo and "/" not in userinfo)


def _check(s: Settings) -> None:
    def need(ok: bool, key: str, why: str) -> None:
        if not ok:
            raise ConfigError(f"{key}: {why}")

    for key, value in checks.numbers(s):  # NaN passes every comparison, infinity most: none is a valid setting
        need(isinstance(value, int) or math.isfinite(value), key, "must be a finite number")
        _within(key, value, checks.longest(key), need)
    for name, seconds in s.windows.windows.items():
        _within(f"windows.windows.{name}", seconds, checks.LONGEST["_seconds"], need)
    need(bool(s.kafka.bootstrap_servers.strip()) and all(b.strip() for b in s.kafka.bootstrap_servers.split(",")),
         "kafka.bootstrap_servers", "must be a comma-separated list of host:port")
    need(bool(s.kafka.topics), "kafka.topics", "at least one topic is required")
    for i, name in enumerate(s.kafka.topics):
        need(checks.topic(name), f"kafka.topics[{i}]", "must be a Kafka topic name (1-249 of A-Z a-z 0-9 . _ -)")
    need(checks.topic(s.kafka.dead_letter_topic), "kafka.dead_letter_topic", "must be a Kafka topic name (1-249 of A-Z a-z 0-9 . _ -)")
    need(s.kafka.group_id.strip() != "", "kafka.group_id", "must not be empty")
    need(s.kafka.dead_letter_topic not in s.kafka.topics, "kafka.dead_letter_topic", "must differ from the topics consumed")
    need(s.kafka.auto_offset_reset in ("earliest", "latest"), "kafka.auto_offset_reset", "must be earliest or latest")
    need(s.kafka.max_message_bytes > 0, "kafka.max_message_bytes", "must be > 0")
    need(s.kafka.poll_timeout_ms > 0, "kafka.poll_timeout_ms", "must be > 0")
    need(s.kafka.max_poll_records >= 1, "kafka.max_poll_records", "must be >= 1")
    need(s.kafka.session_timeout_ms > 0, "kafka.session_timeout_ms", "must be > 0")
    need(s.kafka.heartbeat_interval_ms > 0, "kafka.heartbeat_interval_ms", "must be > 0")
    need(s.kafka.probe_interval_seconds > 0, "kafka.probe_interval_seconds", "must be > 0")
    need(s.kafka.heartbeat_interval_ms < s.kafka.session_timeout_ms, "kafka.heartbeat_interval_ms",
         "must be below kafka.session_timeout_ms")
    need(s.kafka.library in LIBRARIES, "kafka.library", f"must be {' or '.join(LIBRARIES)}")
    need(s.kafka.library != CONFLUENT or _installed("confluent_kafka"), "kafka.library",
         "confluent-kafka is not installed: pip install 'ragdrift-agent[confluent]'")
    check_options(s.kafka.library, s.kafka.client, s.kafka.consumer, s.kafka.producer, need)
    if s.kafka.library == CONFLUENT:
        check_librdkafka(s.kafka, need)
    need(s.store.checkpoint_interval_seconds > 0, "store.checkpoint_interval_seconds", "must be > 0")
    need(_encoded_credentials(s.store.url), "store.url",
         'a "@", "/" or "?" in its password must be percent-encoded (%40, %2F, %3F)')
    check_store(s.store, need)
    need(0 <= s.metrics.port < 65536, "metrics.port", "must be a TCP port (0 picks a free one)")
    need(s.metrics.top_n >= 1, "metrics.top_n", "must be >= 1")
    need(s.metrics.snapshot_interval_seconds > 0, "metrics.snapshot_interval_seconds", "must be > 0")
    need(s.metrics.stalled_after_seconds > 0, "metrics.stalled_after_seconds", "must be > 0")
    need(s.metrics.ready_max_lag >= 0, "metrics.ready_max_lag", "must be >= 0")
    need((s.metrics.tls.cert_file is None) == (s.metrics.tls.key_file is None), "metrics.tls", "cert_file and key_file go together")
    for name in ("cert_file", "key_file"):
        value = getattr(s.metrics.tls, name)
        need(value is None or checks.path(value), f"metrics.tls.{name}", "must be a file path")
    need(s.logging.format in ("auto", "json", "text"), "logging.format", "must be auto, json or text")
    need(s.logging.level.upper() in ("DEBUG", "INFO", "WARNING", "ERROR"), "logging.level", "must be DEBUG, INFO, WARNING or ERROR")
    need(s.windows.lateness_seconds >= 0, "windows.lateness_seconds", "must be >= 0")
    need(s.windows.max_future_seconds >= 0, "windows.max_future_seconds", "must be >= 0")
    need(s.windows.max_label_values >= 1, "windows.max_label_values", "must be >= 1")
    # The vocabulary is a Bloom filter of vocabulary_bits / 8 bytes.
    need(s.windows.vocabulary_bits >= 8 and s.windows.vocabulary_bits % 8 == 0, "windows.vocabulary_bits",
         "must be a positive multiple of 8")
    need(s.windows.vocabulary_hashes >= 1, "windows.vocabulary_hashes", "must be >= 1")
    need(s.windows.max_pipeline_versions >= 1, "windows.max_pipeline_versions", "must be >= 1")
    idle = s.windows.pipeline_version_idle_seconds
    need(idle > 0 and idle % 60 == 0, "windows.pipeline_version_idle_seconds", "must be a positive multiple of 60")
    known = (*LABEL_DIMENSIONS, PIPELINE_VERSION)
    for dim in s.windows.labels:
        need(dim in known, f"windows.labels.{dim}", f"unknown label dimension (known: {', '.join(known)})")
    versions = s.windows.labels.get(PIPELINE_VERSION, [])
    for i, version in enumerate(versions):
        need(checks.short_text(version), f"windows.labels.{PIPELINE_VERSION}[{i}]",
             "must be a pipeline version as events send it (1-128 characters, no control characters)")
        need(version not in (NO_VERSION, OTHER), f"windows.labels.{PIPELINE_VERSION}[{i}]",
             f"{version!r} is the label of events without a version or beyond the list")
    need(len(set(versions)) == len(versions), f"windows.labels.{PIPELINE_VERSION}", "lists a version twice")
    for app, bounds in s.metrics.score_buckets.items():
        need(bounds == sorted(set(bounds)), f"metrics.score_buckets.{app}", "bounds must be strictly increasing")
    try:
        s.core()
    except ValueError as exc:
        raise ConfigError(f"windows: {exc}") from None
    check_judgment(s.judgment, need)
    check_drift(s.drift, need)
    check_live_gate(s.live_gate, need)


def _within(key: str, value: float, limit: int | None, need) -> None:
    """A day count or duration no longer than its unit's limit (checks.LONGEST)."""
    need(limit is None or value <= limit, key, f"must be at most {limit}")


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def check_store(store: StoreSettings, need) -> None:
    """The store a run opens: a database URL SQLAlchemy reads, a file for SQLite
    (an in-memory database forgets every checkpoint and no command can read it),
    a schema only where there are schemas."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    scheme = store.url.split(":", 1)[0].split("+")[0]
    need(scheme in ("sqlite", "postgresql"), "store.url", "must be sqlite:///... or postgresql://...")
    try:
        url = make_url(store.url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        need(False, "store.url", "is not a database URL")
    if scheme == "sqlite":
        need(url.database not in (None, "", ":memory:") and not url.host, "store.url",
             "must name a SQLite file: sqlite:///relative/path or sqlite:////absolute/path")
    need(store.schema is None or (scheme == "postgresql" and store.schema.strip() != ""), "store.schema",
         "must be a PostgreSQL schema name (SQLite has no schemas)")
