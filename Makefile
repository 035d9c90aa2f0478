# Two entry points for a fresh machine: `make demo` and `make test`.
# Each builds its own virtual environment in .venv. Every environment installs
# the versions its file in constraints/ pins, dependencies of dependencies too
# (docs/operations.md, "How tools are pinned").
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
AGENT_CONSTRAINTS := constraints/agent.txt

.PHONY: demo test tools bench bench-peers bench-whylogs lint clean chart-files

$(STAMP): pyproject.toml producer/pyproject.toml $(AGENT_CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -c $(AGENT_CONSTRAINTS) --upgrade pip
	$(BIN)/pip install --quiet -c $(AGENT_CONSTRAINTS) -e './producer[otel,prometheus]' -e '.[test,demo,lint,confluent]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/ragdrift demo

# What the tests use and no root is needed to install, under ~/.cache/ragdrift:
# Helm (tests/test_helm.py), Label Studio in its own venv
# (tests/test_label_studio.py) and LangChain and Haystack in theirs
# (tests/frameworks.py). Each installer checks its pinned version first,
# so a second run is quick and offline. The rest (Prometheus, Alertmanager,
# Chromium, podman, PostgreSQL) are Debian packages: .ci/run installs them as root.
TOOLS := .ci/helm .ci/label-studio .ci/frameworks
tools: $(STAMP)
	@for tool in $(TOOLS); do \
	  PYTHON=$(abspath $(BIN)/python) $$tool || { echo "make: $$tool failed (its output is above)" >&2; exit 1; }; \
	done

test: tools
	$(BIN)/python -m pytest

# ruff (the rule set in pyproject.toml) on agent, tests, bench and grafana, and
# mypy (strict on agent/core). Both run; any finding of either fails.
lint: $(STAMP)
	@status=0; $(BIN)/ruff check . || status=1; $(BIN)/mypy || status=1; exit $$status

# bench/scaleout.py stores in PostgreSQL, as the tests do ($RAGDRIFT_TEST_PG, or
# postgresql://root@127.0.0.1:5432/test): a database of its own per measurement.
bench: $(STAMP)
	$(BIN)/python bench/core.py
	$(BIN)/python bench/exposition.py
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/calibration.py
	$(BIN)/python bench/drift.py
	$(BIN)/python bench/instructions.py
	$(BIN)/python bench/cardinality.py
	$(BIN)/python bench/producer.py
	$(BIN)/python bench/scaleout.py

# The agent beside raw consumers and the tools a team would otherwise build on
# (bench/peers.py). The peers are the `bench` extra; whylogs pins numpy < 2, so it
# has its own environment under ~/.cache/ragdrift, built once.
BENCH_STAMP   := $(VENV)/.bench-installed
WHYLOGS_VENV  := $(HOME)/.cache/ragdrift/bench-whylogs
WHYLOGS_STAMP := $(WHYLOGS_VENV)/.installed-1.6.4
WHYLOGS_CONSTRAINTS := constraints/bench-whylogs.txt
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -c $(AGENT_CONSTRAINTS) -e '.[test,demo,bench]'
	touch $(BENCH_STAMP)

$(WHYLOGS_STAMP): $(WHYLOGS_CONSTRAINTS)
	$(PYTHON) -m venv $(WHYLOGS_VENV)
	$(WHYLOGS_VENV)/bin/pip install --quiet -c $(WHYLOGS_CONSTRAINTS) --upgrade pip
	$(WHYLOGS_VENV)/bin/pip install --quiet -c $(WHYLOGS_CONSTRAINTS) 'whylogs==1.6.4' 'numpy<2' 'pandas<3' 'kafka-python==3.0.12' 'crc32c>=2.7'
	touch $(WHYLOGS_STAMP)

bench-whylogs: $(WHYLOGS_STAMP)

bench-peers: $(BENCH_STAMP) $(WHYLOGS_STAMP)
	$(BIN)/python bench/peers.py

# Helm reads no file outside its chart: the chart keeps copies of the alert
# rules and the Grafana dashboards, which tests/test_helm.py compares byte for byte.
CHART_FILES := helm/ragdrift/files
chart-files:
	cp rules/ragdrift.rules.yaml $(CHART_FILES)/ragdrift.rules.yaml
	mkdir -p $(CHART_FILES)/dashboards
	rm -f $(CHART_FILES)/dashboards/*.json
	for f in grafana/dashboards/*.json; do [ ! -e "$$f" ] || cp "$$f" $(CHART_FILES)/dashboards/; done

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache
