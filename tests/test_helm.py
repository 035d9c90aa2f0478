"""The Helm chart (helm/ragdrift): `helm lint --strict`, every ci/*-values.yaml
scenario rendered with `helm template`, the built-in kinds validated offline
with kubernetes-validate in strict mode (unknown fields rejected), the
Prometheus Operator resources checked here, and the chart's copies of the
rules and dashboards compared byte for byte with the originals.

Helm comes from .ci/helm (see tests/helm.py); without it the rendering tests
fail in CI and skip elsewhere.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import (
    SchemaNotFoundError,
    ValidationError,
    latest_version,
)

import agent
from agent.io.settings import agent as agent_settings
from agent.runner import SHUTDOWN_SECONDS
from tests.helm import Helm, HelmError, helm_bin_fixture  # noqa: F401 - the `helm_bin` fixture

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "ragdrift"
RULES = ROOT / "rules" / "ragdrift.rules.yaml"
DASHBOARDS = ROOT / "grafana" / "dashboards"
SCENARIOS = sorted((CHART / "ci").glob("*-values.yaml"))
TEST_DASHBOARD = ROOT / "tests" / "data" / "helm" / "retrievals.json"
# The chart's kubeVersion floor (the oldest kubernetes-validate knows) and the newest.
KUBERNETES = ("1.25.0", latest_version())
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}  # monitoring.coreos.com/v1: no schema offline


@pytest.fixture(scope="module")
def helm(helm_bin, tmp_path_factory) -> Helm:
    return Helm(helm_bin, tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="module")
def rendered(helm) -> dict[str, list[dict]]:
    return {path.name: helm.template(CHART, path) for path in SCENARIOS}


def one(docs: list[dict], kind: str) -> dict:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} objects rendered"
    return found[0]


def container(docs: list[dict]) -> dict:
    (c,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return c


# -- the copies Helm needs inside the chart (no helm needed) -----------------


def test_the_charts_rules_are_a_byte_for_byte_copy_of_the_rules_file():
    copy = CHART / "files" / "ragdrift.rules.yaml"
    assert copy.read_bytes() == RULES.read_bytes(), "run `make chart-files`"


def test_the_charts_dashboards_are_byte_for_byte_copies_of_grafana_dashboards():
    originals = {p.name: p.read_bytes() for p in DASHBOARDS.glob("*.json")}
    copies = {p.name: p.read_bytes() for p in (CHART / "files" / "dashboards").glob("*.json")}
    assert sorted(copies) == sorted(originals), "run `make chart-files`"
    for name, text in originals.items():
        assert copies[name] == text, f"{name} differs: run `make chart-files`"


def test_the_chart_runs_the_package_version():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["appVersion"] == agent.__version__


def test_the_scenarios_cover_sqlite_postgresql_and_autoscaling():
    assert {"sqlite-values.yaml", "postgresql-values.yaml", "autoscaling-values.yaml"} <= {p.name for p in SCENARIOS}


# -- helm lint and the schema ------------------------------------------------


@pytest.mark.parametrize("values", [None, *SCENARIOS], ids=lambda p: p.name if p else "defaults")
def test_helm_lint_strict_passes(helm, values):
    out = helm.run("lint", "--strict", str(CHART), *(["--values", str(values)] if values else []))
    assert "0 chart(s) failed" in out


def test_the_values_schema_rejects_a_misspelt_key(helm):
    with pytest.raises(HelmError, match="servicemonitor"):
        helm.template(CHART, set_values={"servicemonitor.enabled": "true"})


def test_the_service_monitor_job_must_match_the_rules_up_selector(helm):
    with pytest.raises(HelmError, match=r"serviceMonitor\.job"):
        helm.template(CHART, set_values={"serviceMonitor.job": "rag-monitor"})


# -- Kubernetes schemas -------------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES)
@pytest.mark.parametrize("scenario", [p.name for p in SCENARIOS])
def test_built_in_kinds_validate_strictly(rendered, scenario, version):
    for doc in rendered[scenario]:
        if doc["kind"] in OPERATOR_KINDS:
            continue
        where, problem = f"{doc['kind']}/{doc['metadata']['name']}", None
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except ValidationError as exc:
            problem = f"at {'.'.join(map(str, exc.path))}: {exc.message}"
        except SchemaNotFoundError as exc:
            problem = exc.message
        if problem:  # outside the except block: no chained traceback
            pytest.fail(f"{scenario}: {where} {problem}")


def test_strict_validation_rejects_an_unknown_field(rendered):
    deployment = one(rendered["sqlite-values.yaml"], "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFileSystem"] = True  # misspelt
    with pytest.raises(ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES[-1], strict=True)


def test_the_service_monitor_scrapes_the_service_as_a_job_the_rules_select(rendered):
    docs = rendered["postgresql-values.yaml"]
    monitor, service = one(docs, "ServiceMonitor"), one(docs, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    (job,) = [r["replacement"] for r in endpoint["relabelings"] if r.get("targetLabel") == "job"]
    selector = re.search(r'up\{job=~"([^"]+)"\}', RULES.read_text()).group(1)
    assert re.fullmatch(selector, job)


def test_the_prometheus_rule_holds_the_rules_files_groups_verbatim(rendered):
    rule = one(rendered["postgresql-values.yaml"], "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert set(rule["spec"]) == {"groups"}
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]
    for group in rule["spec"]["groups"]:
        assert group["name"] and group["rules"]
        for r in group["rules"]:
            assert ("alert" in r) != ("record" in r) and r["expr"]
    # Prometheus' own templates reach it untouched: Helm did not expand them.
    summaries = [r["annotations"]["summary"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert any("{{ $labels.app }}" in s for s in summaries)


def test_operator_resources_are_off_by_default(rendered):
    kinds = {d["kind"] for d in rendered["sqlite-values.yaml"]}
    assert not kinds & OPERATOR_KINDS


# -- the Deployment -----------------------------------------------------------


@pytest.mark.parametrize("scenario", [p.name for p in SCENARIOS])
def test_the_agent_runs_non_root_on_a_read_only_root(rendered, scenario):
    docs = rendered[scenario]
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    c = container(docs)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 10001
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert pod["automountServiceAccountToken"] is False
    volumes = {v["name"]: v for v in pod["volumes"]}
    (tmp,) = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert volumes[tmp["name"]] == {"name": tmp["name"], "emptyDir": {}}
    assert pod["terminationGracePeriodSeconds"] > max(SHUTDOWN_SECONDS, 10)  # docs/operations.md, Shutdown


@pytest.mark.parametrize("scenario", [p.name for p in SCENARIOS])
def test_probes_ask_the_agents_health_endpoints_on_the_metrics_port(rendered, scenario):
    docs = rendered[scenario]
    c = container(docs)
    (port,) = c["ports"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"], "scheme": "HTTP"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"], "scheme": "HTTP"}
    service = one(docs, "Service")
    assert [p["targetPort"] for p in service["spec"]["ports"]] == [port["name"]]
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]


def test_a_config_change_rolls_the_pods(helm):
    def checksum(**values):
        deployment = one(helm.template(CHART, set_values=values), "Deployment")
        return deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]

    assert checksum() == checksum()
    assert checksum() != checksum(**{"config.logging.level": "DEBUG"})


def test_the_live_gate_values_reach_the_agents_config(helm, tmp_path):
    """Off by default (no section rendered); set, the section reaches the
    agent's file as written; a wrong type or range is refused by the schema."""
    def config_of(docs: list[dict]) -> dict:
        (config,) = [d for d in docs if d["kind"] == "ConfigMap" and "ragdrift.yaml" in d["data"]]
        return yaml.safe_load(config["data"]["ragdrift.yaml"])

    assert "live_gate" not in config_of(helm.template(CHART))
    gate = {"enabled": True, "stable": "support-3.14.0", "candidate": "support-3.15.0", "window_days": 7,
            "refresh_seconds": 300}
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"config": {"live_gate": gate}}))
    assert config_of(helm.template(CHART, values))["live_gate"] == gate
    for bad in ({"enabled": "yes"}, {"window_days": 0}, {"refresh_seconds": 0}, {"candidate": "v" * 129}):
        values.write_text(yaml.safe_dump({"config": {"live_gate": {**gate, **bad}}}))
        with pytest.raises(HelmError, match="live_gate"):
            helm.template(CHART, values)


