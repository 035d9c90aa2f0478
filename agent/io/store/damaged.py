"""Stored rows that do not read back whole: skipped, counted and named once.

A row of counts that is not JSON (NaN and the infinities are not), or not of
the shape its writer gives it, must not stop a checkpoint nor hide the rows
beside it: its reader skips it and hands its key here (a checkpoint adding to
it first sets it aside in the store, then writes the delta in its place). A
row of a newer release's format (agent/core/formats.py) is skipped too, and
counted apart: it is not damaged, and no checkpoint of this release writes
it. Each row counts once per process, however often it is read, and with a
logger is logged once with its table and key; a command names the rows it
skipped from `keys` instead. A feature exports its counts per table
(`DamagedCollector`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, Metric

_NAMED = 5  # keys a summary names; the count covers the rest


class Damaged:
    """The damaged rows a process met, per table."""

    def __init__(self, log: logging.Logger | None = None) -> None:
        self.log = log
        self.counts: Counter[str] = Counter()  # table -> damaged rows skipped
        self.newer: Counter[str] = Counter()  # table -> rows of a newer release's format skipped
        self.keys: dict[str, dict[tuple, None]] = {}  # table -> the rows' keys, first met first

    def skip(self, table: str, key: tuple, newer: bool = False) -> None:
        """A row of `table` that does not read back (`newer`: of a newer release's format), skipped."""
        keys = self.keys.setdefault(table, {})
        if key in keys:
            return
        keys[key] = None
        (self.newer if newer else self.counts)[table] += 1
        if self.log is not None:
            what = "row of a newer release's format" if newer else "damaged row"
            self.log.error("%s of %s skipped: %r", what, table, key)

    def summary(self) -> str:
        """The rows skipped, in one line for a command's message ("" for none)."""
        keys = [f"{table} {key!r}" for table, found in self.keys.items() for key in found]
        if not keys:
            return ""
        more = f" and {len(keys) - _NAMED} more" if len(keys) > _NAMED else ""
        what = "unreadable (damaged, or of a newer release's format)" if self.newer else "damaged"
        return f"{len(keys)} {what} stored row(s) skipped: {', '.join(keys[:_NAMED])}{more}"


class DamagedCollector:
    """`ragdrift_<feature>_damaged_rows_total` and `ragdrift_<feature>_newer_rows_total`, per table: the
    rows a feature's reads skipped. Each absent until its first (a healthy store exports nothing new),
    then every table's count."""

    def __init__(self, feature: str, damaged: Damaged, tables: tuple[str, ...]):
        self.feature = feature
        self.damaged = damaged
        self.tables = tables

    def describe(self) -> Iterator[Metric]:
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        for family, counts in zip(self._families(), (self.damaged.counts, self.damaged.newer)):
            if counts:
                for table in self.tables:
                    family.add_metric([table], counts[table])
                yield family

    def _families(self) -> tuple[CounterMetricFamily, CounterMetricFamily]:
        return (
            CounterMetricFamily(f"ragdrift_{self.feature}_damaged_rows", "Stored rows skipped because they do not "
                                "read back whole (each counted once per process, logged with its key).",
                                labels=["table"]),
            CounterMetricFamily(f"ragdrift_{self.feature}_newer_rows", "Stored rows skipped because a newer "
                                "release wrote them in a format this one does not read (never written by it).",
                                labels=["table"]),
        )
