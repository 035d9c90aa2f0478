"""Settings: defaults, the YAML file, RAGDRIFT_* overrides, secret files and
every validation error naming its key."""

from __future__ import annotations

import dataclasses
import re
import textwrap
import typing
from pathlib import Path

import pytest
import yaml
from kafka import KafkaConsumer, KafkaProducer

from agent.core.calibrated import ServingRule
from agent.core.config import DEFAULT_BUCKETS, CoreConfig
from agent.io.settings.agent import ConfigError, KafkaSettings, Settings, load
from agent.io.settings.judgment import serving_rule


def write(tmp_path: Path, text: str, name: str = "ragdrift.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error(tmp_path: Path, text: str, environ: dict | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load(write(tmp_path, text), environ=environ or {})
    return str(info.value)


# -- defaults and the file ----------------------------------------------------


def test_no_file_and_no_environment_gives_the_defaults():
    settings = load(environ={})
    assert settings == Settings()
    assert settings.kafka.bootstrap_servers == "localhost:9092"
    assert settings.kafka.topics == ["retrieval.v1"]
    assert settings.kafka.dead_letter_topic == "retrieval.v1.dlq"
    assert settings.kafka.auto_offset_reset == "earliest"
    assert settings.kafka.client == {}
    assert settings.store.url.startswith("sqlite:///")
    assert settings.store.schema is None
    assert settings.metrics.port == 9108 and settings.metrics.top_n == 50
    assert settings.metrics.tls.cert_file is None and settings.metrics.tls.key_file is None
    assert settings.windows.windows == {"5m": 300, "1h": 3600, "24h": 86400}
    assert settings.logging.format == "auto"


@pytest.mark.parametrize("text", ["", "# nothing here\n", "kafka:\n", "kafka: {}\nstore:\n"])
def test_empty_file_or_empty_sections_give_the_defaults(tmp_path, text):
    assert load(write(tmp_path, text), environ={}) == Settings()


def test_file_values_are_read_and_typed(tmp_path):
    path = write(tmp_path, """\
        kafka:
          bootstrap_servers: kafka-0:9092,kafka-1:9092
          topics: [retrievals-a, retrievals-b]
          group_id: ragdrift-prod
          dead_letter_topic: retrievals.dlq
          auto_offset_reset: latest
          max_message_bytes: 2048
          client: {security_protocol: SASL_SSL, ssl_check_hostname: false}
        store:
          url: postgresql+psycopg://ragdrift@db/ragdrift
          schema: monitoring
          checkpoint_interval_seconds: 2
        metrics:
          address: 127.0.0.1
          port: 9200
          top_n: 10
          score_buckets:
            default: [0, 0.5, 1]
            support-bot: [-8, -4, 0, 4, 8]
          tls: {cert_file: /tls/tls.crt, key_file: /tls/tls.key}
        windows:
          windows: {10m: 600, 2h: 7200}
          lateness_seconds: 120
          max_label_values: 20
          labels: {app: [hr-assistant, support-bot]}
        logging: {format: json, level: DEBUG}
        """)
    s = load(path, environ={})
    assert s.kafka.bootstrap_servers == "kafka-0:9092,kafka-1:9092"
    assert s.kafka.topics == ["retrievals-a", "retrievals-b"]
    assert s.kafka.group_id == "ragdrift-prod"
    assert s.kafka.auto_offset_reset == "latest"
    assert s.kafka.max_message_bytes == 2048
    assert s.kafka.client == {"security_protocol": "SASL_SSL", "ssl_check_hostname": False}
    assert s.store.url == "postgresql+psycopg://ragdrift@db/ragdrift"
    assert s.store.schema == "monitoring"
    # An int where a float is expected is widened, not refused.
    assert s.store.checkpoint_interval_seconds == 2.0 and isinstance(s.store.checkpoint_interval_seconds, float)
    assert s.metrics.address == "127.0.0.1" and s.metrics.port == 9200 and s.metrics.top_n == 10
    assert s.metrics.score_buckets == {"default": [0.0, 0.5, 1.0], "support-bot": [-8.0, -4.0, 0.0, 4.0, 8.0]}
    assert s.metrics.tls.cert_file == "/tls/tls.crt" and s.metrics.tls.key_file == "/tls/tls.key"
    assert s.windows.windows == {"10m": 600, "2h": 7200}
    assert s.windows.lateness_seconds == 120 and s.windows.max_label_values == 20
    assert s.windows.labels == {"app": ["hr-assistant", "support-bot"]}
    assert s.logging.format == "json" and s.logging.level == "DEBUG"


# -- the environment ---------------------------------------------------------


def test_environment_overrides_the_file_with_double_underscore_nesting(tmp_path):
    path = write(tmp_path, """\
        kafka: {bootstrap_servers: file:9092, group_id: from-file}
        store: {checkpoint_interval_seconds: 5}
        """)
    s = load(path, environ={
        "RAGDRIFT_KAFKA__BOOTSTRAP_SERVERS": "kafka:9092",
        "RAGDRIFT_STORE__URL": "sqlite:////var/lib/ragdrift/state.db",
        "RAGDRIFT_METRICS__TLS__CERT_FILE": "/tls/c.pem",
        "RAGDRIFT_METRICS__TLS__KEY_FILE": "/tls/k.pem",
    })
    assert s.kafka.bootstrap_servers == "kafka:9092"
    assert s.kafka.group_id == "from-file"  # not overridden: the file's value stays
    assert s.store.url == "sqlite:////var/lib/ragdrift/state.db"
    assert s.store.checkpoint_interval_seconds == 5.0
    assert (s.metrics.tls.cert_file, s.metrics.tls.key_file) == ("/tls/c.pem", "/tls/k.pem")


def test_environment_values_are_typed_as_yaml():
    s = load(environ={
        "RAGDRIFT_METRICS__PORT": "9300",
        "RAGDRIFT_STORE__CHECKPOINT_INTERVAL_SECONDS": "0.25",
        "RAGDRIFT_KAFKA__TOPICS": "[a, b]",
        "RAGDRIFT_WINDOWS__WINDOWS": "{1m: 60, 1h: 3600}",
        "RAGDRIFT_KAFKA__CLIENT__SSL_CHECK_HOSTNAME": "false",
    })
    assert s.metrics.port == 9300
    assert s.store.checkpoint_interval_seconds == 0.25
    assert s.kafka.topics == ["a", "b"]
    assert s.windows.windows == {"1m": 60, "1h": 3600}
    assert s.kafka.client == {"ssl_check_hostname": False}


def test_other_variables_are_ignored():
    s = load(environ={"PATH": "/bin", "KAFKA__GROUP_ID": "x", "RAGDRIFT__GROUP_ID": "x", "ragdrift_kafka__group_id": "x"})
    assert s == Settings()


def test_environment_type_errors_name_the_dotted_key():
    with pytest.raises(ConfigError, match=r"^metrics\.port: expected int"):
        load(environ={"RAGDRIFT_METRICS__PORT": "ninety"})
    with pytest.raises(ConfigError, match=r"^kafka\.nope: unknown key"):
        load(environ={"RAGDRIFT_KAFKA__NOPE": "1"})


def test_environment_cannot_nest_under_a_scalar(tmp_path):
    message = error(tmp_path, "kafka: 5\n", environ={"RAGDRIFT_KAFKA__GROUP_ID": "g"})
    assert message.startswith("RAGDRIFT_KAFKA__GROUP_ID: kafka.group_id")


def test_environment_value_that_is_not_valid_yaml_is_a_config_error():
    # A typed value that does not parse is a configuration problem that names
    # the key and the variable, not a yaml traceback.
    with pytest.raises(ConfigError, match=r"^kafka\.topics: RAGDRIFT_KAFKA__TOPICS is not a valid value"):
        load(environ={"RAGDRIFT_KAFKA__TOPICS": "[abc"})


def test_environment_password_that_is_not_valid_yaml_is_kept_verbatim():
    settings = load(environ={"RAGDRIFT_KAFKA__CLIENT__SASL_PLAIN_PASSWORD": "[abc"})
    assert settings.kafka.client["sasl_plain_password"] == "[abc"


@pytest.mark.parametrize("secret", ["12345", "yes", "hunter2 #2"])
def test_environment_secrets_stay_verbatim_strings(secret):
    # operations.md sends secrets through RAGDRIFT_KAFKA__CLIENT__... variables;
    # kafka-python needs the password exactly as given, as a string.
    s = load(environ={"RAGDRIFT_KAFKA__CLIENT__SASL_PLAIN_PASSWORD": secret})
    assert s.kafka.client == {"sasl_plain_password": secret}


def test_environment_string_setting_accepts_a_numeric_looking_value():
    s = load(environ={"RAGDRIFT_KAFKA__GROUP_ID": "123"})
    assert s.kafka.group_id == "123"


# -- secret files ------------------------------------------------------------


def test_client_key_file_reads_a_secret_file(tmp_path):
    secret = tmp_path / "kafka-password"
    secret.write_text("s3cret-value\n")
    path = write(tmp_path, f"""\
        kafka:
          client:
            sasl_plain_username: ragdrift
            sasl_plain_password_file: {secret}
            ssl_cafile: /etc/kafka/ca.pem
            ssl_certfile: /etc/kafka/client.pem
        """)
    s = load(path, environ={})
    assert s.kafka.client == {
        "sasl_plain_username": "ragdrift",
        "sasl_plain_password": "s3cret-value",  # trailing newline stripped
        "ssl_cafile": "/etc/kafka/ca.pem",  # paths kafka-python reads itself
        "ssl_certfile": "/etc/kafka/client.pem",
    }


def test_secret_file_path_from_the_environment(tmp_path):
    secret = tmp_path / "pw"
    secret.write_text("12345")
    s = load(environ={"RAGDRIFT_KAFKA__CLIENT__SASL_PLAIN_PASSWORD_FILE": str(secret)})
    assert s.kafka.client == {"sasl_plain_password": "12345"}


def test_missing_secret_file_names_the_key(tmp_path):
    message = error(tmp_path, f"kafka: {{client: {{sasl_plain_password_file: {tmp_path}/absent}}}}\n")
    assert message.startswith("kafka.client.sasl_plain_password_file: cannot read secret file")


@pytest.mark.parametrize("content", ["s3cret-value\nsecond-line\n", "s3cret-value\tx", "\n\n"])
def test_a_secret_file_is_one_line_and_an_error_never_shows_it(tmp_path, content):
    secret = tmp_path / "pw"
    secret.write_text(content)
    message = error(tmp_path, f"kafka: {{client: {{sasl_plain_password_file: {secret}}}}}\n")
    assert message.startswith("kafka.client.sasl_plain_password_file: the secret file")
    assert "s3cret" not in message and "second-line" not in message


@pytest.mark.parametrize("salt", ["590227123457", "5902.27", "[590227, 1]", "true"])
def test_a_salt_of_the_wrong_type_is_named_never_shown(tmp_path, salt):
    message = error(tmp_path, f"judgment: {{salt: {salt}}}\n")
    assert message.startswith("judgment.salt: expected str") and "quote it" in message
    assert "590227" not in message and "true" not in message.lower().replace("expected", "")


@pytest.mark.parametrize("url", ["postgresql://ragdrift:pa@ss-7f3a@db/ragdrift", "postgresql://ragdrift:pa/ss-7f3a@db/x"])
def test_a_raw_at_or_slash_in_the_store_password_is_an_error_without_it(tmp_path, url):
    message = error(tmp_path, f"store: {{url: '{url}'}}\n")
    assert message.startswith("store.url: ") and "percent-encoded" in message and "ss-7f3a" not in message


def test_the_settings_repr_masks_its_secrets():
    s = load(environ={"RAGDRIFT_JUDGMENT__SALT": "salt-7f3a-value", "RAGDRIFT_KAFKA__CLIENT__SASL_PLAIN_PASSWORD": "pw-7f3a",
                      "RAGDRIFT_STORE__URL": "postgresql://ragdrift:db-7f3a@db/ragdrift?sslpassword=ssl-7f3a"})
    for shown in (repr(s), repr(s.judgment), str(s)):
        assert "7f3a" not in shown.replace("RAGDRIFT", "")


# -- file errors ---------------------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"cannot read config file .*absent\.yaml"):
        load(tmp_path / "absent.yaml", environ={})


def test_invalid_yaml(tmp_path):
    assert "is not valid YAML" in error(tmp_path, "kafka: [unclosed\n")


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_top_level_must_be_a_mapping(tmp_path, text):
    assert error(tmp_path, text).endswith("top level must be a mapping")


# -- unknown keys and wrong types name the dotted key ------------------------------


@pytest.mark.parametrize(("text", "key"), [
    ("nope: 1\n", "nope"),
    ("kafka: {bootstrap: x}\n", "kafka.bootstrap"),
    ("metrics: {tls: {cert: x}}\n", "metrics.tls.cert"),
    ("windows: {window: {5m: 300}}\n", "windows.window"),
])
def test_unknown_keys_name_the_dotted_key(tmp_path, text, key):
    message = error(tmp_path, text)
    assert message.startswith(f"{key}: unknown key")


@pytest.mark.parametrize(("text", "key"), [
    ("kafka: 5\n", "kafka"),
    ("kafka: {topics: retrieval.v1}\n", "kafka.topics"),
    ("kafka: {topics: [1]}\n", r"kafka.topics[0]"),
    ("kafka: {max_message_bytes: big}\n", "kafka.max_message_bytes"),
    ("kafka: {client: [a]}\n", "kafka.client"),
    ("metrics: {port: '9108'}\n", "metrics.port"),
    ("metrics: {port: true}\n", "metrics.port"),
    ("metrics: {tls: x}\n", "metrics.tls"),
    ("metrics: {score_buckets: {default: [0, a]}}\n", "metrics.score_buckets.default[1]"),
    ("metrics: {score_buckets: {support-bot: 3}}\n", "metrics.score_buckets.support-bot"),
    ("store: {checkpoint_interval_seconds: soon}\n", "store.checkpoint_interval_seconds"),
    ("windows: {windows: {5m: five}}\n", "windows.windows.5m"),
    ("windows: {labels: {app: hr}}\n", "windows.labels.app"),
])
def test_wrong_types_name_the_dotted_key(tmp_path, text, key):
    message = error(tmp_path, text)
    assert message.startswith(f"{key}: expected"), message


# -- cross-field checks ------------------------------------------------------------


@pytest.mark.parametrize(("text", "key"), [
    ("kafka: {topics: [a, b], dead_letter_topic: b}\n", "kafka.dead_letter_topic"),
    ("kafka: {topics: []}\n", "kafka.topics"),
    ("kafka: {auto_offset_reset: newest}\n", "kafka.auto_offset_reset"),
    ("kafka: {max_message_bytes: 0}\n", "kafka.max_message_bytes"),
    ("store: {url: 'mysql://db/x'}\n", "store.url"),
    ("store: {checkpoint_interval_seconds: 0}\n", "store.checkpoint_interval_seconds"),
    ("metrics: {port: 70000}\n", "metrics.port"),
    ("metrics: {top_n: 0}\n", "metrics.top_n"),
    ("metrics: {tls: {cert_file: /tls/tls.crt}}\n", "metrics.tls"),
    ("metrics: {tls: {key_file: /tls/tls.key}}\n", "metrics.tls"),
    ("metrics: {score_buckets: {default: [0, 0.5, 0.2]}}\n", "metrics.score_buckets.default"),
    ("metrics: {score_buckets: {support-bot: [1, 1, 2]}}\n", "metrics.score_buckets.support-bot"),
    ("logging: {format: xml}\n", "logging.format"),
    ("logging: {level: LOUD}\n", "logging.level"),
    ("windows: {labels: {tenant: [a]}}\n", "windows.labels.tenant"),
    ("judgment: {budget: 0}\n", "judgment.budget"),
    ("judgment: {budgets: {'app|lexical': 0}}\n", "judgment.budgets.app|lexical"),
    ("judgment: {weights: {clicks: 1}}\n", "judgment.weights.clicks"),
    ("judgment: {weights: {stale: -1}}\n", "judgment.weights.stale"),
    ("judgment: {thresholds: {top2_low: 0.1}}\n", "judgment.thresholds.top2_low"),
    ("judgment: {thresholds: {rerank_shift: 0}}\n", "judgment.thresholds.rerank_shift"),
    ("judgment: {holdout_share: 1}\n", "judgment.holdout_share"),
    ("judgment: {double_judged_share: 1.5}\n", "judgment.double_judged_share"),
    ("judgment: {schedule: 'every monday'}\n", "judgment.schedule"),
    ("judgment: {schedule: '0 25 * * mon'}\n", "judgment.schedule"),
    ("judgment: {resolver: {kind: ldap}}\n", "judgment.resolver.kind"),
    ("judgment: {resolver: {kind: file}}\n", "judgment.resolver.path"),
    ("judgment: {resolver: {kind: command}}\n", "judgment.resolver.command"),
    ("judgment: {resolver: {kind: http}}\n", "judgment.resolver.url"),
    ("judgment: {calibration: {max_ece: 0}}\n", "judgment.calibration.max_ece"),
    ("judgment: {calibration: {folds: 1}}\n", "judgment.calibration.folds"),
    ("judgment: {calibration: {folds: 10, min_labels: 5}}\n", "judgment.calibration.min_labels"),
    ("judgment: {calibration: {pool_batches: 0}}\n", "judgment.calibration.pool_batches"),
    ("judgment: {calibration: {refresh_seconds: 0}}\n", "judgment.calibration.refresh_seconds"),
])
def test_cross_field_checks_name_the_key(tmp_path, text, key):
    assert error(tmp_path, text).startswith(f"{key}: ")


# What a run, a batch build or a command would refuse when it uses the value;
# check-config refuses it first, naming the key.
AS_USED = [
    ("kafka: {bootstrap_servers: ''}\n", "kafka.bootstrap_servers"),
    ("kafka: {bootstrap_servers: 'kafka-0:9092,'}\n", "kafka.bootstrap_servers"),
    ("kafka: {topics: ['']}\n", "kafka.topics[0]"),
    ("kafka: {topics: [retrieval.v1, 'bad topic']}\n", "kafka.topics[1]"),
    ("kafka: {dead_letter_topic: ''}\n", "kafka.dead_letter_topic"),
    ("kafka: {group_id: ' '}\n", "kafka.group_id"),
    ("store: {url: 'sqlite://'}\n", "store.url"),
    ("store: {url: 'sqlite:///:memory:'}\n", "store.url"),
    ("store: {url: 'sqlite://host/state.db'}\n", "store.url"),
    ("store: {url: 'postgresql+psycopg://h:port/db'}\n", "store.url"),
    ("store: {schema: monitoring}\n", "store.schema"),
    ("store: {url: 'postgresql+psycopg://db/ragdrift', schema: ''}\n", "store.schema"),
    ("metrics: {tls: {cert_file: '', key_file: /tls/tls.key}}\n", "metrics.tls.cert_file"),
    ("judgment: {export_dir: ''}\n", "judgment.export_dir"),
    ("judgment: {export_dir: '  '}\n", "judgment.export_dir"),
    ("judgment: {thresholds: {rerank_shift: 2.5}}\n", "judgment.thresholds.rerank_shift"),
    ("judgment: {thresholds: {new_terms_min: 0}}\n", "judgment.thresholds.new_terms_min"),
    ("judgment: {thresholds: {rare_share: 1.5}}\n", "judgment.thresholds.rare_share"),
    ("judgment: {resolver: {timeout_seconds: -1}}\n", "judgment.resolver.timeout_seconds"),
    ("judgment: {resolver: {timeout_seconds: 0}}\n", "judgment.resolver.timeout_seconds"),
    ("judgment: {resolver: {timeout_seconds: 1.0e+300}}\n", "judgment.resolver.timeout_seconds"),
    ("judgment: {calibration: {refresh_seconds: 1.0e+300}}\n", "judgment.calibration.refresh_seconds"),
    ("kafka: {probe_interval_seconds: 1.0e+300}\n", "kafka.probe_interval_seconds"),
    ("judgment: {resolver: {kind: file, path: ''}}\n", "judgment.resolver.path"),
    ("judgment: {resolver: {kind: command, command: ['']}}\n", "judgment.resolver.command"),
    ("judgment: {resolver: {kind: http, url: 'file:///etc/passwd'}}\n", "judgment.resolver.url"),
    ("judgment: {resolver: {kind: http, url: 'http://'}}\n", "judgment.resolver.url"),
    ("judgment: {label_studio: {url: 'label-studio:8080'}}\n", "judgment.label_studio.url"),
    ("judgment: {label_studio: {token_file: ''}}\n", "judgment.label_studio.token_file"),
    ("judgment: {label_studio: {token_env: ''}}\n", "judgment.label_studio.token_env"),
    ("judgment: {label_studio: {token_env: 'MY TOKEN'}}\n", "judgment.label_studio.token_env"),
    ("judgment: {calibration: {threshold: 0}}\n", "judgment.calibration.threshold"),
    ("judgment: {calibration: {threshold: 4}}\n", "judgment.calibration.threshold"),
    ("drift: {grids: {app: {top1_score: {lo: 0, hi: 1, cells: 10000000000}}}}\n", "drift.grids.app.top1_score.cells"),
]


@pytest.mark.parametrize(("text", "key"), AS_USED)
def test_settings_are_checked_as_they_are_used(tmp_path, text, key):
    assert error(tmp_path, text).startswith(f"{key}: ")


def _float_keys(value, where: str = "") -> list[str]:
    """The dotted key of every float setting, with an entry in each float mapping."""
    if dataclasses.is_dataclass(value):
        return [k for f in dataclasses.fields(value)
                for k in _float_keys(getattr(value, f.name), f"{where}.{f.name}" if where else f.name)]
    return [where] if isinstance(value, float) else []


EVERY_FLOAT = [*_float_keys(Settings()), "judgment.weights.stale", "judgment.thresholds.top1_low",
               "judgment.thresholds.rerank_shift", "metrics.score_buckets.default", "drift.grids.app.top1_score.lo"]


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
@pytest.mark.parametrize("key", EVERY_FLOAT)
def test_every_float_setting_must_be_finite(tmp_path, key, value):
    *parents, name = key.split(".")
    if key == "metrics.score_buckets.default":
        doc: dict = {name: [0.0, yaml.safe_load(value)]}
    else:
        doc = {name: yaml.safe_load(value)}
    for parent in reversed(parents):
        doc = {parent: doc}
    message = error(tmp_path, yaml.safe_dump(doc))
    assert message.startswith(key), message


def _duration_keys(value, where: str = "") -> list[str]:
    """The dotted key of every day count and duration setting: named by its unit."""
    if dataclasses.is_dataclass(value):
        return [k for f in dataclasses.fields(value)
                for k in _duration_keys(getattr(value, f.name), f"{where}.{f.name}" if where else f.name)]
    return [where] if where.endswith(("_days", "_seconds", "_ms")) else []


LONGEST = {"_days": 3650, "_seconds": 3650 * 86400, "_ms": 2**31 - 1}
EVERY_DURATION = [*_duration_keys(Settings()), "windows.windows.24h", "kafka.client.request_timeout_ms"]


def _nested(key: str, value) -> str:
    *parents, name = key.split(".")
    doc: dict = {name: value}
    for parent in reversed(parents):
        doc = {parent: doc}
    return yaml.safe_dump(doc)


@pytest.mark.parametrize("key", EVERY_DURATION)
def test_every_day_count_and_duration_has_an_upper_bound(tmp_path, key):
    """Beyond it, date arithmetic overflows (a retention of 900000 days crashed the first checkpoint),
    a thread cannot wait, or Kafka's 32-bit milliseconds wrap."""
    unit = next(u for u in LONGEST if key.endswith(u)) if key != "windows.windows.24h" else "_seconds"
    assert error(tmp_path, _nested(key, LONGEST[unit] + 1)) == f"{key}: must be at most {LONGEST[unit]}"
    assert error(tmp_path, _nested(key, 10**400)).startswith(f"{key}: must be ")  # beyond a float, too


def test_day_counts_and_durations_at_their_bound_are_accepted(tmp_path):
    days = {"window_days": 3650, "retention_days": 3650, "min_days": 3650}
    s = load(write(tmp_path, yaml.safe_dump({
        "live_gate": days, "windows": {"windows": {"long": 3650 * 86400}, "lateness_seconds": 3650 * 86400},
        "kafka": {"poll_timeout_ms": 2**31 - 1}, "store": {"checkpoint_interval_seconds": 3650 * 86400.0}})),
        environ={})
    assert (s.live_gate.retention_days, s.windows.windows["long"], s.kafka.poll_timeout_ms) == \
        (3650, 3650 * 86400, 2**31 - 1)


def test_calibration_settings_load_and_make_the_gate(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("judgment: {calibration: {max_ece: 0.08, min_labels: 300, pool_batches: 4}}\n")
    c = load(path, environ={}).judgment.calibration
    assert (c.max_ece, c.min_labels, c.pool_batches, c.folds, c.threshold) == (0.08, 300, 4, 5, 2)
    assert serving_rule(c) == ServingRule(max_ece=0.08, min_labels=300)


@pytest.mark.parametrize(("text", "word"), [
    ("windows: {windows: {90s: 90}}\n", "90s"),
    ("windows: {windows: {5m: 300, odd: 301}}\n", "odd"),
    ("windows: {windows: {}}\n", "at least one window"),
    ("windows: {lateness_seconds: -1}\n", "lateness_seconds"),
    ("windows: {max_label_values: 0}\n", "max_label_values"),
])
def test_window_checks(tmp_path, text, word):
    message = error(tmp_path, text)
    assert message.startswith("windows") and word in message


@pytest.mark.parametrize(("text", "key"), [
    ("kafka: {poll_timeout_ms: 0}\n", "kafka.poll_timeout_ms"),
    ("kafka: {poll_timeout_ms: -500}\n", "kafka.poll_timeout_ms"),
    ("kafka: {max_poll_records: 0}\n", "kafka.max_poll_records"),
    ("kafka: {session_timeout_ms: 0}\n", "kafka.session_timeout_ms"),
    ("kafka: {heartbeat_interval_ms: 0}\n", "kafka.heartbeat_interval_ms"),
    ("kafka: {heartbeat_interval_ms: -1}\n", "kafka.heartbeat_interval_ms"),
    ("kafka: {session_timeout_ms: 6000, heartbeat_interval_ms: 6000}\n", "kafka.heartbeat_interval_ms"),
    ("kafka: {heartbeat_interval_ms: 20000}\n", "kafka.heartbeat_interval_ms"),  # default session 10 s
    ("metrics: {snapshot_interval_seconds: 0}\n", "metrics.snapshot_interval_seconds"),
    ("metrics: {snapshot_interval_seconds: -1}\n", "metrics.snapshot_interval_seconds"),
    ("metrics: {stalled_after_seconds: 0}\n", "metrics.stalled_after_seconds"),
    ("metrics: {ready_max_lag: -1}\n", "metrics.ready_max_lag"),
    ("windows: {lateness_seconds: -1}\n", "windows.lateness_seconds"),
    ("windows: {max_label_values: 0}\n", "windows.max_label_values"),
    ("windows: {vocabulary_bits: 1001}\n", "windows.vocabulary_bits"),
    ("windows: {vocabulary_bits: 0}\n", "windows.vocabulary_bits"),
    ("windows: {vocabulary_bits: -8}\n", "windows.vocabulary_bits"),
    ("windows: {vocabulary_hashes: 0}\n", "windows.vocabulary_hashes"),
    ("windows: {max_pipeline_versions: 0}\n", "windows.max_pipeline_versions"),
    ("windows: {pipeline_version_idle_seconds: 0}\n", "windows.pipeline_version_idle_seconds"),
    ("windows: {pipeline_version_idle_seconds: 90}\n", "windows.pipeline_version_idle_seconds"),
])
def test_numeric_ranges_name_the_dotted_key(tmp_path, text, key):
    # Caught at start-up (and by check-config), not later inside a Kafka callback.
    message = error(tmp_path, text)
    assert message.startswith(f"{key}: "), message


def test_numeric_range_errors_reach_the_environment_too():
    with pytest.raises(ConfigError, match=r"^windows\.vocabulary_bits: must be a positive multiple of 8"):
        load(environ={"RAGDRIFT_WINDOWS__VOCABULARY_BITS": "1001"})


def test_numeric_range_boundaries_are_accepted(tmp_path):
    s = load(write(tmp_path, """\
        kafka: {poll_timeout_ms: 1, max_poll_records: 1, session_timeout_ms: 2, heartbeat_interval_ms: 1}
        metrics: {snapshot_interval_seconds: 0.1, stalled_after_seconds: 0.5, ready_max_lag: 0}
        windows: {lateness_seconds: 0, max_label_values: 1, vocabulary_bits: 8, vocabulary_hashes: 1}
        """), environ={})
    assert (s.kafka.poll_timeout_ms, s.kafka.max_poll_records) == (1, 1)
    assert (s.kafka.session_timeout_ms, s.kafka.heartbeat_interval_ms) == (2, 1)
    assert s.metrics.snapshot_interval_seconds == 0.1 and s.metrics.stalled_after_seconds == 0.5
    assert s.metrics.ready_max_lag == 0
    assert s.windows.lateness_seconds == 0 and s.windows.max_label_values == 1
    assert (s.windows.vocabulary_bits, s.windows.vocabulary_hashes) == (8, 1)


def test_lowercase_level_is_accepted(tmp_path):
    assert load(write(tmp_path, "logging: {level: info}\n"), environ={}).logging.level == "info"


# -- the core's slice ----------------------------------------------------------------


def test_core_defaults_equal_the_core_defaults():
    core = Settings().core()
    assert core == CoreConfig()
    assert core.buckets_for("score", "any-app").bounds == DEFAULT_BUCKETS["score"]


def test_core_maps_buckets_windows_and_labels(tmp_path):
    path = write(tmp_path, """\
        metrics:
          score_buckets:
            default: [0, 0.25, 0.5, 1]
            docs-search: [0, 5, 10, 20, 40]
        windows:
          windows: {10m: 600, 2h: 7200}
          lateness_seconds: 60
          max_label_values: 7
          labels: {app: [docs-search, hr-assistant], source: [wiki]}
          vocabulary_bits: 4096
          vocabulary_hashes: 3
        """)
    core = load(path, environ={}).core()
    assert core.windows == (("10m", 600), ("2h", 7200))
    assert core.lateness_seconds == 60
    assert core.max_label_values == 7
    assert core.label_values == {"app": ("docs-search", "hr-assistant"), "source": ("wiki",)}
    assert core.vocabulary_bits == 4096 and core.vocabulary_hashes == 3
    assert core.buckets_for("score", "docs-search").bounds == (0, 5, 10, 20, 40)
    assert core.buckets_for("score", "hr-assistant").bounds == (0, 0.25, 0.5, 1)  # "default" for the rest
    assert core.buckets_for("score", "docs-search").labels[-1] == "+Inf"
    # Only the score buckets are configured: the other bucket sets keep their defaults.
    assert core.buckets_for("gap", "any-app").bounds == DEFAULT_BUCKETS["gap"]


def test_core_maps_the_pipeline_version_split(tmp_path):
    core = load(write(tmp_path, """\
        windows:
          by_pipeline_version: true
          max_pipeline_versions: 2
          pipeline_version_idle_seconds: 600
          labels: {pipeline_version: [v1.4, v1.5-canary]}
        """), environ={}).core()
    assert core.by_pipeline_version and core.max_pipeline_versions == 2 and core.pipeline_version_idle_seconds == 600
    assert core.label_values == {"pipeline_version": ("v1.4", "v1.5-canary")}
    assert not Settings().core().by_pipeline_version  # off unless asked for
    assert load(environ={"RAGDRIFT_WINDOWS__BY_PIPELINE_VERSION": "true"}).windows.by_pipeline_version


@pytest.mark.parametrize(("text", "key"), [
    ("windows: {labels: {pipeline_version: [v1, v1]}}\n", "windows.labels.pipeline_version: lists a version twice"),
    ("windows: {labels: {pipeline_version: [v1, none]}}\n", "windows.labels.pipeline_version[1]: 'none' is"),
    ("windows: {labels: {pipeline_version: [other]}}\n", "windows.labels.pipeline_version[0]: 'other' is"),
    ("windows: {labels: {pipeline_version: ['']}}\n", "windows.labels.pipeline_version[0]: must be"),
    ("windows: {labels: {pipeline_version: [\"v\\x01\"]}}\n", "windows.labels.pipeline_version[0]: must be"),
    ("windows: {labels: {pipeline_version: [1.5]}}\n", "windows.labels.pipeline_version[0]: expected str"),
    ("windows: {by_pipeline_version: yes-please}\n", "windows.by_pipeline_version: expected bool"),
    ("windows: {labels: {version: [v1]}}\n", "windows.labels.version: unknown label dimension"),
])
def test_pipeline_version_checks(tmp_path, text, key):
    message = error(tmp_path, text)
    assert message.startswith(key), message


def test_core_per_app_buckets_without_a_default(tmp_path):
    core = load(write(tmp_path, "metrics: {score_buckets: {support-bot: [-8, 0, 8]}}\n"), environ={}).core()
    assert core.buckets_for("score", "support-bot").bounds == (-8, 0, 8)
    assert core.buckets_for("score", "hr-assistant").bounds == DEFAULT_BUCKETS["score"]


def test_settings_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        KafkaSettings().group_id = "x"  # type: ignore[misc]


# -- the documented example ----------------------------------------------------------


def _setting_keys(cls: type, prefix: str = "") -> set[str]:
    hints = typing.get_type_hints(cls)
    keys: set[str] = set()
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            keys |= _setting_keys(hints[f.name], f"{prefix}{f.name}.")
        else:
            keys.add(prefix + f.name)
    return keys


def _example_keys(doc: dict, cls: type, prefix: str = "") -> set[str]:
    hints = typing.get_type_hints(cls)
    keys: set[str] = set()
    for name, value in doc.items():
        if dataclasses.is_dataclass(hints.get(name)):
            keys |= _example_keys(value, hints[name], f"{prefix}{name}.")
        else:
            keys.add(prefix + name)
    return keys


def test_operations_example_lists_every_key_and_loads(tmp_path):
    text = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    block = re.search(r"```yaml\n(kafka:.*?)```", text, re.DOTALL).group(1)
    doc = yaml.safe_load(block)
    assert _example_keys(doc, Settings) == _setting_keys(Settings)
    # Every key of a section carries a one-line comment.
    bare = [line.strip() for line in block.splitlines() if re.match(r"^  \w+:", line) and "#" not in line]
    assert bare == [], f"keys without a comment in operations.md: {bare}"
    secret = tmp_path / "pw"
    secret.write_text("x")
    doc["kafka"]["client"]["sasl_plain_password_file"] = str(secret)
    s = load(write(tmp_path, yaml.safe_dump(doc)), environ={})
    assert s.kafka.client["sasl_plain_password"] == "x"


def test_drift_grids_per_app_are_read_and_checked(tmp_path):
    from agent.core.drift import DEFAULT_GRIDS, Grid
    from agent.io.settings.drift import drift_config

    s = load(write(tmp_path, """
        drift:
          grids:
            docs-search:
              top1_score: {lo: 0.7, hi: 0.9, cells: 400}
              latency_seconds: {lo: 0, hi: 60, cells: 600, scale: 0.01}
    """), environ={})
    g = drift_config(s.drift).grids
    assert g.grid("docs-search", "top1_score") == Grid(0.7, 0.9, 400)
    assert g.grid("docs-search", "latency_seconds") == Grid(0.0, 60.0, 600, scale=0.01)
    assert g.grid("support-bot", "top1_score") == DEFAULT_GRIDS["top1_score"]
    with pytest.raises(ConfigError, match=r"drift\.grids\.docs-search\.source: not a numeric drift feature"):
        load(write(tmp_path, "drift: {grids: {docs-search: {source: {lo: 0, hi: 1, cells: 3}}}}"), environ={})
    with pytest.raises(ConfigError, match=r"drift\.grids\.a\.top1_score: grid needs finite lo < hi"):
        load(write(tmp_path, "drift: {grids: {a: {top1_score: {lo: 1, hi: 0, cells: 3}}}}"), environ={})


# -- kafka-python settings passed through ---------------------------------------------


@pytest.mark.parametrize(("text", "message"), [
    ("kafka: {client: {fetch_max_bytes: 1}}\n",
     "kafka.client.fetch_max_bytes: a kafka-python consumer setting only: put it under kafka.consumer"),
    ("kafka: {client: {compression_type: gzip}}\n",
     "kafka.client.compression_type: a kafka-python producer setting only: put it under kafka.producer"),
    ("kafka: {client: {sasl_mechanizm: PLAIN}}\n", "kafka.client.sasl_mechanizm: not a kafka-python setting"),
    ("kafka: {consumer: {compression_type: gzip}}\n",
     "kafka.consumer.compression_type: not a kafka-python consumer setting"),
    ("kafka: {producer: {isolation_level: read_committed}}\n",
     "kafka.producer.isolation_level: not a kafka-python producer setting"),
    ("kafka: {client: {group_id: other}}\n", "kafka.client.group_id: set by kafka.group_id"),
    ("kafka: {consumer: {enable_auto_commit: true}}\n",
     "kafka.consumer.enable_auto_commit: set by the agent: offsets are committed with its checkpoints"),
    ("kafka: {consumer: {value_deserializer: x}}\n",
     "kafka.consumer.value_deserializer: set by the agent: it decodes raw bytes itself"),
    ("kafka: {producer: {acks: 1}}\n", "kafka.producer.acks: set by the agent: dead letters are written with acks=all"),
])
def test_pass_through_settings_are_checked_with_the_configuration(tmp_path, text, message):
    assert error(tmp_path, text) == message


LIBRDKAFKA = "kafka: {library: confluent-kafka, %s}\n"


@pytest.mark.parametrize(("text", "message"), [
    ("kafka: {library: kafka-streams}\n", "kafka.library: must be kafka-python or confluent-kafka"),
    # a key for the other library, both ways
    (LIBRDKAFKA % "client: {security_protocol: SASL_SSL}",
     "kafka.client.security_protocol: a kafka-python setting; with kafka.library confluent-kafka, settings are librdkafka's"),
    ("kafka: {client: {security.protocol: SASL_SSL}}\n",
     "kafka.client.security.protocol: a librdkafka setting; with kafka.library kafka-python, settings are kafka-python's"),
    ("kafka: {consumer: {fetch.max.bytes: 1}}\n",
     "kafka.consumer.fetch.max.bytes: a librdkafka setting; with kafka.library kafka-python, settings are kafka-python's"),
    # a key the agent sets itself
    (LIBRDKAFKA % "client: {group.id: other}", "kafka.client.group.id: set by kafka.group_id"),
    (LIBRDKAFKA % "client: {bootstrap.servers: 'a:9092'}", "kafka.client.bootstrap.servers: set by kafka.bootstrap_servers"),
    (LIBRDKAFKA % "consumer: {enable.auto.offset.store: true}",
     "kafka.consumer.enable.auto.offset.store: set by the agent: offsets are committed with its checkpoints"),
    (LIBRDKAFKA % "producer: {acks: 1}", "kafka.producer.acks: set by the agent: dead letters are written with acks=all"),
    # an unknown key, and a key of one client only where both get it
    (LIBRDKAFKA % "client: {sasl.mechanizm: PLAIN}", "kafka.client.sasl.mechanizm: not a librdkafka setting"),
    (LIBRDKAFKA % "client: {fetch.max.bytes: 1}",
     "kafka.client.fetch.max.bytes: a librdkafka consumer setting only: put it under kafka.consumer"),
    (LIBRDKAFKA % "consumer: {compression.type: gzip}", "kafka.consumer.compression.type: not a librdkafka consumer setting"),
    (LIBRDKAFKA % "producer: {isolation.level: read_committed}",
     "kafka.producer.isolation.level: not a librdkafka producer setting"),
])
def test_librdkafka_settings_are_checked_with_the_configuration(tmp_path, text, message):
    assert error(tmp_path, text) == message


def test_confluent_kafka_not_installed_names_the_extra(tmp_path, monkeypatch):
    import importlib.util

    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "confluent_kafka" else find(name, *a))
    assert error(tmp_path, "kafka: {library: confluent-kafka}\n") == \
        "kafka.library: confluent-kafka is not installed: pip install 'ragdrift-agent[confluent]'"


def test_librdkafka_settings_pass_with_confluent_kafka(tmp_path):
    settings = load(write(tmp_path, LIBRDKAFKA % (
        "client: {security.protocol: SASL_SSL, sasl.mechanism: PLAIN, sasl.username: u, sasl.password: p}, "
        "consumer: {fetch.max.bytes: 1048576}, producer: {compression.type: gzip}")), environ={})
    assert settings.kafka.library == "confluent-kafka"
    assert settings.kafka.client["security.protocol"] == "SASL_SSL"
    assert settings.redacted()["kafka"]["client"]["sasl.password"] != "p"


def _check_config(tmp_path, capsys, kafka: dict) -> tuple[int, str]:
    from tests.test_cli import run

    path = write(tmp_path, yaml.safe_dump({"kafka": {"library": "confluent-kafka", **kafka}, "judgment": {"salt": "s"}}))
    status, _, err = run(capsys, "check-config", str(path))
    return status, err


# What librdkafka refuses when `run` builds its clients (_INVALID_ARG), as check-config names it.
REFUSED = [
    ({"client": {"security.protocol": "BOGUS"}}, "kafka.client.security.protocol",
     'Invalid value "BOGUS" for configuration property "security.protocol"'),
    ({"consumer": {"fetch.max.bytes": "lots"}}, "kafka.consumer.fetch.max.bytes",
     'Invalid value for configuration property "fetch.max.bytes"'),
    ({"consumer": {"fetch.max.bytes": -5}}, "kafka.consumer.fetch.max.bytes", "value -5 is outside allowed range"),
    ({"producer": {"batch.size": 0}}, "kafka.producer.batch.size", "value 0 is outside allowed range"),
    ({"client": {"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"}},
     "kafka.client.ssl.ca.location", "ssl.ca.location failed"),  # read when the client is built
    ({"session_timeout_ms": 3_600_001}, "kafka.session_timeout_ms", "outside allowed range 1..3600000"),
]


@pytest.mark.parametrize(("kafka", "key", "why"), [
    *REFUSED,
    ({"consumer": {"fetch.max.bytes": {"a": 1}}}, "kafka.consumer.fetch.max.bytes", "must be one value"),
    ({"consumer": {"fetch.max.bytes": None}}, "kafka.consumer.fetch.max.bytes", "must be one value"),
    ({"producer": {"compression.type": ["gzip"]}}, "kafka.producer.compression.type", "must be one value"),
])
def test_check_config_refuses_what_librdkafka_refuses_naming_the_key(tmp_path, capsys, kafka, key, why):
    from tests.test_cli import one_line_error

    status, err = _check_config(tmp_path, capsys, kafka)
    assert status == 2 and one_line_error(err).startswith(f"ragdrift: error: {key}: ") and why in err, err


@pytest.mark.parametrize(("kafka", "key", "why"), REFUSED)
def test_a_run_refuses_the_same_values(kafka, key, why):
    """The check builds the clients as a run does: a run given these values stops with the same error."""
    from kafka.errors import KafkaError

    from agent.io.kafka import broker

    settings = KafkaSettings(**{"library": "confluent-kafka", **kafka})
    build = broker.producer if "producer" in kafka else broker.consumer
    with pytest.raises(KafkaError, match="_INVALID_ARG") as info:
        build(settings, "c-1")
    assert why in str(info.value)


def test_a_good_set_of_librdkafka_values_passes_check_config(tmp_path, capsys):
    status, err = _check_config(tmp_path, capsys, {
        "client": {"security.protocol": "PLAINTEXT", "socket.timeout.ms": 30000, "socket.keepalive.enable": True},
        "consumer": {"fetch.max.bytes": 52428800, "isolation.level": "read_committed", "enable.partition.eof": False},
        "producer": {"compression.type": "gzip", "batch.size": 65536}, "session_timeout_ms": 45000})
    assert (status, err) == (0, "")


def test_consumer_and_producer_settings_reach_their_client_only(tmp_path, monkeypatch):
    from agent.io.kafka import broker

    path = tmp_path / "c.yaml"
    path.write_text("kafka:\n  client: {request_timeout_ms: 40000}\n"
                    "  consumer: {fetch_max_bytes: 1048576, isolation_level: read_committed}\n"
                    "  producer: {compression_type: gzip}\n")
    settings = load(path, environ={})
    built = {}
    monkeypatch.setattr(broker, "KafkaConsumer", lambda **kw: built.setdefault("consumer", kw))
    monkeypatch.setattr(broker, "KafkaProducer", lambda **kw: built.setdefault("producer", kw))
    broker.consumer(settings.kafka, "c-1")
    broker.producer(settings.kafka, "c-1")
    consumer, producer = built["consumer"], built["producer"]
    assert consumer["request_timeout_ms"] == producer["request_timeout_ms"] == 40000
    assert consumer["fetch_max_bytes"] == 1048576 and consumer["isolation_level"] == "read_committed"
    assert "compression_type" not in consumer and "fetch_max_bytes" not in producer
    assert producer["compression_type"] == "gzip"
    assert consumer["enable_auto_commit"] is False and consumer["allow_auto_create_topics"] is False
    # kafka-python would accept them: every key is one of its settings
    assert set(consumer) <= set(KafkaConsumer.DEFAULT_CONFIG) and set(producer) <= set(KafkaProducer.DEFAULT_CONFIG)
