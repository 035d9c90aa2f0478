"""Every arrow between the agent's layers points down.

`ALLOWED` states, for each part of the package, the parts it may import
(every `import` statement at any depth, function-level ones included; a
dynamic import is never allowed). The core is pure (tests/core/test_purity.py
checks what else it may import); io adapts the core to the world; the jobs
run on both; the agent loop (ownership, runner) wires io around the core,
and service composes it with the features and the jobs; the CLI may use
anything. A part not listed is a new one: it must be placed here.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from agent.ownership import Ownership
from agent.runner import Agent

AGENT = Path(__file__).resolve().parents[1] / "agent"
ANYTHING = None
ALLOWED: dict[str, set[str] | None] = {
    "agent": set(),  # the package itself: its version, which every part may import
    "agent.schema": set(),  # the event schema, a data file
    "agent.catalog": {"agent.core"},  # where each feature lives; its context table reads the core features
    "agent.core": {"agent.core"},
    "agent.io": {"agent.core", "agent.io"},
    "agent.jobs": {"agent.core", "agent.io", "agent.jobs"},
    "agent.ownership": {"agent.core", "agent.io"},
    "agent.runner": {"agent.core", "agent.io", "agent.ownership"},
    "agent.service": {"agent.core", "agent.io", "agent.jobs", "agent.runner"},
    "agent.synth": {"agent.core", "agent.synth"},
    "agent.demo": {"agent.core", "agent.io", "agent.synth", "agent.service", "agent.demo"},
    "agent.cli": ANYTHING,
}


def part_of(module: str) -> str:
    """`agent.io.store.queue` -> `agent.io`; `agent.runner` -> itself; `agent` -> itself."""
    return ".".join(module.split(".")[:2])


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(AGENT.parent).with_suffix("").parts).removesuffix(".__init__")


def imports(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in `source`, at any depth; `<dynamic import>` for the others."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            name = ".".join(p for p in (base, node.module) if p)
            out.append((node.lineno, name))
            if name == "agent":  # `from agent import io` imports agent.io
                out += [(node.lineno, f"agent.{alias.name}") for alias in node.names if alias.name != "__version__"]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
                "__import__", "import_module"):
            out.append((node.lineno, "<dynamic import>"))
    return out


def violations(module: str, found: list[tuple[int, str]]) -> list[tuple[int, str]]:
    part = part_of(module)
    assert part in ALLOWED, f"{part} is not placed in ALLOWED"
    allowed = ALLOWED[part]
    if allowed is ANYTHING:
        return []
    return [(line, name) for line, name in found
            if name == "<dynamic import>" or (name.startswith("agent.") and part_of(name) not in allowed | {part})]


def modules() -> list[Path]:
    return sorted(AGENT.rglob("*.py"))


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(AGENT)))
def test_every_import_points_down(path):
    module = module_of(path)
    bad = violations(module, imports(path.read_text(), module, path.name == "__init__.py"))
    assert not bad, f"{module} imports {bad}"


def test_the_checker_catches_an_arrow_up():
    source = "from agent.jobs import batch\ndef f():\n    from agent.runner import Agent\n    import agent.cli\n"
    found = imports(source, "agent.io.background.judgment")
    assert violations("agent.io.background.judgment", found) == [
        (1, "agent.jobs"), (3, "agent.runner"), (4, "agent.cli")]
    assert violations("agent.cli.report", found) == []
    relative = imports("from ..store import queue\nfrom . import judgment\n", "agent.io.background.drift")
    assert [name for _, name in relative] == ["agent.io.store", "agent.io.background"]
    assert violations("agent.core.state", imports("from agent import io\n", "agent.core.state")) == [(1, "agent.io")]


@pytest.mark.parametrize("cls", [Agent, Ownership])
def test_the_agent_loop_takes_few_keyword_only_arguments(cls):
    """Features travel as one list: the loop's constructors do not grow with them."""
    params = list(inspect.signature(cls).parameters.values())
    assert len(params) <= 7
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)


PRODUCER = AGENT.parent / "producer" / "ragdrift_producer"


@pytest.mark.parametrize("path", sorted(PRODUCER.rglob("*.py")), ids=lambda p: p.name)
def test_the_producer_library_imports_nothing_of_the_agent(path):
    """It runs inside a team's app, installed without the agent (docs/producers.md)."""
    found = imports(path.read_text(), f"ragdrift_producer.{path.stem}", path.name == "__init__.py")
    assert [(line, name) for line, name in found if name.split(".")[0] == "agent" or name == "<dynamic import>"] == []


def test_only_the_demo_uses_the_producer_library():
    users = {module_of(path) for path in modules()
             if any(name.split(".")[0] == "ragdrift_producer" for _, name in imports(path.read_text(), module_of(path)))}
    assert users and {part_of(user) for user in users} <= {"agent.demo"}
