"""Stored rows that do not read back whole: skipped, counted and named once.

A row of counts that is not JSON (NaN and the infinities are not), or not of
the shape its writer gives it, must not stop a checkpoint nor hide the rows
beside it: its reader skips it (a checkpoint adding to it writes the delta in
its place) and hands its key here. Each row counts once per process, however
often it is read, and with a logger is logged once with its table and key;
a command names the rows it skipped from `keys` instead. A feature exports
its count per table (`DamagedCollector`).
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
        self.counts: Counter[str] = Counter()  # table -> rows skipped
        self.keys: dict[str, dict[tuple, None]] = {}  # table -> the rows' keys, first met first

    def skip(self, table: str, key: tuple) -> None:
        """A row of `table` that does not read back, skipped."""
        keys = self.keys.setdefault(table, {})
        if key in keys:
            return
        keys[key] = None
        self.counts[table] += 1
        if self.log is not None:
            self.log.error("damaged row of %s skipped: %r", table, key)

    def summary(self) -> str:
        """The rows skipped, in one line for a command's message ("" for none)."""
        keys = [f"{table} {key!r}" for table, found in self.keys.items() for key in found]
        if not keys:
            return ""
        more = f" and {len(keys) - _NAMED} more" if len(keys) > _NAMED else ""
        return f"{len(keys)} damaged stored row(s) skipped: {', '.join(keys[:_NAMED])}{more}"


class DamagedCollector:
    """`ragdrift_<feature>_damaged_rows_total`, per table: the damaged rows a feature's reads skipped.
    Absent until the first (a healthy store exports nothing new), then every table's count."""

    def __init__(self, feature: str, damaged: Damaged, tables: tuple[str, ...]):
        self.name = f"ragdrift_{feature}_damaged_rows"
        self.damaged = damaged
        self.tables = tables

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        if self.damaged.counts:
            family = self._family()
            for table in self.tables:
                family.add_metric([table], self.damaged.counts[table])
            yield family

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(self.name, "Stored rows skipped because they do not read back whole (each "
                                   "counted once per process, logged with its key).", labels=["table"])
