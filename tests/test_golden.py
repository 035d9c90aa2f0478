"""Replay output, stored state, batches and /metrics are what they were when
tests/data/golden was recorded (tests/golden.py says how, and how to re-record)."""

from __future__ import annotations

import difflib
import json

import pytest

from tests.golden import GOLDEN, record

pytestmark = pytest.mark.broker

ARTEFACTS = sorted(str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*") if p.is_file())
SHOWN = 40  # diff lines shown per artefact
WIDTH = 400  # characters shown per line


@pytest.fixture(scope="module")
def recorded(tansu_bin, tmp_path_factory):
    out = tmp_path_factory.mktemp("golden-out")
    record(out, tmp_path_factory.mktemp("golden-work"), tansu_bin)
    return out


def test_the_same_artefacts(recorded):
    assert sorted(str(p.relative_to(recorded)) for p in recorded.rglob("*") if p.is_file()) == ARTEFACTS


@pytest.mark.parametrize("name", ARTEFACTS)
def test_artefact_unchanged(recorded, name):
    want, got = (GOLDEN / name).read_bytes(), (recorded / name).read_bytes()
    if got != want:
        why = " (the input changed: the generator or tests/data/events/invalid)" if name == "traffic.txt" else ""
        pytest.fail(f"{name} differs from the golden file{why}:\n{_diff(want, got)}", pytrace=False)


def _diff(want: bytes, got: bytes) -> str:
    old, new = want.decode(errors="replace").splitlines(), got.decode(errors="replace").splitlines()
    shown = []
    for line in difflib.unified_diff(old, new, "golden", "now", n=1, lineterm=""):
        shown.append(line if len(line) <= WIDTH else line[:WIDTH] + " ...")
    changed = [(a, b) for a, b in zip(old, new) if a != b]
    if changed and all(a.startswith("{") for a, _ in changed[:1]):  # a JSON row: name what changed in it
        shown.insert(0, "first changed row: " + "; ".join(_paths(_load(changed[0][0]), _load(changed[0][1]))[:10]))
    more = f"\n... {len(shown) - SHOWN} more lines" if len(shown) > SHOWN else ""
    return "\n".join(shown[:SHOWN]) + more


def _load(line: str):
    try:
        return json.loads(line)
    except ValueError:
        return line


def _paths(a, b, at: str = "") -> list[str]:
    """Where two JSON values differ, as paths with both values (shortened)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for k in sorted(a.keys() | b.keys()) for p in _paths(a.get(k), b.get(k), f"{at}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in _paths(x, y, f"{at}[{i}]")]
    return [] if a == b else [f"{at or '.'}: {json.dumps(a)[:80]} -> {json.dumps(b)[:80]}"]
