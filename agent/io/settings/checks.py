"""What the configuration checks ask of a value: a path, a URL, a name, a finite number, a bounded duration.

Shared by the sections' checks (agent/io/settings/agent.py and the modules it
splits out), so `ragdrift check-config` refuses exactly what the agent and the
commands would refuse when they use the value.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from agent.core.rules import TEXT_CHARS

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}\Z")  # Kafka's legal topic names
_SHORT_TEXT = re.compile(TEXT_CHARS + r"{1,128}\Z")  # an event's short text field (agent/core/model.py)

MAX_DAYS = 3650
# Ten years in days or seconds: longer is a typo, and a date that many days
# before any day since the year 11 is still a date, a wait that long is still
# one a thread can make. Milliseconds are Kafka's: a 32-bit count.
LONGEST = {"_days": MAX_DAYS, "_seconds": MAX_DAYS * 86_400, "_ms": 2**31 - 1}


def path(value: str | None) -> bool:
    """A file or directory path a process can open: not blank (which would
    mean the working directory), no NUL byte."""
    return value is not None and value.strip() != "" and "\0" not in value


def http_url(value: str | None) -> bool:
    """An http:// or https:// URL with a host."""
    if value is None:
        return False
    try:
        parts = urlsplit(value)
        return parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # a malformed port or IPv6 literal
        return False


def env_name(value: str) -> bool:
    return bool(_ENV_NAME.match(value))


def topic(value: str) -> bool:
    return bool(_TOPIC.match(value)) and value not in (".", "..")


def short_text(value: str) -> bool:
    """A value an event's short text field may hold (a pipeline version, say)."""
    return bool(_SHORT_TEXT.match(value))


def whole(value: float) -> bool:
    """A number without a fractional part (a YAML 3.0 counts as 3)."""
    return float(value).is_integer()


def numbers(value: Any, where: str = "") -> Iterator[tuple[str, int | float]]:
    """Every number in the settings, by its dotted key."""
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from numbers(getattr(value, f.name), f"{where}.{f.name}" if where else f.name)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from numbers(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from numbers(item, f"{where}[{i}]")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield where, value


def longest(key: str) -> int | None:
    """The largest value a day count or duration may hold, by the unit its key
    ends in (`..._days`, `..._seconds`, `..._ms`); None for any other key."""
    return next((limit for unit, limit in LONGEST.items() if key.endswith(unit)), None)
