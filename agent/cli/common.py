"""What the command groups share: the usage error and the progress bar."""

from __future__ import annotations

import sys


class UsageError(Exception):
    """An input or usage problem: one line on stderr, exit status 2."""


def progress(total: int | None = None):
    """A progress bar on stderr, only when a person is watching it."""
    from tqdm import tqdm

    return tqdm(total=total, unit=" events", disable=not sys.stderr.isatty(), file=sys.stderr, mininterval=0.5)


def open_store(settings, tables):
    """The agent's store with `tables` joined, or a usage error naming the problem."""
    from agent.io.store import Store, StoreError

    try:
        return Store(settings.store.url, settings.store.schema, tables)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
