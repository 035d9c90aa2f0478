"""The Grafana dashboards (grafana/): generated, valid, true to the rules, and
every panel's PromQL answered by a real Prometheus scraping a real agent.

Offline (no service):
- the committed JSON equals a fresh `python grafana/build.py`;
- each dashboard loads through grafana-foundation-sdk's models (Grafana's own
  schema, generated from its CUE kinds): the round trip is the identity (no
  field unknown to the schema, none dropped), every query decodes as a
  Prometheus query and every panel's options as that panel kind's options, and
  every value has the type the model declares;
- conventions: fixed uid, the datasource and app variables, descriptions,
  units, unique ids;
- every threshold line equals the number of the alert its panel names, read
  from rules/ragdrift.rules.yaml, and follows that file when it changes;
- the provisioning files load the dashboards and carry the exemplar link.

Live (tansu, two `ragdrift run` processes, Prometheus with exemplar storage
scraping every second): the first agent fills the store (judgment candidates,
security queue) and stops; a judgment batch is built on that store; the
second agent restarts on it and processes traffic with every incident kind,
dead letters and trace headers, then a clean trickle. Then:
- every target of every panel, with the dashboard variables substituted, parses
  and returns at least one series, for All apps and for one app (the agent
  splits its families by pipeline version and runs the live release gate,
  which compares each app's canary with its stable version);
- the security counts over the range equal the agent's counters (a series
  born at its first value is counted, not missed);
- the canary dashboard's verdict and hard failures equal the agent's gauges;
- every exemplar-enabled query returns exemplars;
- every metric a dashboard or a rule reads is exported (the agent's /metrics,
  plus Prometheus's own `up` and `scrape_*`), and every exported metric is on
  a dashboard or in docs/metrics.md, "Not on a dashboard".
"""

from __future__ import annotations

import copy
import enum
import json
import random
import re
import threading
import time
import typing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.cog.runtime import UnknownDataquery
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm
from kafka import KafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from agent import synth
from agent.core.drift import freeze
from agent.core.judgments.calibration import ScoreFit
from agent.core.judgments.labels import Label
from agent.core.judgments.report import report
from agent.core.sampling import iso_week, week_bounds
from agent.core.snapshot import EXEMPLAR_FAMILIES
from agent.demo.process import wait_until
from agent.io.background.judgment import GAUGE_OPTIONS
from agent.io.files import batch_files
from agent.io.settings.agent import load
from agent.io.store.calibrations import TABLES as CALIBRATION_TABLES
from agent.io.store.calibrations import Calibrations
from agent.io.store.database import Store
from agent.io.store.drift import TABLES as DRIFT_TABLES
from agent.io.store.drift import DriftStore
from agent.io.store.qrels import TABLES as QRELS_TABLES
from agent.io.store.qrels import Qrels
from agent.io.store.queue import TABLES, Queue
from agent.jobs import batch
from grafana import build, thresholds
from grafana.kit import threshold_note
from tests.agentctl import AgentProcess, agent_config, new_port, produce
from tests.services import Prometheus, http_get, unique_name

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = ROOT / "grafana" / "dashboards"
PROVISIONING = ROOT / "grafana" / "provisioning"
METRICS_DOC = ROOT / "docs" / "metrics.md"
RULES = thresholds.RULES
UIDS = {name: module.UID for name, module in build.BOARDS.items()}
PROMETHEUS_OWN = {"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling",
                  "scrape_series_added"}
# Counters a replica exports only once it meets what they count (a damaged stored row), so that a healthy
# store shows nothing new; the rules may read them. Each is documented as such in docs/metrics.md.
ONCE_MET = {"ragdrift_drift_damaged_rows_total", "ragdrift_live_gate_damaged_rows_total"}

register_default_plugins()


def _boards() -> dict[str, dict]:
    return {path.name: json.loads(path.read_text()) for path in sorted(DASHBOARDS.glob("*.json"))}


def _panels(board: dict) -> list[dict]:
    """Every panel that is not a row (rows in collapsed form hold theirs)."""
    out = []
    for panel in board["panels"]:
        if panel["type"] == "row":
            out += panel.get("panels") or []
        else:
            out.append(panel)
    return out


def _targets(boards: dict[str, dict] | None = None):
    for name, board in (boards or _boards()).items():
        for panel in _panels(board):
            for target in panel["targets"]:
                yield name, panel, target


# -- generated ---------------------------------------------------------------