@pytest.mark.parametrize("scenario", [p.name for p in SCENARIOS])
def test_the_rendered_config_is_one_the_agent_accepts(rendered, scenario, tmp_path):
    """The ConfigMap's file, the pod's secret variables and mounted files, loaded as the agent would."""
    docs = rendered[scenario]
    c = container(docs)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert c["args"] == ["run", "--config", "/etc/ragdrift/ragdrift.yaml"]
    config_volume = next(v for v in pod["volumes"] if "configMap" in v)
    assert {"name": config_volume["name"], "mountPath": "/etc/ragdrift", "readOnly": True} in c["volumeMounts"]
    (config,) = [d for d in docs if d["kind"] == "ConfigMap" and "ragdrift.yaml" in d["data"]]  # dashboards aside
    assert config["metadata"]["name"] == config_volume["configMap"]["name"]
    raw = yaml.safe_load(config["data"]["ragdrift.yaml"])
    secret_values = {"RAGDRIFT_STORE__URL": "postgresql+psycopg://ragdrift:pw@postgresql/ragdrift",
                     "RAGDRIFT_JUDGMENT__SALT": "s3cret", "LABEL_STUDIO_TOKEN": "t0ken"}
    environ = {}
    for env in c.get("env", []):
        assert "secretKeyRef" in env["valueFrom"], env
        environ[env["name"]] = secret_values[env["name"]]
    client = raw["kafka"].get("client", {})
    # The password's key in the chosen client library's names.
    confluent = raw["kafka"].get("library") == "confluent-kafka"
    password = "sasl.password" if confluent else "sasl_plain_password"
    sasl = f"{password}_file" in client
    if sasl:  # a file in the mounted Secret
        path = Path(client[f"{password}_file"])
        mount = next(m for m in c["volumeMounts"] if Path(m["mountPath"]) == path.parent)
        secret = next(v for v in pod["volumes"] if v["name"] == mount["name"])["secret"]
        assert [i["path"] for i in secret["items"]] == [path.name]
        (tmp_path / "password").write_text("kafka-pw\n")
        client[f"{password}_file"] = str(tmp_path / "password")
    (tmp_path / "ragdrift.yaml").write_text(yaml.safe_dump(raw))

    s = agent_settings.load(tmp_path / "ragdrift.yaml", environ=environ)

    assert s.metrics.port == c["ports"][0]["containerPort"]
    assert s.metrics.address == "0.0.0.0"
    data = next(m["mountPath"] for m in c["volumeMounts"] if m["name"] == "data")
    assert s.judgment.export_dir.startswith(data + "/")
    if s.store.url.startswith("sqlite"):
        assert s.store.url.startswith(f"sqlite:///{data}/")
        assert one(docs, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    if sasl:
        assert s.kafka.client[password] == "kafka-pw"
    if "RAGDRIFT_STORE__URL" in environ:
        assert s.store.url == environ["RAGDRIFT_STORE__URL"]
    if "RAGDRIFT_JUDGMENT__SALT" in environ:
        assert s.judgment.salt == environ["RAGDRIFT_JUDGMENT__SALT"]
    # Every other variable is the one the agent reads the Label Studio token from.
    assert set(environ) - {"RAGDRIFT_STORE__URL", "RAGDRIFT_JUDGMENT__SALT"} <= {s.judgment.label_studio.token_env}


@pytest.mark.parametrize(("scenario", "password"), [("sqlite-values.yaml", "sasl_plain_password"),
                                                     ("confluent-values.yaml", "sasl.password")])
def test_sasl_scenario_reads_the_password_from_the_secret(rendered, scenario, password):
    """In the names of the client library the configuration chooses."""
    raw = yaml.safe_load(one(rendered[scenario], "ConfigMap")["data"]["ragdrift.yaml"])
    assert raw["kafka"]["client"][f"{password}_file"].startswith("/var/run/secrets/ragdrift/")
    assert set(raw["kafka"]["client"]) & {"sasl_plain_password", "sasl.password", "sasl_plain_password_file",
                                          "sasl.password_file"} == {f"{password}_file"}


# -- replicas and the store ---------------------------------------------------


@pytest.mark.parametrize("values", [
    {"replicaCount": "3"},
    {"replicaCount": "2", "config.store.url": "sqlite:////var/lib/ragdrift/state.db",
     "persistence.accessModes[0]": "ReadWriteMany"},
])
def test_more_than_one_replica_on_sqlite_is_refused(helm, values):
    with pytest.raises(HelmError, match="needs PostgreSQL"):
        helm.template(CHART, set_values=values)


def test_the_postgresql_url_may_come_from_the_file_or_a_secret(helm, rendered):
    docs = helm.template(CHART, set_values={"replicaCount": "3", "persistence.enabled": "false",
                                            "config.store.url": "postgresql+psycopg://ragdrift@db/ragdrift"})
    assert one(docs, "Deployment")["spec"]["replicas"] == 3
    assert one(docs, "Deployment")["spec"]["strategy"] == {"type": "RollingUpdate"}
    deployment = one(rendered["postgresql-values.yaml"], "Deployment")
    assert deployment["spec"]["replicas"] == 3
    (env,) = [e for e in container(rendered["postgresql-values.yaml"])["env"] if e["name"] == "RAGDRIFT_STORE__URL"]
    assert env["valueFrom"]["secretKeyRef"] == {"name": "ragdrift-postgresql", "key": "url"}


def test_replicas_sharing_a_read_write_once_volume_are_refused(helm):
    with pytest.raises(HelmError, match="ReadWriteMany"):
        helm.template(CHART, set_values={"replicaCount": "2",
                                         "config.store.url": "postgresql+psycopg://ragdrift@db/ragdrift"})


# -- autoscaling on lag --------------------------------------------------------
# The autoscaling scenario is linted and validated with the others above.

POSTGRESQL = {"config.store.url": "postgresql+psycopg://ragdrift@db/ragdrift", "persistence.enabled": "false"}
AUTOSCALING = {**POSTGRESQL, "autoscaling.enabled": "true", "autoscaling.partitions": "6"}


def test_the_autoscaler_scales_the_deployment_on_the_average_lag_per_pod(rendered):
    docs = rendered["autoscaling-values.yaml"]
    hpa, deployment = one(docs, "HorizontalPodAutoscaler"), one(docs, "Deployment")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": deployment["apiVersion"], "kind": "Deployment",
                                             "name": deployment["metadata"]["name"]}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 12)
    assert hpa["spec"]["metrics"] == [{"type": "Pods", "pods": {
        "metric": {"name": "ragdrift_consumer_lag_messages"},
        "target": {"type": "AverageValue", "averageValue": "10000"}}}]
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 300
    assert "replicas" not in deployment["spec"]  # the autoscaler owns it


