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
    "RagdriftPartitionUnreadable": "page",
    "RagdriftCheckpointSetAside": "ticket",
    "RagdriftDamagedStoredRows": "ticket",
    "RagdriftKafkaUnreachable": "page",
    "RagdriftDeadLetters": "ticket",
    "RagdriftJudgmentBatchMissing": "ticket",
    "RagdriftScoreDrift": "ticket",
    "RagdriftContentAgeDrift": "ticket",
    "RagdriftSourceConcentration": "ticket",
    "RagdriftQueryMixDrift": "ticket",
    "RagdriftCanaryRegression": "ticket",
    "RagdriftCanaryUnauthorized": "page",
    "RagdriftLiveGateStale": "ticket",
    "RagdriftLiveGateErrors": "ticket",
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
                 "RagdriftStaleConflict", "RagdriftCanaryUnauthorized"):
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
        ({"alertname": "RagdriftCanaryUnauthorized", "severity": "page", "app": "hr",
          "candidate": "hr-2"}, "ragdrift-page"),
        ({"alertname": "RagdriftCanaryRegression", "severity": "ticket", "app": "hr",
          "stable": "hr-1", "candidate": "hr-2"}, "ragdrift-ticket"),
        ({"alertname": "RagdriftWatchdog", "severity": "none"}, "ragdrift-heartbeat"),
        ({"alertname": "SomethingElse", "severity": "warning"}, "ragdrift-ticket"),
    ],
    ids=lambda v: v if isinstance(v, str) else v["alertname"],
)
def test_alertmanager_routes(labels, receiver, amtool_bin):
    _run(amtool_bin, "config", "routes", "test", f"--config.file={AM_CONFIG}",
         f"--verify.receivers={receiver}", *(f"{k}={v}" for k, v in labels.items()))


def _inhibit_rules(equal: list[str]) -> list[dict]:
    return [r for r in yaml.safe_load(AM_CONFIG.read_text())["inhibit_rules"] if r["equal"] == equal]


def _alertname_pattern(matchers: list[str]) -> re.Pattern:
    (matcher,) = [m for m in matchers if m.startswith("alertname")]
    op = "=~" if "=~" in matcher else "="
    value = matcher.split(op, 1)[1].strip().strip('"')
    return re.compile(value if op == "=~" else re.escape(value))


def test_inhibit_rules_are_per_replica_or_per_app():
    rules = yaml.safe_load(AM_CONFIG.read_text())["inhibit_rules"]
    assert sorted(tuple(r["equal"]) for r in rules) == [("app",), ("instance",)]


def test_inhibit_rules_only_target_alerts_that_carry_instance():
    """`equal: [instance]` can only match alerts that keep the target labels.

    Alerts aggregated over replicas (`sum by (app)`, `by (reason)`, `by
    (filter)`) carry no `instance`; an inhibit rule listing them could only
    ever match the absent() form of RagdriftAgentDown, and that form also
    fires while the agents are scraped under a mismatched job name, when the
    security and freshness pages are real.
    """
    alerts = _alerts()
    for rule in _inhibit_rules(["instance"]):
        pattern = _alertname_pattern(rule["target_matchers"])
        targets = {name for name in alerts if pattern.fullmatch(name)}
        assert targets == {"RagdriftConsumerLagHigh", "RagdriftCheckpointStale"}
        for name in targets:
            assert "sum by" not in alerts[name]["expr"], f"{name} must keep the instance label"
        # Nothing aggregated over replicas is a target (the drift alerts included).
        for name in ("RagdriftUnauthorizedRetrieval", "RagdriftUnauthorizedRisk",
                     "RagdriftStaleConflict", "RagdriftStaleRetrieval", "RagdriftZeroResultRateHigh",
                     "RagdriftFilterErrors", "RagdriftDeadLetters", "RagdriftScoreDrift",
                     "RagdriftContentAgeDrift", "RagdriftSourceConcentration", "RagdriftQueryMixDrift",
                     "RagdriftCanaryRegression", "RagdriftCanaryUnauthorized",
                     "RagdriftAgentDown", "RagdriftWatchdog"):
            assert not pattern.fullmatch(name), name


def test_the_canary_page_is_inhibited_only_by_its_apps_unauthorized_page():
    """One incident, one page: the app's unauthorized page holds back its
    canary's. Both alerts must keep `app` and only aggregated labels, or
    `equal: [app]` would compare a missing label and hold back every app."""
    alerts = _alerts()
    (rule,) = _inhibit_rules(["app"])
    sources = {n for n in alerts if _alertname_pattern(rule["source_matchers"]).fullmatch(n)}
    targets = {n for n in alerts if _alertname_pattern(rule["target_matchers"]).fullmatch(n)}
    assert (sources, targets) == ({"RagdriftUnauthorizedRetrieval"}, {"RagdriftCanaryUnauthorized"})
    for name in sources | targets:
        by = re.match(r"\s*(?:sum|max) by \(([^)]*)\)", alerts[name]["expr"])
        assert by and "app" in {label.strip() for label in by.group(1).split(",")}, name


