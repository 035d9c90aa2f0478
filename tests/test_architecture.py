"""docs/architecture.md true to the code where a test can tell: the feature catalog (agent/catalog.py) names
modules that exist, each in one feature only, and exactly the features the agent builds; the tables written
from it and from the core's context declarations are current; the layer table names every part of the
package the layering test places."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from agent import catalog
from agent.service import FEATURES
from tests.test_layers import ALLOWED

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"


def test_every_module_named_exists_and_belongs_to_one_feature():
    seen: dict[str, str] = {}
    for entry in catalog.CATALOG:
        for module in entry.modules:
            assert (ROOT / "agent" / module).is_file(), f"{entry.name}: no agent/{module}"
            assert module not in seen, f"agent/{module} in {seen[module]} and {entry.name}"
            seen[module] = entry.name
        assert all((ROOT / doc).is_file() for doc in entry.docs), entry.docs


def test_the_entries_are_the_features_the_agent_builds_each_with_its_adapter():
    """The metric families, in every state, and one entry per adapter of agent/service.py's FEATURES."""
    entries = {entry.name: entry for entry in catalog.CATALOG}
    assert set(entries) == {"windows"} | {adapter.name for adapter in FEATURES}
    for adapter in FEATURES:
        module = Path(inspect.getfile(adapter)).relative_to(ROOT / "agent").as_posix()
        assert module in entries[adapter.name].modules, f"{adapter.__name__} ({module}) not in its entry"


def test_the_core_halves_are_those_of_the_entries_but_the_calibrations():
    """The score calibrations keep nothing per partition: they supply the fits in force (`SUPPLIED`)."""
    names = [feature.name for feature in catalog.partition_features()]
    assert names == [entry.name for entry in catalog.CATALOG if entry.name != "calibration"]


def test_the_tables_in_docs_architecture_are_current():
    text = DOC.read_text()
    assert catalog.written(text) == text, "run: python -m agent.catalog --write"


def test_the_layer_table_names_every_part_of_the_package():
    layers = DOC.read_text().split("## Layers", 1)[1].split("\n## ", 1)[0]
    for part in ALLOWED:
        if part == "agent":
            continue
        path = part.replace(".", "/")
        assert f"`{path}/`" in layers or f"`{path}.py`" in layers or part == "agent.schema", part


def test_every_path_the_document_names_exists():
    named = set(re.findall(r"`((?:agent|tests|producer|rules|helm|grafana|bench)/[\w./-]+)`", DOC.read_text()))
    assert named and sorted(p for p in named if not (ROOT / p).exists()) == []


def test_what_a_feature_reads_from_another_is_a_declared_need():
    """A context field held in force is supplied by one feature; a feature whose `observe` reads one
    supplied by another declares that one in its adapter's `needs` (the judgment queue reads drift's
    baseline), so `check-config` names what it loses when that one is off. The metric families are
    always on and read the calibrations: without them nothing is calibrated, which is their meaning."""
    from agent.core.feature import SUPPLIED

    adapters = {adapter.name: adapter for adapter in FEATURES}
    assert set(SUPPLIED.values()) <= set(adapters)
    for core in catalog.partition_features():
        if core.name not in adapters:
            continue  # the metric families
        suppliers = {SUPPLIED[field] for field in core.reads if field in SUPPLIED} - {core.name}
        assert suppliers <= set(adapters[core.name].needs), core.name
