"""Replay output, stored state, batches and /metrics are what they were when
tests/data/golden was recorded (tests/golden.py says how, and how to re-record)."""

from __future__ import annotations

import difflib
import json
import math
import re

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
    if got != want and not _float_noise(want, got):
        why = " (the input changed: the generator or tests/data/events/invalid)" if name == "traffic.txt" else ""
        pytest.fail(f"{name} differs from the golden file{why}:\n{_diff(want, got)}", pytrace=False)


# numpy's vectorized transcendental functions (its AVX-512 paths) and OpenBLAS's dot
# kernels are chosen by the CPU, so a drift statistic, a baseline's bin centres and
# the version hashed from them can differ in their last bits from one machine to
# another. JSON artefacts that differ only so are the same artefact.
FLOAT_DIGITS = 1e-9  # relative
FLOAT = re.compile(r"-?\d+(?:\.\d+(?:[eE][+-]?\d+)?|[eE][+-]?\d+)")  # a JSON number that is not an integer
VERSION = re.compile(r'"version": "[0-9a-f]{16}"')  # a baseline's version: the hash of its content, floats included
HEX = re.compile(r"[0-9a-f]{16}")


def _float_noise(want: bytes, got: bytes) -> bool:
    """Each differing line is JSON written alike (the same text once its floats and baseline
    versions are blanked out, each float as Python writes it) and its floats agree within
    `FLOAT_DIGITS`; and some float differs, since a version differs only with the floats it hashes."""
    old, new = want.decode().splitlines(), got.decode().splitlines()
    if len(old) != len(new):
        return False
    floats = []
    for a, b in zip(old, new):
        if a == b:
            continue
        if _blank(a) != _blank(b):
            return False
        floats += [(x, y) for x, y in zip(_floats(a), _floats(b), strict=True) if x != y]  # as many: alike
        try:
            if not _close(json.loads(a), json.loads(b)):
                return False
        except ValueError:
            return False
    return bool(floats) and all(repr(float(t)) == t for pair in floats for t in pair)


def _blank(line: str) -> str:
    return FLOAT.sub("<float>", VERSION.sub('"version": "<version>"', line))


def _floats(line: str) -> list[str]:
    return FLOAT.findall(VERSION.sub("", line))  # a version's hex digits can read as a number


def _close(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=FLOAT_DIGITS, abs_tol=1e-300)
    if isinstance(a, str) and isinstance(b, str) and a != b:  # `_blank` let only versions differ
        return bool(HEX.fullmatch(a) and HEX.fullmatch(b))
    return type(a) is type(b) and a == b


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


def test_float_noise_is_only_last_bits_and_the_versions_hashed_from_them():
    row = {"version": "49c38e399f77faba", "centres": [55.56978250434781, 1.0], "n": 3, "app": "a"}
    assert _float_noise(_lines(row), _lines({**row, "centres": [55.56978250434782, 1.0]}))
    assert _float_noise(_lines(row), _lines({**row, "centres": [55.56978250434782, 1.0], "version": "7a1c5e9f82be91b0"}))
    assert not _float_noise(_lines(row), _lines({**row, "centres": [55.5698, 1.0]}))
    assert not _float_noise(_lines(row), _lines({**row, "n": 3.0}))
    assert not _float_noise(_lines(row), _lines({**row, "app": "b"}))
    assert not _float_noise(_lines(row), _lines({**row, "version": "v2"}))
    assert not _float_noise(_lines(row), _lines({**row, "version": "7a1c5e9f82be91b0"}))  # only the version: no
    assert not _float_noise(_lines(row), json.dumps(row, sort_keys=True).encode() + b"\n")  # written otherwise
    assert not _float_noise(_lines(row), _lines(row).replace(b"55.56978250434781", b"5.556978250434781e1"))
    assert not _float_noise(_lines(row), _lines(row, row))
    assert not _float_noise(b"ragdrift_x_sum 1.0\n", b"ragdrift_x_sum 1.0000000000000002\n")  # not JSON: exact


def _lines(*rows) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)