def _am_alert(now: dt.datetime, ends: dt.timedelta = dt.timedelta(minutes=10), **labels) -> dict:
    """An alert as Prometheus posts it (`ends` negative: resolved)."""
    return {
        "labels": labels,
        "annotations": {"summary": "test"},
        "startsAt": (now - dt.timedelta(minutes=1)).isoformat(),
        "endsAt": (now + ends).isoformat(),
    }


def _am_status(am) -> dict[str, bool]:
    """alertname/instance/app -> inhibited? (active alerts only)"""
    return {
        "/".join(a["labels"].get(k, "") for k in ("alertname", "instance", "app")):
            bool(a["status"]["inhibitedBy"])
        for a in am.alerts()
    }


def _am_config(url: str, fast: bool = False) -> str:
    """The example configuration with every webhook pointed at `url`; `fast`:
    every route notifies at once and re-evaluates its groups every second
    (the timings, not the routing or inhibition, of the example)."""
    config = yaml.safe_load(AM_CONFIG.read_text())
    for receiver in config["receivers"]:
        for webhook in receiver.get("webhook_configs", []):
            webhook["url"] = url
    if fast:
        for route in [config["route"], *config["route"]["routes"]]:
            route |= {"group_wait": "0s", "group_interval": "1s"}
    return yaml.safe_dump(config)


@pytest.mark.prometheus
def test_agent_down_inhibits_per_replica_alerts_in_a_real_alertmanager(alertmanager_bin):
    """amtool cannot evaluate inhibit rules, so ask a running Alertmanager."""
    from tests.services import Alertmanager, WebhookReceiver, wait_until

    now = dt.datetime.now(dt.UTC)

    def alert(**labels):
        return _am_alert(now, **labels)

    with WebhookReceiver() as hook, Alertmanager(config=_am_config(hook.url), binary=alertmanager_bin) as am:
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
        wait_until(lambda: _am_status(am) == expected, timeout=15,
                   message=f"inhibition {expected}")

        # The absent() form (no instance) fires too when the agents are
        # scraped under a job name that does not match: their security,
        # freshness and dead-letter alerts are then real and stay active,
        # and it silences no per-replica alert either.
        am.post_alerts([alert(alertname="RagdriftAgentDown", severity="page")])
        expected |= {"RagdriftAgentDown//": False}
        wait_until(lambda: _am_status(am) == expected, timeout=15,
                   message=f"inhibition {expected}")


@pytest.mark.prometheus
def test_the_apps_unauthorized_page_holds_back_its_canary_page_in_a_real_alertmanager(alertmanager_bin):
    """One page while the app's unauthorized page is active; the canary page
    follows when it resolves, naming the candidate. Other apps' canary pages,
    the canary ticket and a dead replica are not involved."""
    from tests.services import Alertmanager, WebhookReceiver, wait_until

    now = dt.datetime.now(dt.UTC)
    app_page = {"alertname": "RagdriftUnauthorizedRetrieval", "severity": "page", "app": "hr-bot"}
    with WebhookReceiver() as hook, Alertmanager(config=_am_config(hook.url, fast=True), binary=alertmanager_bin) as am:
        am.post_alerts([
            _am_alert(now, **app_page),
            _am_alert(now, alertname="RagdriftCanaryUnauthorized", severity="page", app="hr-bot",
                      candidate="hr-rag-2"),
            _am_alert(now, alertname="RagdriftCanaryUnauthorized", severity="page", app="support-bot",
                      candidate="support-3.15.0"),
            _am_alert(now, alertname="RagdriftCanaryRegression", severity="ticket", app="hr-bot",
                      stable="hr-rag-1", candidate="hr-rag-2"),
            # a dead replica holds back no canary alert (they carry no instance)
            _am_alert(now, alertname="RagdriftAgentDown", severity="page", instance="10.0.0.1:9108",
                      job="ragdrift"),
            _am_alert(now, alertname="RagdriftAgentDown", severity="page"),
        ])
        expected = {
            "RagdriftUnauthorizedRetrieval//hr-bot": False,
            "RagdriftCanaryUnauthorized//hr-bot": True,
            "RagdriftCanaryUnauthorized//support-bot": False,
            "RagdriftCanaryRegression//hr-bot": False,
            "RagdriftAgentDown/10.0.0.1:9108/": False,
            "RagdriftAgentDown//": False,
        }
        wait_until(lambda: _am_status(am) == expected, timeout=15, message=f"inhibition {expected}")

        # The app's page resolves while the candidate's events are still in the live gate's window.
        am.post_alerts([_am_alert(now, ends=-dt.timedelta(seconds=1), **app_page)])
        del expected["RagdriftUnauthorizedRetrieval//hr-bot"]
        expected["RagdriftCanaryUnauthorized//hr-bot"] = False
        wait_until(lambda: _am_status(am) == expected, timeout=15, message=f"inhibition {expected}")

        def canary_page(body) -> bool:
            return isinstance(body, dict) and body.get("status") == "firing" and any(
                a["labels"] == {"alertname": "RagdriftCanaryUnauthorized", "severity": "page",
                                "app": "hr-bot", "candidate": "hr-rag-2"}
                for a in body.get("alerts", []))

        # (with the example's timings: at the group's next flush, within the page route's group_interval)
        hook.wait_for(canary_page, timeout=15)
