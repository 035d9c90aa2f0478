# Two entry points for a fresh machine: `make demo` and `make test`.
# Each builds its own virtual environment in .venv.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,demo]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/ragdrift demo

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/core.py
	$(BIN)/python bench/exposition.py
	$(BIN)/python bench/throughput.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
