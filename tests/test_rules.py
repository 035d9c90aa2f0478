"""Check rules/ with the real tools: promtool, amtool and Alertmanager.

The structural tests need only PyYAML. The others run the Debian binaries
(`prometheus`, `prometheus-alertmanager`); a missing binary fails the test
when CI=true and skips it elsewhere.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
RULES_DIR = ROOT / "rules"
RULE_FILES = sorted(RULES_DIR.glob("*.rules.yaml"))
RULE_TESTS = sorted((RULES_DIR / "tests").glob("*.test.yaml"))
AM_CONFIG = RULES_DIR / "alertmanager.example.yaml"
RUNBOOKS = ROOT / "docs" / "runbooks.md"
RUNBOOK_BASE = "https://github.com/ragdrift/ragdrift/blob/main/docs/runbooks.md"

# The alert contract: name -> severity.
ALERTS = {
    "RagdriftUnauthorizedRetrieval": "page",
    "RagdriftUnauthorizedRisk": "page",
    "RagdriftStaleConflict": "page",
    "RagdriftStaleRetrieval": "ticket",
    "RagdriftZeroResultRateHigh": "ticket",
    "RagdriftFilterErrors": "ticket",
    "RagdriftAgentDown": "page",
    "RagdriftConsumerLagHigh": "ticket",
    "RagdriftCheckpointStale": "ticket",
    "RagdriftKafkaUnreachable": "page",
    "RagdriftDeadLetters": "ticket",
    "RagdriftJudgmentBatchMissing": "ticket",
    "RagdriftScoreDrift": "ticket",
    "RagdriftContentAgeDrift": "ticket",
    "RagdriftSourceConcentration": "ticket",
    "RagdriftQueryMixDrift": "ticket",
    "RagdriftWatchdog": "none",
}


def _run(*cmd: str) -> subprocess.CompletedProcess:
    """Run a tool from the repository root; fail with its output if non-zero."""
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.fail(
            f"{' '.join(cmd)} exited with {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}",
            pytrace=False,
        )
    return proc


def _groups() -> list[dict]:
    groups: list[dict] = []
    for path in RULE_FILES:
        groups += yaml.safe_load(path.read_text())["groups"]
    return groups


def _alerts() -> dict[str, dict]:
    return {r["alert"]: r for g in _groups() for r in g["rules"] if "alert" in r}


def _records() -> list[str]:
    return [r["record"] for g in _groups() for r in g["rules"] if "record" in r]


def _tests() -> list[dict]:
    return [t for path in RULE_TESTS for t in yaml.safe_load(path.read_text())["tests"]]


# ---------------------------------------------------------------------------
# structure (no binaries)


def test_rule_files_exist():
    assert RULE_FILES, f"no *.rules.yaml under {RULES_DIR}"
    assert AM_CONFIG.is_file()


def test_alert_names_and_severities_match_the_contract():
    assert {n: r["labels"]["severity"] for n, r in _alerts().items()} == ALERTS


@pytest.mark.parametrize("name", sorted(ALERTS))
def test_alert_annotations(name):
    rule = _alerts()[name]
    annotations = rule["annotations"]
    assert set(annotations) >= {"summary", "description", "runbook_url"}
    assert "{{" in annotations["description"], "description must template a value"
    assert annotations["runbook_url"] == f"{RUNBOOK_BASE}#{name.lower()}"


@pytest.mark.parametrize("name", sorted(ALERTS))
def test_every_alert_has_a_runbook_section(name):
    headings = re.findall(r"^#{2,3} (\S+)\s*$", RUNBOOKS.read_text(), re.MULTILINE)
    assert name in headings, f"docs/runbooks.md needs a '## {name}' section"


def test_immediate_pages_have_no_pending_time():
    for name in ("RagdriftUnauthorizedRetrieval", "RagdriftUnauthorizedRisk",
                 "RagdriftStaleConflict"):
        assert _alerts()[name].get("for", "0m") in ("0m", "0s"), name


def test_recording_rules_follow_level_metric_operations():
    pattern = re.compile(r"^[a-z_]+:ragdrift_[a-z0-9_]+:[a-z0-9_]+$")
    bad = [r for r in _records() if not pattern.match(r)]
    assert not bad, bad


def test_one_test_file_per_rule_group():
    groups = {g["name"] for g in _groups()}
    files = {p.name.removesuffix(".test.yaml") for p in RULE_TESTS}
    assert groups == files


def test_every_alert_and_recording_rule_is_unit_tested():
    tests = _tests()
    firing, quiet = set(), set()
    for t in tests:
        for case in t.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    exprs = " ".join(c["expr"] for t in tests for c in t.get("promql_expr_test", []))
    assert set(ALERTS) - firing == set(), "alerts never seen firing"
    assert set(ALERTS) - {"RagdriftWatchdog"} - quiet == set(), "alerts never seen quiet"
    assert [r for r in _records() if r not in exprs] == []


# ---------------------------------------------------------------------------
# the real tools


@pytest.mark.prometheus
def test_promtool_check_rules(promtool_bin):
    _run(promtool_bin, "check", "rules", *map(str, RULE_FILES))


@pytest.mark.prometheus
@pytest.mark.parametrize("path", RULE_TESTS, ids=lambda p: p.name)
def test_promtool_test_rules(path, promtool_bin):
    _run(promtool_bin, "test", "rules", str(path))


@pytest.mark.prometheus
def test_amtool_check_config(amtool_bin):
    _run(amtool_bin, "check-config", str(AM_CONFIG))


@pytest.mark.prometheus
@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        ({"alertname": "RagdriftUnauthorizedRetrieval", "severity": "page", "app": "hr"},
         "ragdrift-page"),
        ({"alertname": "RagdriftAgentDown", "severity": "page", "instance": "a:9108"},
         "ragdrift-page"),
        ({"alertname": "RagdriftStaleRetrieval", "severity": "ticket", "app": "hr"},
         "ragdrift-ticket"),
        ({"alertname": "RagdriftWatchdog", "severity": "none"}, "ragdrift-heartbeat"),
        ({"alertname": "SomethingElse", "severity": "warning"}, "ragdrift-ticket"),
    ],
    ids=lambda v: v if isinstance(v, str) else v["alertname"],
)
def test_alertmanager_routes(labels, receiver, amtool_bin):
    _run(amtool_bin, "config", "routes", "test", f"--config.file={AM_CONFIG}",
         f"--verify.receivers={receiver}", *(f"{k}={v}" for k, v in labels.items()))


def test_inhibit_rules_only_target_alerts_that_carry_instance():
    """`equal: [instance]` can only match alerts that keep the target labels.

    Alerts aggregated over replicas (`sum by (app)`, `by (reason)`, `by
    (filter)`) carry no `instance`; an inhibit rule listing them could only
    ever match the absent() form of RagdriftAgentDown, and that form also
    fires while the agents are scraped under a mismatched job name, when the
    security and freshness pages are real.
    """
    alerts = _alerts()
    config = yaml.safe_load(AM_CONFIG.read_text())
    for rule in config["inhibit_rules"]:
        assert rule["equal"] == ["instance"]
        (target,) = [m for m in rule["target_matchers"] if m.startswith("alertname")]
        pattern = re.compile(target.split("=~", 1)[1].strip().strip('"'))
        targets = {name for name in alerts if pattern.fullmatch(name)}
        assert targets == {"RagdriftConsumerLagHigh", "RagdriftCheckpointStale"}
        for name in targets:
            assert "sum by" not in alerts[name]["expr"], f"{name} must keep the instance label"
        # Nothing aggregated over replicas is a target (the drift alerts included).
        for name in ("RagdriftUnauthorizedRetrieval", "RagdriftUnauthorizedRisk",
                     "RagdriftStaleConflict", "RagdriftStaleRetrieval", "RagdriftZeroResultRateHigh",
                     "RagdriftFilterErrors", "RagdriftDeadLetters", "RagdriftScoreDrift",
                     "RagdriftContentAgeDrift", "RagdriftSourceConcentration", "RagdriftQueryMixDrift",
                     "RagdriftAgentDown", "RagdriftWatchdog"):
            assert not pattern.fullmatch(name), name


@pytest.mark.prometheus
def test_agent_down_inhibits_per_replica_alerts_in_a_real_alertmanager(alertmanager_bin):
    """amtool cannot evaluate inhibit rules, so ask a running Alertmanager."""
    from tests.services import Alertmanager, WebhookReceiver, wait_until

    config = yaml.safe_load(AM_CONFIG.read_text())
    now = dt.datetime.now(dt.UTC)

    def alert(**labels):
        return {
            "labels": labels,
            "annotations": {"summary": "test"},
            "startsAt": now.isoformat(),
            "endsAt": (now + dt.timedelta(minutes=10)).isoformat(),
        }

    def status(am):
        """alertname/instance/app -> inhibited?"""
        return {
            "/".join(a["labels"].get(k, "") for k in ("alertname", "instance", "app")):
                bool(a["status"]["inhibitedBy"])
            for a in am.alerts()
        }

    with WebhookReceiver() as hook:
        for receiver in config["receivers"]:
            for webhook in receiver.get("webhook_configs", []):
                webhook["url"] = hook.url
        with Alertmanager(config=yaml.safe_dump(config), binary=alertmanager_bin) as am:
            am.post_alerts([
                alert(alertname="RagdriftAgentDown", severity="page",
                      instance="10.0.0.1:9108", job="ragdrift"),
                alert(alertname="RagdriftConsumerLagHigh", severity="ticket",
                      instance="10.0.0.1:9108", job="ragdrift"),
                alert(alertname="RagdriftCheckpointStale", severity="ticket",
                      instance="10.0.0.1:9108", job="ragdrift"),
                alert(alertname="RagdriftConsumerLagHigh", severity="ticket",
                      instance="10.0.0.2:9108", job="ragdrift"),
                # Aggregated over replicas: no instance label.
                alert(alertname="RagdriftStaleRetrieval", severity="ticket", app="hr-bot"),
                alert(alertname="RagdriftStaleConflict", severity="page", app="hr-bot"),
                alert(alertname="RagdriftUnauthorizedRetrieval", severity="page",
                      app="hr-bot"),
                alert(alertname="RagdriftDeadLetters", severity="ticket", reason="invalid_json"),
            ])
            expected = {
                "RagdriftAgentDown/10.0.0.1:9108/": False,
                "RagdriftConsumerLagHigh/10.0.0.1:9108/": True,
                "RagdriftCheckpointStale/10.0.0.1:9108/": True,
                # another replica: not inhibited
                "RagdriftConsumerLagHigh/10.0.0.2:9108/": False,
                # alerts summed over replicas survive one dead replica
                "RagdriftStaleRetrieval//hr-bot": False,
                "RagdriftStaleConflict//hr-bot": False,
                "RagdriftUnauthorizedRetrieval//hr-bot": False,
                "RagdriftDeadLetters//": False,
            }
            wait_until(lambda: status(am) == expected, timeout=15,
                       message=f"inhibition {expected}")

            # The absent() form (no instance) fires too when the agents are
            # scraped under a job name that does not match: their security,
            # freshness and dead-letter alerts are then real and stay active,
            # and it silences no per-replica alert either.
            am.post_alerts([alert(alertname="RagdriftAgentDown", severity="page")])
            expected |= {"RagdriftAgentDown//": False}
            wait_until(lambda: status(am) == expected, timeout=15,
                       message=f"inhibition {expected}")