@pytest.mark.parametrize("scenario", ["sqlite-values.yaml", "postgresql-values.yaml"])
def test_no_autoscaler_unless_enabled(rendered, scenario):
    docs = rendered[scenario]
    assert "HorizontalPodAutoscaler" not in {d["kind"] for d in docs}
    assert one(docs, "Deployment")["spec"]["replicas"] >= 1


def test_the_autoscalers_behavior_and_target_pass_through(helm, tmp_path):
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 600, "selectPolicy": "Min",
                              "policies": [{"type": "Pods", "value": 2, "periodSeconds": 120}]},
                "scaleUp": None}  # null removes the chart's default
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"autoscaling": {"behavior": behavior, "targetLagPerReplica": 2_000_000,
                                                      "metricName": "ragdrift_lag"}}))
    hpa = one(helm.template(CHART, values, set_values=AUTOSCALING), "HorizontalPodAutoscaler")
    assert hpa["spec"]["behavior"] == {"scaleDown": behavior["scaleDown"]}
    assert hpa["spec"]["metrics"][0]["pods"] == {"metric": {"name": "ragdrift_lag"},
                                                 "target": {"type": "AverageValue", "averageValue": "2000000"}}
    for version in KUBERNETES:
        kubernetes_validate.validate(hpa, version, strict=True)


