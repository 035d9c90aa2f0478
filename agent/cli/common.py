"""What the command groups share: the usage error and checks, JSON output, the progress bar, the store."""

from __future__ import annotations

import argparse
import json
import math
import sys


class UsageError(Exception):
    """An input or usage problem: one line on stderr, exit status 2."""


def at_least(value: int | None, low: int, flag: str) -> None:
    """A usage error unless an integer argument given is `low` or more."""
    if value is not None and value < low:
        raise UsageError(f"{flag} must be at least {low}, got {value}")


def finite(text: str) -> float:
    """A number argument (an argparse type): NaN or Infinity would make every
    comparison false and the results silently wrong."""
    from agent.core.judgments.untrusted import shown

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {shown(text)}")
    return value


def positive(text: str) -> float:
    """A finite number argument above 0 (an argparse type)."""
    from agent.core.judgments.untrusted import shown

    value = finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0: {shown(text)}")
    return value


def http_url(url: str, flag: str) -> str:
    """`url`, unless it is not an http:// or https:// URL with a host (the
    check of the configuration's URLs); the error never shows it."""
    from agent.io.settings import checks

    if not checks.http_url(url):
        raise UsageError(f"{flag} must be an http:// or https:// URL with a host")
    return url


def json_text(value: object, **options) -> str:
    """`value` as JSON (`json.dumps` and its `options`), or a usage error when it holds NaN or
    Infinity: JSON has neither, and a reader would fail on the output or take it for a figure."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        raise UsageError("the output holds a number that is not finite (NaN or Infinity), which JSON "
                         "cannot write; nothing written") from None


def progress(total: int | None = None):
    """A progress bar on stderr, only when a person is watching it."""
    from tqdm import tqdm

    return tqdm(total=total, unit=" events", disable=not sys.stderr.isatty(), file=sys.stderr, mininterval=0.5)


def open_store(settings, tables, *, write: bool):
    """The agent's store with `tables` joined, or a usage error naming the problem.

    Only the agent creates a store: a command opens the one it made, to read
    it or (`write`) to write into it, and a store that is not there is an error.
    The caller closes it with a `with` block.
    """
    from agent.io.store.database import Opening, Store, StoreError

    try:
        return Store(settings.store.url, settings.store.schema, tables, opening=Opening.EXISTING if write else Opening.READ)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
