"""The run's last line on tests skipped for a missing service (tests/missing.py),
checked on a separate pytest run of a generated module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MODULE = '''
import pytest
from tests.services import Missing, apt, unavailable

HELM = Missing("helm", "make tools", root=False)

@pytest.fixture(scope="session")
def helm():
    unavailable("helm not found", HELM)

def test_chart(helm): pass
def test_values(helm): pass
def test_alerts(): unavailable("no prometheus-alertmanager", apt("prometheus-alertmanager"))
def test_not_a_service(): pytest.skip("slow")
def test_runs(): pass
'''


def run(tmp_path: Path, module: str, *args: str) -> list[str]:
    (tmp_path / "test_generated.py").write_text(module)
    env = {**os.environ, "CI": "", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.missing", "-p", "no:cacheprovider",
                           "-q", "-rs", *args, str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def test_one_line_groups_skips_by_missing_service_before_the_counts(tmp_path):
    lines = run(tmp_path, MODULE)
    assert lines[-2:] == [
        "skipped 3 tests: helm missing for 2 (no root needed: make tools); prometheus-alertmanager missing "
        "for 1 (needs root: sudo apt-get install prometheus-alertmanager, or run .ci/run)",
        lines[-1],
    ]
    assert "1 passed, 4 skipped" in lines[-1]
    assert sum(line.startswith("skipped ") for line in lines) == 1


def test_one_service_is_named_without_a_count(tmp_path):
    lines = run(tmp_path, MODULE, "-k", "alerts")
    assert lines[-2] == ("skipped 1 test: prometheus-alertmanager missing "
                         "(needs root: sudo apt-get install prometheus-alertmanager, or run .ci/run)")


def test_nothing_printed_when_no_service_is_missing(tmp_path):
    lines = run(tmp_path, MODULE, "-k", "runs or not_a_service")
    assert not [line for line in lines if line.startswith("skipped ")]
