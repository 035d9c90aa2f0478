"""Constructors with more than three parameters take the rest by keyword.

The rule: a public class of agent/ whose constructor has more than three
parameters takes at most three of them positionally, the rest keyword-only.
A record of four keeps its first three positional (`Grid(lo, hi, cells,
scale=...)`, a `KW_ONLY` marker before the fourth field); a larger one, a
configuration or a row, takes every field by keyword (`kw_only=True`); a
class with an `__init__` keeps the (up to three) arguments it cannot be
built without positional and puts `*` after them. A call then says what each
value is, and adding a field never shifts the meaning of a call.

Public: a class whose name does not start with `_`, defined in a module of
agent/ none of whose names starts with `_`. Constructors inherited from a
library (an exception's, a logging formatter's) and enums (called to look a
member up) are not the project's to shape, so they are not checked.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import pkgutil
from collections.abc import Iterator

import msgspec

import agent

MOST_POSITIONAL = 3

# Each entry: why the class keeps more than three positional parameters.
EXEMPT = {
    "agent.core.facts.Facts": "built per event: positional keeps the hot path's instructions",
    "agent.core.sampling.candidate.ResultRef": "built per event: positional keeps the hot path's instructions",
    "agent.core.model.Pipeline": "decoded by msgspec from an event, never built by code",
    "agent.core.model.Query": "decoded by msgspec from an event, never built by code",
    "agent.core.model.Stages": "decoded by msgspec from an event, never built by code",
    "agent.core.model.Feedback": "decoded by msgspec from an event, never built by code",
    "agent.core.model.Result": "decoded by msgspec from an event, never built by code",
    "agent.core.model.Event": "decoded by msgspec from an event, never built by code",
    "agent.demo.retriever.Doc": "a NamedTuple (cannot be keyword-only): the demo's table of documents, one literal row each",
}


def _public(name: str) -> bool:
    return not any(part.startswith("_") and part not in ("__init__",) for part in name.split("."))


def modules() -> Iterator[str]:
    """Every module of agent/ (its entry points, `__main__`, run a command when imported)."""
    yield agent.__name__
    for found in pkgutil.walk_packages(agent.__path__, "agent."):
        if not found.name.endswith("__main__"):
            yield found.name


def public_classes() -> Iterator[tuple[str, type]]:
    for name in modules():
        module = importlib.import_module(name)
        if not _public(name):
            continue
        for attr, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == name and not attr.startswith("_"):
                yield f"{name}.{attr}", value


def own_constructor(cls: type) -> bool:
    """Whether the class (or a class of agent/ it derives from) shapes its constructor."""
    if issubclass(cls, enum.Enum):
        return False
    if issubclass(cls, msgspec.Struct):
        return True
    for base in cls.__mro__:
        if "__init__" in vars(base) or "__new__" in vars(base):
            return base.__module__.split(".")[0] == "agent"
    return False


def positional(cls: type) -> list[str]:
    parameters = inspect.signature(cls).parameters.values()
    if len(parameters) <= MOST_POSITIONAL:
        return []
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def test_every_module_is_walked():
    found = set(modules())
    assert {"agent.core.drift.bins", "agent.io.store.database", "agent.cli.run"} <= found


def test_constructors_take_all_but_three_by_keyword():
    offending = {}
    for qualified, cls in public_classes():
        if qualified in EXEMPT or not own_constructor(cls):
            continue
        names = positional(cls)
        if len(names) > MOST_POSITIONAL:
            offending[qualified] = names
    assert not offending, f"more than {MOST_POSITIONAL} positional parameters (make the rest keyword-only): {offending}"


def test_exemptions_are_still_needed():
    """An exempt class that now follows the rule (or is gone) leaves the list."""
    classes = dict(public_classes())
    stale = [name for name in EXEMPT if name not in classes or len(positional(classes[name])) <= MOST_POSITIONAL]
    assert not stale, f"no longer needs an exemption: {stale}"
    assert all(reason.strip() for reason in EXEMPT.values())
