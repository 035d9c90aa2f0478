"""What the command groups share: the usage error and checks, the progress bar, the store."""

from __future__ import annotations

import sys


class UsageError(Exception):
    """An input or usage problem: one line on stderr, exit status 2."""


def at_least(value: int | None, low: int, flag: str) -> None:
    """A usage error unless an integer argument given is `low` or more."""
    if value is not None and value < low:
        raise UsageError(f"{flag} must be at least {low}, got {value}")


def progress(total: int | None = None):
    """A progress bar on stderr, only when a person is watching it."""
    from tqdm import tqdm

    return tqdm(total=total, unit=" events", disable=not sys.stderr.isatty(), file=sys.stderr, mininterval=0.5)


def open_store(settings, tables, *, write: bool):
    """The agent's store with `tables` joined, or a usage error naming the problem.

    Only the agent creates a store: a command opens the one it made, to read
    it or (`write`) to write into it, and a store that is not there is an error.
    """
    from agent.io.store import Opening, Store, StoreError

    try:
        return Store(settings.store.url, settings.store.schema, tables, Opening.EXISTING if write else Opening.READ)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
