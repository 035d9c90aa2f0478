"""Earlier commits of this repository, each installed in a virtual environment of its own.

`installed(commit)` takes the commit's tree out of git (`git archive`: no work
tree is touched), makes a venv beside the project's, and installs the agent
there with today's `constraints/agent.txt`, so the earlier release runs on the
dependency versions CI has. Each venv is kept under
``~/.cache/ragdrift/upgrade/<commit>`` (``RAGDRIFT_UPGRADE_CACHE`` moves it)
with a stamp naming the commit, the constraints' SHA-256 and the interpreter:
a rerun with the same three takes no time, any change installs afresh. A lock
file keeps two runs from installing the same commit at once.

When the install cannot reach the package index (no network) or the commit is
not in this clone, the test FAILS in CI (``CI=true``) and skips elsewhere
(tests/missing.py); any other install failure fails the test.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.services import Missing, unavailable

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints" / "agent.txt"
STAMP = ".ragdrift-release"
MISSING = Missing("an earlier release's venv (needs the package index and the full git history)",
                  "run the test once with network access, in a clone with its history", root=False)
# What pip says when the index cannot be reached: the only install failure that skips outside CI.
OFFLINE = ("NewConnectionError", "Network is unreachable", "Temporary failure in name resolution",
           "Name or service not known", "ConnectTimeoutError", "ProxyError", "No matching distribution found")


def cache() -> Path:
    return Path(os.environ.get("RAGDRIFT_UPGRADE_CACHE") or Path.home() / ".cache" / "ragdrift" / "upgrade")


def stamp(commit: str) -> str:
    version = ".".join(map(str, sys.version_info[:3]))
    return f"{commit} {hashlib.sha256(CONSTRAINTS.read_bytes()).hexdigest()} python {version}\n"


def installed(commit: str) -> Path:
    """The python of a venv holding the agent of `commit` (a full hash), installed on first use."""
    venv = cache() / commit
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{commit}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / STAMP).is_file() and (venv / STAMP).read_text() == stamp(commit):
            return venv / "bin" / "python"
        shutil.rmtree(venv, ignore_errors=True)
        with tempfile.TemporaryDirectory(prefix="ragdrift-release-") as tmp:
            _install(commit, Path(tmp), venv)
        (venv / STAMP).write_text(stamp(commit))
    return venv / "bin" / "python"


def _install(commit: str, tmp: Path, venv: Path) -> None:
    tree = tmp / "src"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit],
                             capture_output=True, timeout=120)
    if archive.returncode != 0:
        unavailable(f"commit {commit} is not in this clone: {archive.stderr.decode(errors='replace').strip()}",
                    MISSING)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True, timeout=120)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                           "--disable-pip-version-check", "-c", str(CONSTRAINTS), str(tree)],
                          capture_output=True, text=True, cwd=tmp, timeout=1800)
    if done.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        output = done.stdout + done.stderr
        tail = "\n".join(output.strip().splitlines()[-15:])
        if any(sign in output for sign in OFFLINE):
            unavailable(f"cannot install commit {commit[:12]}: the package index is unreachable:\n{tail}", MISSING)
        pytest.fail(f"pip cannot install the agent of commit {commit[:12]} with {CONSTRAINTS.name}:\n{tail}",
                    pytrace=False)
