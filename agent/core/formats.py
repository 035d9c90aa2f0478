"""The formats this release stores, and how it tells a row a newer release wrote.

Replicas of two releases share the store during every rolling update and
rollback, so a release must never rewrite what it cannot read. Checkpoint
states carry their version (agent/core/state.py). Rows that several
partitions add to (drift days, live-gate rows) are JSON objects whose format
is the reserved key `$format`, absent in format 1: a release adding to a row
of a higher format than it knows would lose what it does not understand, so
it refuses (`NewerRow`) and its checkpoint waits for a release that can.
A newer release that needs another shape of row adds a new kind of row (a
new feature name, a new table) rather than changing an old one: a release
skips the kinds it does not know and never writes them.
"""

from __future__ import annotations

from typing import Any

FORMAT_KEY = "$format"  # no count, cell, category, term or label can be named so
DRIFT_DAY_ROWS = 1
LIVE_GATE_ROWS = 1


class NewerRow(ValueError):
    """A stored row of a format this release does not know: never rewritten by it."""


def check_row(doc: Any, known: int) -> None:
    """Raise `NewerRow` when `doc` says it is of a format above `known`."""
    if isinstance(doc, dict) and FORMAT_KEY in doc:
        version = doc[FORMAT_KEY]
        if type(version) is not int:
            raise ValueError("a row format that is no whole number")  # damaged, not newer
        if version > known:
            raise NewerRow(f"row format {version} is newer than this release's {known}")