def test_more_replicas_than_partitions_are_refused(helm):
    with pytest.raises(HelmError, match=r"maxReplicas 7 is above autoscaling\.partitions 6: .* idles"):
        helm.template(CHART, set_values={**AUTOSCALING, "autoscaling.maxReplicas": "7"})
    docs = helm.template(CHART, set_values={**AUTOSCALING, "autoscaling.maxReplicas": "6"})
    assert one(docs, "HorizontalPodAutoscaler")["spec"]["maxReplicas"] == 6


def test_fewer_max_than_min_replicas_are_refused(helm):
    with pytest.raises(HelmError, match=r"minReplicas 4 is above autoscaling\.maxReplicas 3"):
        helm.template(CHART, set_values={**AUTOSCALING, "autoscaling.minReplicas": "4"})


@pytest.mark.parametrize("values", [
    {"autoscaling.maxReplicas": "1"},
    {"autoscaling.minReplicas": "2", "persistence.accessModes[0]": "ReadWriteMany"},
])
def test_autoscaling_on_sqlite_is_refused(helm, values):
    with pytest.raises(HelmError, match=r"autoscaling \(up to maxReplicas \d+\) needs PostgreSQL.*autoscaling\.enabled to false"):
        helm.template(CHART, set_values={"autoscaling.enabled": "true", "autoscaling.partitions": "6", **values})


def test_autoscaled_replicas_sharing_a_read_write_once_volume_are_refused(helm):
    values = {**AUTOSCALING, "persistence.enabled": "true"}
    with pytest.raises(HelmError, match=r"autoscaling \(up to maxReplicas 3\) mounts one volume.*ReadWriteMany"):
        helm.template(CHART, set_values=values)