def test_committed_dashboards_are_a_fresh_build():
    assert sorted(p.name for p in DASHBOARDS.glob("*.json")) == sorted(build.BOARDS)
    assert build.stale() == [], "run: python grafana/build.py"


def test_build_script_check_mode(tmp_path):
    assert build.main(["--out", str(tmp_path)]) == 0
    assert build.main(["--check", "--out", str(tmp_path)]) == 0
    (tmp_path / "ragdrift-overview.json").write_text("{}\n")
    assert build.main(["--check", "--out", str(tmp_path)]) == 1


# -- Grafana's schema, through the foundation SDK's models -------------------


def _type_errors(value, hint, path: str) -> list[str]:
    """Where `value` does not have the type the SDK model declares (`hint`)."""
    if hint is typing.Any:
        return []
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        tried = [_type_errors(value, arg, path) for arg in args if not (value is not None and arg is type(None))]
        if any(not t for t in tried):
            return []
        return tried[0] if len(tried) == 1 else [f"{path}: {value!r} is none of {hint}: {tried}"]
    if origin is typing.Literal:
        return [] if value in args else [f"{path}: {value!r} not in {args}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {value!r}"]
        return [e for i, item in enumerate(value) for e in _type_errors(item, args[0], f"{path}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {value!r}"]
        return [e for k, v in value.items() for e in _type_errors(v, args[1], f"{path}.{k}")]
    if hint is type(None):
        return [] if value is None else [f"{path}: expected null, got {value!r}"]
    if hint is object:
        return _model_errors(value, path) if hasattr(value, "to_json") else []
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return [] if value in {m.value for m in hint} else [f"{path}: {value!r} not a {hint.__name__}"]
    if hint is float:
        return [] if isinstance(value, (int, float)) and not isinstance(value, bool) else [f"{path}: {value!r} not a number"]
    if hint is int:
        return [] if isinstance(value, int) and not isinstance(value, bool) else [f"{path}: {value!r} not an integer"]
    if hint in (str, bool):
        return [] if isinstance(value, hint) else [f"{path}: {value!r} not a {hint.__name__}"]
    if isinstance(hint, type) and hasattr(hint, "from_json") and isinstance(value, dict):
        # A few fields the SDK leaves as raw JSON on decoding (panel transformations):
        # decode them with the declared model, which must keep every key.
        decoded = hint.from_json(value)
        kept = json.loads(JSONEncoder().encode(decoded))
        if kept != value:
            return [f"{path}: {hint.__name__} does not keep {value!r} (keeps {kept!r})"]
        return _model_errors(decoded, path)
    if isinstance(hint, type):
        if not isinstance(value, hint):
            return [f"{path}: {type(value).__name__} is not a {hint.__name__}"]
        return _model_errors(value, path)
    return [f"{path}: cannot check against {hint}"]


def _model_errors(obj, path: str) -> list[str]:
    if isinstance(obj, UnknownDataquery):
        return [f"{path}: a query the SDK could not decode as a Prometheus query: {obj.data}"]
    hints = typing.get_type_hints(type(obj))
    return [e for attr, hint in hints.items() for e in _type_errors(getattr(obj, attr), hint, f"{path}.{attr}")]


@pytest.mark.parametrize("name", sorted(build.BOARDS))
def test_dashboard_loads_through_grafanas_schema(name):
    text = (DASHBOARDS / name).read_text()
    model = dm.Dashboard.from_json(json.loads(text))
    # Identity: a key the schema does not know would be dropped, a value it
    # reshapes would differ.
    assert JSONEncoder(sort_keys=True, indent=2, ensure_ascii=False).encode(model) + "\n" == text
    assert _model_errors(model, name) == []
    for panel in model.panels:
        if isinstance(panel, dm.RowPanel):
            continue
        assert all(isinstance(t, pm.Dataquery) for t in panel.targets), panel.title
        # Options and custom field config decoded by the panel kind's own model, not left as raw JSON.
        assert not isinstance(panel.options, dict), f"{panel.title}: options of {panel.type_val} not decoded"
        custom = panel.field_config.defaults.custom
        assert custom is None or not isinstance(custom, dict), f"{panel.title}: custom field config not decoded"


def test_the_type_check_catches_schema_violations():
    board = json.loads((DASHBOARDS / "ragdrift-overview.json").read_text())
    bad = copy.deepcopy(board)
    bad["panels"][1]["gridPos"]["h"] = "8"
    bad["panels"][1]["targets"][0]["exemplar"] = "yes"
    bad["templating"]["list"][1]["refresh"] = 7
    errors = _model_errors(dm.Dashboard.from_json(bad), "bad")
    assert any("grid_pos.h" in e for e in errors) and any("exemplar" in e for e in errors), errors
    assert any("refresh" in e for e in errors), errors
    unknown = copy.deepcopy(board)
    unknown["panels"][1]["colour"] = "red"  # not in the schema: dropped, so the round trip differs
    assert '"colour"' not in JSONEncoder().encode(dm.Dashboard.from_json(unknown))


# -- conventions -------------------------------------------------------------


def test_dashboard_conventions():
    boards = _boards()
    assert {name: b["uid"] for name, b in boards.items()} == UIDS
    assert len(set(UIDS.values())) == len(UIDS)
    for name, board in boards.items():
        variables = {v["name"]: v for v in board["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
        app = variables["app"]
        assert app["type"] == "query" and app["query"] == "label_values(ragdrift_retrievals_total, app)"
        assert app["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert app["multi"] and app["includeAll"] and app["allValue"] == ".*"
        assert any("$app" in t["expr"] for p in _panels(board) for t in p["targets"]), f"{name} ignores $app"
        ids = [p["id"] for p in board["panels"]]
        assert ids == list(range(1, len(ids) + 1)), name
        cells: dict[tuple[int, int], str] = {}
        for panel in board["panels"]:  # no two panels share a grid cell
            pos = panel["gridPos"]
            for x in range(pos["x"], pos["x"] + pos["w"]):
                for y in range(pos["y"], pos["y"] + pos["h"]):
                    assert (x, y) not in cells, f"{name}: {panel['title']} overlaps {cells[(x, y)]}"
                    cells[(x, y)] = panel["title"]
        for panel in _panels(board):
            where = f"{name}: {panel['title']}"
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, where
            assert len(panel.get("description", "")) > 20, where
            assert panel["fieldConfig"]["defaults"].get("unit"), where
            assert panel["targets"], where
            assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"]), where
            pos = panel["gridPos"]
            assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, where
            for target in panel["targets"]:
                assert target["datasource"] == panel["datasource"], where


def test_exemplars_only_where_the_agent_attaches_them():
    enabled = [(name, panel["title"], t["expr"]) for name, panel, t in _targets() if t.get("exemplar")]
    families = {f"ragdrift_{f}_total" for f in EXEMPLAR_FAMILIES}
    for name, title, expr in enabled:
        assert set(_metric_names(expr)) & families, f"{name}: {title} enables exemplars on a family without them"
    security = [expr for name, _, expr in enabled if name == "ragdrift-security-freshness.json"]
    for family in families:
        assert any(family in expr for expr in security), f"no exemplar panel for {family}"


# -- thresholds: the rules file is the one source -----------------------------


def _threshold_lines(boards: dict[str, dict]) -> list[tuple[str, str, float]]:
    """(dashboard, panel title, value) of every threshold step above the base colour."""
    out = []
    for name, board in boards.items():
        for panel in _panels(board):
            for step in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]:
                if step["value"] is not None:
                    out.append((name, panel, step["value"]))
    return out


def _alert_of(panel: dict) -> str:
    named = set(re.findall(r"alert (Ragdrift\w+)'s threshold", panel["description"]))
    assert len(named) == 1, f"{panel['title']}: a threshold panel names exactly one alert ({named})"
    return named.pop()


def _drawn(rules: thresholds.Rules) -> dict[str, float]:
    return {rules[k].alert: rules[k].value for k in thresholds.DRAWN}


def test_every_threshold_line_is_its_alerts_number():
    rules = thresholds.read()
    lines = _threshold_lines(_boards())
    assert lines
    expected = _drawn(rules)
    for name, panel, value in lines:
        alert = _alert_of(panel)
        assert value == expected[alert], f"{name}: {panel['title']} draws {value}, {alert} says {expected[alert]}"
    assert {_alert_of(panel) for _, panel, _ in lines} == set(expected), "every threshold drawn somewhere"


def test_thresholds_follow_a_changed_rules_file(tmp_path):
    """Change every threshold in a copy of the rules: the dashboards built from
    it draw the new numbers, so none is a literal of the generator."""
    doc = yaml.safe_load(RULES.read_text())
    rules = thresholds.read()
    changed: dict[str, float] = {}
    for knob in thresholds.KNOBS:
        t = rules[knob]
        new = round(t.value * 1.5 + 7, 3)
        for group in doc["groups"]:
            for rule in group["rules"]:
                if rule.get("alert") == t.alert:
                    expr = str(rule["expr"]).strip()
                    assert expr[t.span[0]:t.span[1]] == t.text
                    rule["expr"] = expr[:t.span[0]] + repr(new) + expr[t.span[1]:]
        changed[knob] = new
        rules = thresholds.read(_dump(doc, tmp_path))  # spans of the next knob in the edited text
    path = _dump(doc, tmp_path)
    moved = thresholds.read(path)
    assert {k: moved[k].value for k in changed} == changed
    boards = {name: json.loads(text) for name, text in build.render(path).items()}
    expected = _drawn(moved)
    lines = _threshold_lines(boards)
    assert {(_alert_of(p), v) for _, p, v in lines} == set(expected.items())
    by_alert = {moved[k].alert: moved[k] for k in thresholds.DRAWN}
    for _, panel, _ in lines:  # the descriptions quote the new numbers (and guards) too
        t = by_alert[_alert_of(panel)]
        note = threshold_note(moved, t, panel["fieldConfig"]["defaults"]["unit"])
        assert panel["description"].endswith(note), (panel["description"], note)


def _dump(doc: dict, tmp_path: Path) -> Path:
    path = tmp_path / "ragdrift.rules.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_an_unreadable_threshold_fails_the_build(tmp_path):
    doc = yaml.safe_load(RULES.read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == "RagdriftKafkaUnreachable":
                rule["expr"] = "ragdrift_kafka_unreachable_seconds >= 120"
    with pytest.raises(thresholds.RulesError, match="RagdriftKafkaUnreachable"):
        build.render(_dump(doc, tmp_path))


def test_the_reader_agrees_with_the_rules_configuration_block():
    """The rules file's header lists each knob for people; the exprs are what
    Prometheus runs. The reader takes the exprs; both must agree."""
    header = RULES.read_text().split("\ngroups:")[0]
    listed = {}
    for m in re.finditer(r"^#\s+[a-z].*?\s>(?!=)\s*(?P<num>[0-9.]+)\s*(?P<unit>s|days)?\b.*?\s(?P<alert>Ragdrift\w+),?\s*$",
                         header, re.MULTILINE):
        listed[m["alert"]] = float(m["num"]) * (86400 if m["unit"] == "days" else 1)
    assert len(listed) >= 7, listed
    drawn = _drawn(thresholds.read())
    for alert, value in listed.items():
        assert drawn[alert] == value, f"{alert}: header says {value}, expr says {drawn[alert]}"


# -- provisioning --------------------------------------------------------------


def test_provisioning_files():
    provider = yaml.safe_load((PROVISIONING / "dashboards" / "ragdrift.yaml").read_text())
    assert provider["apiVersion"] == 1
    (p,) = provider["providers"]
    assert p["type"] == "file" and p["options"]["path"].startswith("/") and p["folder"] == "ragdrift"
    source = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.example.yaml").read_text())
    (ds,) = source["datasources"]
    assert ds["type"] == "prometheus"
    # the label the agent puts its trace ids under (agent/io/prometheus/collectors.py)
    assert [d["name"] for d in ds["jsonData"]["exemplarTraceIdDestinations"]] == ["trace_id"]


# -- PromQL: metric names and variables -----------------------------------------

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset", "bool",
             "inf", "nan"}


def _metric_names(expr: str) -> list[str]:
    """Metric names a PromQL expression selects (strings, matchers, ranges,
    grouping labels, functions and keywords removed)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = []
    for m in re.finditer(r"(?<![0-9.A-Za-z_:])[A-Za-z_:][A-Za-z0-9_:]*", s):
        if s[m.end():].lstrip().startswith("(") or m.group().lower() in _KEYWORDS:
            continue
        names.append(m.group())
    return names


def test_metric_name_extraction():
    assert _metric_names('sum by (app, le) (rate(a_bucket{x="b c"}[5m])) / on () group_left () (b offset 5m > 0) '
                         'or vector(0) + Inf unless c') == ["a_bucket", "b", "c"]
    assert _metric_names("time() - max(x:y:z) > 8 * 86400") == ["x:y:z"]


def _expand(expr: str, values: dict[str, str]) -> str:
    for name in sorted(values, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr


# -- live: an agent, its traffic, Prometheus ----------------------------------------

T1_EVENTS, T2_EVENTS, TRICKLE_RATE = 600, 1200, 20
INCIDENTS = [synth.parse_incident(f"{kind}@0") for kind in synth.INCIDENT_KINDS]


def _week_start(now: datetime) -> datetime:
    monday = now - timedelta(days=now.weekday())
    return monday.replace(hour=0, minute=0, second=0, microsecond=0)


def _traced(lines, rng: random.Random):
    for line in lines:
        yield line, [("traceparent", f"00-{rng.getrandbits(128):032x}-{rng.getrandbits(64):016x}-01".encode())]


class _Trickle(threading.Thread):
    """Clean traffic at about TRICKLE_RATE events/s, dated now, until stopped:
    a live system, so that rates over the last minute are defined."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.stopped = threading.Event()

    def run(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        lines = synth.generate(10**6, seed=99, start=datetime.now(UTC), rate=TRICKLE_RATE)
        started = time.monotonic()
        sent = 0
        while not self.stopped.is_set():
            due = int((time.monotonic() - started) * TRICKLE_RATE) + 1
            for _ in range(due - sent):
                producer.send(self.topic, next(lines))
            sent = max(sent, due)
            producer.flush()
            self.stopped.wait(0.2)
        producer.close(timeout=5)

    def stop(self) -> None:
        self.stopped.set()
        self.join(10)


@pytest.fixture(scope="module")
def live(broker, prometheus_bin, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dashboards")
    topic, dlq = broker.create_topic(unique_name("dash"), 1), broker.create_topic(unique_name("dashdlq"), 1)
    url = f"sqlite:///{tmp}/s.db"
    config = agent_config(broker.bootstrap, topic, dlq, unique_name("g"), url, new_port())
    config["judgment"] = {"export_dir": str(tmp / "batches"), "salt": "dashboards"}
    # The split by pipeline version and the live gate, for the Canary vs stable dashboard. A refresh every
    # 2 s: the gate's gauges hold still between refreshes, long enough to compare Prometheus with the agent.
    config["windows"] = {**config["windows"], "by_pipeline_version": True}
    config["live_gate"] = {"enabled": True, "refresh_seconds": 2}
    port = new_port()
    # Started first: it discovers its target meanwhile (a few seconds).
    prom = Prometheus(targets=[f"127.0.0.1:{port}"], binary=prometheus_bin,
                      extra_args=["--enable-feature=exemplar-storage"])
    started: list = [prom]
    trickle = None
    try:
        prom.start()
        now = datetime.now(UTC)
        start = max(now - timedelta(minutes=2), _week_start(now))
        # Phase 1: an agent fills the store with this week's candidates and security queue, then stops.
        first = AgentProcess(config)
        started.append(first)
        first.start()
        t1 = list(synth.generate(T1_EVENTS, seed=21, start=start, rate=50,
                                 incidents=[synth.parse_incident("leak@0")]))
        produce(broker.bootstrap, topic, t1)
        wait_until(lambda: first.value("ragdrift_events_total") >= T1_EVENTS, 60, 0.1, "first agent processed T1")
        assert first.terminate() == 0, first.log()
        # A judgment batch built on that store (as `ragdrift batch build` would).
        settings = load(first.config_path)
        with Store(url, None, TABLES) as store:
            queue = Queue(store)
            week = iso_week(time.time())
            assert queue.candidate_counts(settings.kafka.group_id, week), "phase 1 stored no candidates"
            # the week's own batch, as its Monday build will be (a partial batch is no week's batch)
            built = batch.build(settings, queue, week, now=week_bounds(week)[1])
            assert built.items > 0
        # Its labels, as `ragdrift judgments import` would store them: the restarted agent exports their figures.
        manifest, key = batch_files.read_batch(built.directory)
        labels = [Label(batch_id=built.batch_id, item=row["item"], chunk=c["chunk"], judge="ana", grade=3 if c["rank"] == 1 else c["rank"] % 3)
                  for row in key if row["item"] for c in row["chunks"]]
        qrels = Qrels(Store(url, None, QRELS_TABLES))
        try:
            qrels.add(labels, "dashboards")
        finally:
            qrels.store.close()
        judged = report(manifest, key, labels, GAUGE_OPTIONS)
        # A drift baseline frozen from phase 1's stored days (as `ragdrift baseline freeze` would), so the
        # restarted agent exports the drift families: phase 1's days against themselves.
        drift = DriftStore(Store(url, None, DRIFT_TABLES))
        try:
            days = drift.stored_days(settings.kafka.group_id)
            assert days, "phase 1 stored no drift counts"
            drift.save_baseline(freeze(days, "dashboards"))
        finally:
            drift.store.close()
        # Score calibrations (as `ragdrift judgments calibrate` would store): support-bot's stable version is
        # estimated (its canary is not: pipeline_changed), hr-assistant has too few labels, docs-search none.
        calibrations = Calibrations(Store(url, None, CALIBRATION_TABLES))
        try:
            calibrations.add([
                ScoreFit(app="support-bot", pipeline_version="support-3.14.0", x=(0.0, 1.0), y=(0.2, 0.9), n=5000, relevant=2500, ece=0.01,
                         brier=0.2),
                ScoreFit(app="hr-assistant", pipeline_version="hr-rag-2025.12.3", x=(0.0, 1.0), y=(0.2, 0.9), n=10, relevant=5, ece=0.01, brier=0.2),
            ])
        finally:
            calibrations.store.close()
        # Phase 2: the agent restarts on that store, with every incident kind, dead letters and traces.
        config = {**config, "metrics": {**config["metrics"], "port": port}}
        agent = AgentProcess(config)
        started.append(agent)
        agent.start()
        t2 = list(synth.generate(T2_EVENTS, seed=7, start=datetime.now(UTC) - timedelta(seconds=40), rate=50,
                                 incidents=INCIDENTS, invalid_rate=0.03))
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
        for line, headers in _traced(t2, random.Random(5)):
            producer.send(topic, line, headers=headers)
        producer.flush()
        producer.close()
        wait_until(lambda: agent.value("ragdrift_events_total") >= T2_EVENTS, 60, 0.1, "agent processed T2")
        trickle = _Trickle(broker.bootstrap, topic)
        trickle.start()
        prom.wait_targets_up(timeout=30)
        for family in ("ragdrift_unauthorized_results_total", "ragdrift_stale_conflict_retrievals_total"):
            wait_until(lambda: prom.query_value(f"sum({family})") == agent.value(family), 30, 0.2,  # noqa: B023 - waited on here
                       f"Prometheus scraped the final {family}")
        # Enough samples for every [1m] range (and the judgment gauges, read at start): four
        # scrapes that carried the retrieval families, not four attempts (a scrape while the
        # agent restores its partitions and baseline may time out, and still counts in `up`).
        wait_until(lambda: (prom.query_value('min(count_over_time(ragdrift_retrievals_total[1m]))') or 0) >= 4,
                   30, 0.2, "four scrapes of the retrieval families")
        # The live gate judges what the checkpoints stored: T2's canaries, once a refresh has read them.
        wait_until(lambda: prom.query_value('count(ragdrift_live_gate_difference{app="support-bot"})'), 30, 0.2,
                   "the live gate's figures of support-bot's canary scraped")
        text = http_get(f"http://127.0.0.1:{port}/metrics").decode()
        yield SimpleNamespace(prom=prom, agent=agent, metrics_text=text, instance=f"127.0.0.1:{port}",
                              batch_items=built.items, batch_id=built.batch_id, judged=judged)
    finally:
        if trickle is not None:
            trickle.stop()
        for service in reversed(started):
            service.stop()


def _logs(live) -> str:
    """What the services said, for a failure message."""
    return (f"\n--- prometheus log ({live.prom.log_path}):\n{live.prom.log_tail(2000)}"
            f"\n--- agent log:\n{live.agent.log()[-3000:]}")


def _variables(live, app: str) -> dict[str, str]:
    stable, candidate = PAIRS.get(app, (".*", ".*"))
    return {"__rate_interval": "1m", "__interval": "1m", "__range": "5m", "app": app, "window": "5m",
            "instance": live.instance, "stable": stable, "candidate": candidate}


APPS = (".*", "support-bot")  # All, and one app (the one with a reranker in the generated traffic)
# The versions the live gate compares (agent/synth/deployment.py): the canary is T2's score-drift incident,
# about a third of the app's events, so the version with most traffic is the stable one.
PAIRS = {"support-bot": ("support-3.14.0", "support-3.15.0-canary")}


def test_every_panel_query_returns_series(live):
    missing, errors, ran = [], [], 0
    for app in APPS:
        values = _variables(live, app)
        for name, panel, target in _targets():
            expr = _expand(target["expr"], values)
            try:
                result = live.prom.query(expr)
            except Exception as exc:  # collected and reported together
                errors.append(f"{name}: {panel['title']} [{target['refId']}] app={app}: {exc}\n{expr}")
                continue
            ran += 1
            if not result:
                missing.append(f"{name}: {panel['title']} [{target['refId']}] app={app}:\n{expr}")
    assert not errors, "queries Prometheus rejects:\n" + "\n\n".join(errors)
    assert not missing, "queries without a series:\n" + "\n\n".join(missing) + _logs(live)
    assert ran == len(APPS) * len(list(_targets()))


def _stat(live, title: str, app: str = ".*") -> float:
    board = _boards()["ragdrift-security-freshness.json"]
    (panel,) = [p for p in _panels(board) if p["title"] == title]
    (value,) = [float(r["value"][1]) for r in live.prom.query(_expand(panel["targets"][0]["expr"],
                                                                       _variables(live, app)))]
    return value


def test_security_counts_equal_the_agent(live):
    """Every series was born inside the 5m range (the agent started then, and
    the first scrape saw its counters at their first values): the stats count
    them whole."""
    pairs = {
        "Unauthorized results": "ragdrift_unauthorized_results_total",
        "Retrievals with unauthorized results": "ragdrift_unauthorized_retrievals_total",
        "Retrievals without identity claims": "ragdrift_unauthorized_risk_retrievals_total",
        "Stale conflicts": "ragdrift_stale_conflict_retrievals_total",
    }
    for title, family in pairs.items():
        assert live.agent.value(family) > 0, family
        for app, labels in ((".*", {}), ("support-bot", {"app": "support-bot"})):
            # Waits out a scrape, should the clean trickle add to a count meanwhile.
            wait_until(lambda: _stat(live, title, app) == live.agent.value(family, **labels), 10, 0.2,  # noqa: B023 - waited on here
                       f"{title} (app {app}) equal to the agent's {family}")
    # An app without such traffic reads 0, not "no data".
    assert _stat(live, "Unauthorized results", "no-such-app") == 0


def test_canary_panels_read_the_live_gate(live):
    """The verdict (2 fail, 1 not enough data, 0 pass) and the hard failures
    the dashboard shows are the gauges the agent exports for the pair. (Not
    filter_zero_rise: the excess over the stable rate moves with every
    refresh, as the clean trickle adds stable traffic.)"""
    board = _boards()["ragdrift-canary.json"]
    by_title = {p["title"]: p for p in _panels(board)}
    stable, candidate = PAIRS["support-bot"]
    pair = {"app": "support-bot", "stable": stable, "candidate": candidate}
    counted = ("unauthorized", "stale_conflict")

    def shown(title: str) -> dict[str, float]:
        """Each query's legend -> its one value for the pair."""
        out = {}
        for target in by_title[title]["targets"]:
            (row,) = live.prom.query(_expand(target["expr"], _variables(live, "support-bot")))
            out[target["legendFormat"]] = float(row["value"][1])
        return out

    def on_board() -> tuple[dict[str, float], dict[str, float]]:
        hard = shown("Hard failures of the candidate")
        return shown("Verdict"), {gate: hard[gate] for gate in counted}

    def exported() -> tuple[dict[str, float], dict[str, float]]:
        verdict = {v: live.agent.value("ragdrift_live_gate_verdict", verdict=v, **pair)
                   for v in ("pass", "fail", "not_enough_data")}
        assert sum(verdict.values()) == 1, verdict
        code = 2 * verdict["fail"] + verdict["not_enough_data"]
        hard = {gate: live.agent.value("ragdrift_live_gate_hard_failures", gate=gate, **pair) for gate in counted}
        return {"{{app}} {{candidate}} vs {{stable}}": code}, hard

    seen: list = []

    def agree() -> bool:
        seen[:] = [on_board(), exported()]
        return seen[0] == seen[1]

    try:  # waits out a refresh between the scrape and the agent's answer
        wait_until(agree, 15, 0.2, "the canary dashboard to show the agent's live gate gauges")
    except TimeoutError:
        pytest.fail(f"the canary dashboard and the agent disagree (shown, agent): {seen}")
    # T2's leaks reach the canary's events too: the gate fails it.
    verdict, hard = seen[0]
    assert hard["unauthorized"] > 0
    assert verdict == {"{{app}} {{candidate}} vs {{stable}}": 2}
    assert shown("Hard failures of the candidate")["filter_zero_rise"] >= 0


def test_judgment_panels_read_the_store(live):
    board = _boards()["ragdrift-judgment.json"]
    by_title = {p["title"]: p for p in _panels(board)}
    values = _variables(live, ".*")

    def value(title: str) -> float:
        return float(live.prom.query(_expand(by_title[title]["targets"][0]["expr"], values))[0]["value"][1])

    assert value("Items in the last batch") == live.batch_items
    assert 0 <= value("Last batch age") < 600
    assert value("Candidates this week") > 0
    assert value("Security review queue") > 0
    (info,) = live.prom.query(_expand(by_title["Judged batch in use"]["targets"][0]["expr"], values))
    assert info["metric"]["batch_id"] == live.batch_id
    traffic = next(v for v in live.judged["views"] if v["view"] == "traffic" and v["stratum"] == "all")
    assert value("Judged precision of all traffic") == pytest.approx(traffic["metrics"]["precision"]["estimate"])


def test_exemplar_queries_return_exemplars(live):
    end = time.time()
    empty = []
    for name, panel, target in _targets():
        if not target.get("exemplar"):
            continue
        expr = _expand(target["expr"], _variables(live, ".*"))
        found = live.prom.api("query_exemplars", query=expr, start=end - 300, end=end)
        trace_ids = [e["labels"].get("trace_id") for series in found for e in series["exemplars"]]
        if not trace_ids or not all(re.fullmatch(r"[0-9a-f]{32}", t or "") for t in trace_ids):
            empty.append(f"{name}: {panel['title']}: {found}")
    assert not empty, "exemplar-enabled queries without trace exemplars:\n" + "\n".join(empty) + _logs(live)


def _exported(text: str) -> dict[str, set[str]]:
    """Family name -> its sample names, as the agent's /metrics shows them."""
    return {f.name: {s.name for s in f.samples} for f in text_string_to_metric_families(text) if f.samples}


def _rule_exprs() -> list[str]:
    doc = yaml.safe_load(RULES.read_text())
    return [str(r["expr"]) for g in doc["groups"] for r in g["rules"]]


def _recorded() -> set[str]:
    doc = yaml.safe_load(RULES.read_text())
    return {r["record"] for g in doc["groups"] for r in g["rules"] if "record" in r}


def test_every_metric_read_is_exported(live):
    exported = {name for samples in _exported(live.metrics_text).values() for name in samples}
    assert any(n.startswith("process_") for n in exported)
    values = _variables(live, ".*")
    used = {(f"dashboard {name}: {panel['title']}", n)
            for name, panel, t in _targets() for n in _metric_names(_expand(t["expr"], values))}
    used |= {("rules", n) for expr in _rule_exprs() for n in _metric_names(expr)}
    recorded = _recorded()
    unknown = sorted((where, n) for where, n in used
                     if n not in exported and n not in PROMETHEUS_OWN and n not in recorded
                     and not (where == "rules" and n in ONCE_MET))
    assert not unknown, f"read but not exported by the agent: {unknown}"
    doc = METRICS_DOC.read_text()
    assert all(f"`{n}`" in doc and "absent until the replica meets one" in doc for n in ONCE_MET)
    assert not [n for where, n in used if where != "rules" and n in recorded], "dashboards read raw metrics only"


def _not_on_a_dashboard() -> set[str]:
    text = METRICS_DOC.read_text()
    section = text.split("## Not on a dashboard", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`(ragdrift_\w+|process_\w+)`", section))


def test_every_exported_metric_is_on_a_dashboard_or_documented_as_not(live):
    values = _variables(live, ".*")
    shown = {n for _, _, t in _targets() for n in _metric_names(_expand(t["expr"], values))}
    documented = _not_on_a_dashboard()
    nowhere, both = [], []
    for family, samples in sorted(_exported(live.metrics_text).items()):
        names = samples | {family}
        on_board, listed = bool(names & shown), bool(names & documented)
        if not on_board and not listed:
            nowhere.append(family)
        if on_board and listed:
            both.append(family)
    assert not nowhere, f"exported, on no dashboard, not in docs/metrics.md 'Not on a dashboard': {nowhere}"
    assert not both, f"on a dashboard and listed as not: {both}"
    exported = {n for samples in _exported(live.metrics_text).values() for n in samples} | set(
        _exported(live.metrics_text))
    assert documented <= exported, f"listed but not exported: {sorted(documented - exported)}"
