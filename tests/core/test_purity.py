"""The core is pure: no I/O, no clocks, no threads, no adapters.

Two checks: every `import` statement in agent/core/**/*.py names only the stdlib
allow-list, numpy, sklearn, msgspec or agent.core; and importing every core
module in a fresh interpreter pulls in none of the I/O libraries. The arrows
between the other parts of the package are tests/test_layers.py's.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "agent" / "core"
ROOT = CORE.parents[1]

# Named explicitly so the intent survives any change to the allow-list below.
FORBIDDEN = (
    "kafka", "prometheus_client", "sqlalchemy", "sqlite3", "psycopg", "psycopg2", "apscheduler",
    "opentelemetry", "requests", "httpx", "socket", "urllib", "urllib3", "os", "subprocess",
    "threading", "multiprocessing", "asyncio", "time", "io", "shutil", "tempfile", "pathlib",
    "logging", "signal", "selectors", "ssl", "http", "random", "secrets",
)  # fmt: skip

STDLIB_ALLOWED = frozenset(
    {
        "__future__", "abc", "array", "base64", "binascii", "bisect", "collections", "contextlib",
        "copy", "csv", "dataclasses", "datetime", "decimal", "enum", "fractions", "functools", "hashlib",
        "heapq", "itertools", "json", "math", "numbers", "operator", "re", "statistics", "string",
        "struct", "types", "typing", "zlib",
    }
)  # fmt: skip
THIRD_PARTY_ALLOWED = frozenset({"numpy", "sklearn", "scipy", "msgspec"})

# Modules the interpreter itself loads at start-up (or that `datetime`/`dataclasses`
# load internally); their presence in sys.modules says nothing about the core.
PRELOADED_BY_PYTHON = {"os", "time", "io"}


def core_modules() -> list[Path]:
    """Every module of the core, sub-packages (agent/core/sampling/) included."""
    files = sorted(CORE.rglob("*.py"))
    assert len(files) > 10, files
    return files


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def package_of(path: Path) -> list[str]:
    """The package a module's relative imports resolve against (agent.core for a file outside the core)."""
    try:
        return ["agent", "core", *path.parent.relative_to(CORE).parts]
    except ValueError:
        return ["agent", "core"]


def imported_names(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import in a module, at any depth."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = package_of(path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = package[: max(0, len(package) - (node.level - 1))]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((node.lineno, name))
            if name in ("agent", "agent.core"):
                # `from agent import io` imports agent.io
                out += [(node.lineno, f"{name}.{alias.name}") for alias in node.names if name == "agent"]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
            "__import__",
            "import_module",
        ):
            out.append((node.lineno, "<dynamic import>"))
    return out


def allowed(name: str) -> bool:
    top = name.split(".")[0]
    if name == "agent.core" or name.startswith("agent.core."):
        return True
    if top == "agent":
        return False
    return top in STDLIB_ALLOWED or top in THIRD_PARTY_ALLOWED


def _id(path: Path) -> str:
    return str(path.relative_to(CORE))


@pytest.mark.parametrize("path", core_modules(), ids=_id)
def test_core_module_imports_only_the_allow_list(path):
    bad = [(line, name) for line, name in imported_names(path) if not allowed(name)]
    assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize("path", core_modules(), ids=_id)
def test_core_module_imports_nothing_forbidden(path):
    tops = {name.split(".")[0] for _, name in imported_names(path)}
    assert not tops & set(FORBIDDEN), f"{path.name} imports {sorted(tops & set(FORBIDDEN))}"
    assert not any(n.startswith("agent.io") or n == "agent.cli" for _, n in imported_names(path))


def test_allow_list_is_stdlib():
    assert set(sys.stdlib_module_names) >= STDLIB_ALLOWED
    assert not STDLIB_ALLOWED & set(FORBIDDEN)


_PROBE = r"""
import importlib, json, sys
allowed_third_party = {third_party!r}
for name in allowed_third_party:  # what the allowed libraries pull in is not the core's doing
    try:
        importlib.import_module(name)
    except ImportError:
        pass
before = set(sys.modules)
for name in {modules!r}:
    importlib.import_module(name)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_importing_the_core_loads_no_io_library():
    modules = [module_name(p) for p in core_modules() if module_name(p) != "agent.core"]
    # the allowed libraries' modules the core names, submodules included (`scipy.special` loads
    # more of the standard library than `scipy` does; that is scipy's doing, not the core's)
    used = sorted(
        {name for p in core_modules() for _, name in imported_names(p) if name.split(".")[0] in THIRD_PARTY_ALLOWED}
    )
    probe = _PROBE.format(third_party=used, modules=modules)
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert "agent.core.decoder" in loaded
    assert "agent.core.sampling.sampler" in loaded
    checked = set(FORBIDDEN) - PRELOADED_BY_PYTHON
    bad = sorted(m for m in loaded if m.split(".")[0] in checked or m.startswith("agent.io"))
    assert not bad, f"importing agent.core loads {bad}"


def test_the_checker_catches_impure_imports(tmp_path):
    sample = tmp_path / "bad.py"
    sample.write_text(
        "import os\n"
        "import kafka.consumer\n"
        "from time import monotonic\n"
        "from agent.io import store\n"
        "from .. import io\n"
        "from agent.core import tally\n"
        "import msgspec, numpy.linalg\n"
        "def f():\n"
        "    import socket\n"
        "    return __import__('subprocess')\n"
    )
    names = [name for _, name in imported_names(sample)]
    assert [n for n in names if not allowed(n)] == [
        "os", "kafka.consumer", "time", "agent.io", "agent", "agent.io", "socket", "<dynamic import>",
    ]  # fmt: skip


def test_relative_imports_resolve_against_the_modules_own_package():
    assert package_of(CORE / "facts.py") == ["agent", "core"]
    assert package_of(CORE / "sampling" / "risk.py") == ["agent", "core", "sampling"]
    assert module_name(CORE / "sampling" / "__init__.py") == "agent.core.sampling"
    assert any(p.parent.name == "sampling" for p in core_modules())