def test_autoscaling_needs_the_partition_count(helm):
    with pytest.raises(HelmError, match=r"autoscaling\.partitions: Invalid type\. Expected: integer, given: null"):
        helm.template(CHART, set_values={**POSTGRESQL, "autoscaling.enabled": "true"})
    with pytest.raises(HelmError, match=r"autoscaling: partitions is required"):
        helm.template(CHART, set_values={**AUTOSCALING, "autoscaling.partitions": "null"})


@pytest.mark.parametrize(("values", "error"), [
    ({"autoscaling.partitions": "0"}, r"autoscaling\.partitions: Must be greater than or equal to 1"),
    ({"autoscaling.minReplicas": "0"}, r"autoscaling\.minReplicas: Must be greater than or equal to 1"),
    ({"autoscaling.targetLagPerReplica": "0"}, r"autoscaling\.targetLagPerReplica: Must be greater"),
    ({"autoscaling.targetLagPerReplica": "lots"}, r"autoscaling\.targetLagPerReplica: Invalid type"),
    ({"autoscaling.metricName": ""}, r"autoscaling\.metricName: Does not match pattern"),
    ({"autoscaling.metricName": "lag: 1"}, r"autoscaling\.metricName: Does not match pattern"),
    ({"autoscaling.behavior": "fast"}, r"autoscaling\.behavior: Invalid type"),
    ({"autoscaling.targetCPU": "80"}, r"Additional property targetCPU"),
])
def test_the_values_schema_rejects_bad_autoscaling_values(helm, values, error):
    with pytest.raises(HelmError, match=error):
        helm.template(CHART, set_values={**AUTOSCALING, **values})


def test_the_operations_guides_autoscaling_example_and_adapter_rule_fit_the_chart(helm, tmp_path):
    """The example renders a valid autoscaler, and the adapter rule serves the
    metric it asks for from families the agent exports."""
    section = (ROOT / "docs" / "operations.md").read_text().split("### Autoscaling on lag", 1)[1]
    example, (rule,) = (yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)[:2])
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(example))
    hpa = one(helm.template(CHART, values, set_values=POSTGRESQL), "HorizontalPodAutoscaler")
    kubernetes_validate.validate(hpa, KUBERNETES[-1], strict=True)
    metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
    assert rule["seriesQuery"].startswith(metric + "{") and "name" not in rule  # served under its own name
    assert rule["resources"]["overrides"] == {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
    metrics_doc = (ROOT / "docs" / "metrics.md").read_text()
    families = set(re.findall(r"ragdrift_\w+", rule["metricsQuery"]))
    assert families == {metric, "ragdrift_assigned_partitions"}
    for family in families:
        assert f"| `{family}` | gauge |" in metrics_doc


# -- dashboards -----------------------------------------------------------------


def test_the_dashboard_scenario_renders_one_config_map_per_chart_dashboard(rendered):
    files = sorted((CHART / "files" / "dashboards").glob("*.json"))
    maps = [d for d in rendered["postgresql-values.yaml"] if "grafana_dashboard" in d["metadata"]["labels"]]
    assert sorted(name for m in maps for name in m["data"]) == [p.name for p in files]
    for m in maps:
        ((name, text),) = m["data"].items()
        assert text == (CHART / "files" / "dashboards" / name).read_text()


def test_each_dashboard_becomes_a_config_map_for_the_grafana_sidecar_verbatim(helm, tmp_path):
    chart = tmp_path / "ragdrift"
    shutil.copytree(CHART, chart)
    target = chart / "files" / "dashboards" / "Retrievals_Overview.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TEST_DASHBOARD, target)
    docs = helm.template(chart, set_values={"dashboards.enabled": "true"})
    (cm,) = [d for d in docs if d["metadata"]["name"].endswith("-dashboard-retrievals-overview")]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["data"] == {target.name: TEST_DASHBOARD.read_text()}  # "{{app}}" and "${datasource}" kept
    kubernetes_validate.validate(cm, KUBERNETES[-1], strict=True)
    off = helm.template(chart)
    assert not [d for d in off if "grafana_dashboard" in d["metadata"]["labels"]]


def test_the_readmes_values_example_renders_and_validates(helm, tmp_path):
    section = (ROOT / "README.md").read_text().split("## Deploying with Helm", 1)[1]
    example = tmp_path / "values.yaml"
    example.write_text(re.search(r"```yaml\n(.*?)```", section, re.DOTALL).group(1))
    docs = helm.template(CHART, example)
    assert one(docs, "Deployment")["spec"]["replicas"] == 3
    assert {"ServiceMonitor", "PrometheusRule"} <= {d["kind"] for d in docs}
    for doc in docs:
        if doc["kind"] not in OPERATOR_KINDS:
            kubernetes_validate.validate(doc, KUBERNETES[-1], strict=True)
