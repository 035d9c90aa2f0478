"""The agent loop, its partitions and the core state know features only through their protocols:
no name of a feature, nor of what only one feature uses (each catalog entry's words, agent/catalog.py),
appears in their code (docstrings aside); and features are told apart by name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from agent.catalog import CATALOG
from agent.io.features import Wiring, built
from agent.io.features.drift import Drift
from agent.io.settings.agent import Settings

ROOT = Path(__file__).resolve().parents[1]
WORDS = sorted({word for entry in CATALOG for word in entry.words})
FEATURE_WORDS = re.compile("|".join(("(?<!rag)drift" if w == "drift" else re.escape(w)) for w in WORDS), re.IGNORECASE)
# The shared context every feature may read: the vocabulary, and the baseline and calibrations in force,
# which their features supply to the state's context.
SHARED = ("baseline", "vocabular", "calibrat")
SHARED_CONTEXT = re.compile("|".join(("(?<!rag)drift" if w == "drift" else re.escape(w)) for w in WORDS
                                     if w not in SHARED), re.IGNORECASE)
COMPOSITION = {"FEATURES", "JOBS"}  # agent/service.py's lists: the one place features are named


def words(path: Path) -> set[str]:
    """Identifiers, attributes, imported names and string constants, docstrings and the composition lists aside."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            skipped.add(id(body[0].value))
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in COMPOSITION for t in node.targets):
            skipped.update(id(n) for n in ast.walk(node))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("agent.io.features.", "agent.jobs.",
                                                                                 "agent.io.background.")):
            skipped.update(id(n) for n in ast.walk(node))
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.name)
        elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            found.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.add(node.value)
    return found


@pytest.mark.parametrize("module, forbidden", [
    ("agent/ownership.py", FEATURE_WORDS),
    ("agent/runner.py", FEATURE_WORDS),
    ("agent/service.py", FEATURE_WORDS),
    ("agent/core/state.py", SHARED_CONTEXT),
])
def test_no_feature_is_named_outside_its_modules(module, forbidden):
    assert sorted(w for w in words(ROOT / module) if forbidden.search(w)) == []


def test_every_feature_but_the_always_on_metric_families_has_words_the_loop_must_not_use():
    assert all(entry.words for entry in CATALOG if entry.name != "windows")
    assert FEATURE_WORDS.search("LiveGateWatch") and FEATURE_WORDS.search("drift_days")
    assert not FEATURE_WORDS.search("ragdrift")


def test_two_io_features_of_one_name_are_refused():
    with pytest.raises(ValueError):
        built([Drift, Drift], Wiring(Settings(), None, None))  # refused before either is built
