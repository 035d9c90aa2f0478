"""What a configuration loses without being wrong: an empty `judgment.salt` with the judgment queue on
(the default has none, but the weekly batch would fail), and a feature on while one it reads from is off
(the judgment queue's risk signals new_terms and rare_slice read drift's frozen baseline). `check-config`
warns in one line each, and the agent logs each once when it is built."""

from __future__ import annotations

import dataclasses
import logging
from types import MappingProxyType

import pytest
import yaml

from agent.io.features import FeatureAdapter, Wiring, built, warnings
from agent.io.settings.agent import KafkaSettings, MetricsSettings, load
from agent.service import FEATURES, build
from tests.test_cli import run

UNSALTED = ("judgment.salt: empty: no weekly batch is built and which events are sampled is predictable; set it "
            "(or RAGDRIFT_JUDGMENT__SALT) to a long random secret, or judgment.enabled: false")
NO_DRIFT = ("judgment: drift is off: the risk signals new_terms and rare_slice never fire: they read its frozen "
            "baseline")


def config(tmp_path, judgment=None, drift=None) -> str:
    path = tmp_path / "ragdrift.yaml"
    path.write_text(yaml.safe_dump({"store": {"url": f"sqlite:///{tmp_path}/s.db"}, "judgment": judgment or {},
                                    "drift": drift or {}}))
    return str(path)


@pytest.mark.parametrize(("judgment", "drift", "expected"), [
    ({}, {}, [UNSALTED]),
    ({"salt": "3c1f9a"}, {"enabled": False}, [NO_DRIFT]),
    ({}, {"enabled": False}, [UNSALTED, NO_DRIFT]),
    ({"salt": "3c1f9a"}, {}, []),
    ({"enabled": False}, {"enabled": False}, []),
])
def test_check_config_warns_in_one_line_each(tmp_path, capsys, judgment, drift, expected):
    status, out, err = run(capsys, "check-config", config(tmp_path, judgment, drift))
    assert (status, err) == (0, "".join(f"ragdrift: warning: {w}\n" for w in expected)) and "3c1f9a" not in out


def test_the_agent_logs_each_warning_once_when_built(tmp_path, broker, caplog):
    settings = load(config(tmp_path, drift={"enabled": False}), environ={})
    settings = dataclasses.replace(settings, kafka=KafkaSettings(bootstrap_servers=broker.bootstrap, topics=["t"]),
                                   metrics=MetricsSettings(address="127.0.0.1", port=0))
    with caplog.at_level(logging.WARNING):
        running = build(settings)
    running.close()
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [UNSALTED, NO_DRIFT]


def test_a_need_naming_no_feature_is_refused():
    class Lonely(FeatureAdapter):
        name = "lonely"
        needs = MappingProxyType({"nowhere": "everything"})

        @staticmethod
        def enabled(settings) -> bool:
            return True

    with pytest.raises(ValueError, match="nowhere"):
        built([*FEATURES, Lonely], Wiring(None, None, None))  # type: ignore[arg-type]
    assert warnings(FEATURES, load(None, environ={})) == [UNSALTED]
