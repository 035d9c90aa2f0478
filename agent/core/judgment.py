"""What each event adds to the judgment queue and the security review queue.

One per partition, beside its windows. Every event is assessed for risk and
offered to the sampler (agent/core/sampling/); every event with an
unauthorized result becomes an incident. Both leave through `take`, into rows
that the checkpoint writes with the offsets.

The sampler is not part of the checkpointed state: its rows in the store are
(they commit with the offsets), and a restored partition offers them back
into a fresh sampler, which keeps exactly what it kept before.

New terms count as a risk signal only against a baseline's vocabulary: a
partition's own vocabulary depends on how the stream was partitioned, and
the sample must not (several replicas take the sample one agent would).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from agent.core.facts import Facts
from agent.core.feature import Context, KeptAsRows
from agent.core.sampling import (
    UNIFORM,
    Budgets,
    Candidate,
    Changes,
    RiskConfig,
    RowKey,
    Sampler,
    Selection,
    assess,
    candidate,
    iso_week,
    select,
    stratum_key,
    uniform,
)
from agent.core.security import Incident, incident_of

DAY = 86400
FLUSH_INCIDENTS = 1000  # queued security incidents that call for a checkpoint now


@dataclass(frozen=True)
class JudgmentConfig:
    risk: RiskConfig = field(default_factory=RiskConfig)
    budgets: Budgets = field(default_factory=Budgets)
    salt: str = ""  # the same on every replica, and secret: it fixes which events are sampled

    def partition(self, kept: Iterable[Candidate] = ()) -> JudgmentIntake:
        return JudgmentIntake(self, kept)


@dataclass
class QueueRows:
    """Queue rows taken from a partition, held until a checkpoint commits them (`Pending`)."""

    added: dict[RowKey, Candidate] = field(default_factory=dict)  # candidate rows to upsert
    evicted: set[RowKey] = field(default_factory=set)  # candidate rows to delete
    incidents: list[Incident] = field(default_factory=list)

    def absorb(self, taken: tuple[Changes, list[Incident]]) -> None:
        changes, incidents = taken
        for added in changes.added:
            row = _row(added)
            self.evicted.discard(row)
            self.added[row] = added
        for row in changes.evicted:
            self.added.pop(row, None)
            self.evicted.add(row)
        self.incidents += incidents

    def clear(self) -> None:
        self.added.clear()
        self.evicted.clear()
        self.incidents.clear()


class JudgmentIntake(KeptAsRows):
    """The judgment queue of one partition (a `PartitionFeature`)."""

    __slots__ = ("config", "sampler", "incidents", "_restored", "_weeks", "_current", "_watermark_day")
    name = "judgment"
    reads = frozenset({"app", "baseline", "new_terms", "pipeline_version", "watermark"})
    writes: frozenset[str] = frozenset()

    def __init__(self, config: JudgmentConfig, kept: Iterable[Candidate] = ()):
        self.config = config
        self.sampler = Sampler(config.budgets)
        # The store keeps every past week's rows (each week's sample, for its
        # batch); the sampler holds at most keep_weeks + 1 weeks. Restore the
        # newest of them and leave the others alone: they are not its to delete.
        kept = list(kept)
        held = set(sorted({row.week for row in kept})[-(config.budgets.keep_weeks + 1):])
        stored = set()
        for row in kept:  # what the store holds for this partition
            if row.week in held:
                stored.add(_row(row))
                self.sampler.offer(row)
        # Rows already stored need no write; under smaller budgets (or fewer
        # strata) some are let go or move to `other`, and those changes do.
        changes = self.sampler.take_changes()
        added = tuple(c for c in changes.added if _row(c) not in stored)
        self._restored: Changes | None = Changes(added, tuple(sorted(stored - {_row(c) for c in changes.added})))
        self.incidents: list[Incident] = []
        self._weeks: dict[int, str] = {}  # day number -> ISO week, memoized
        self._current: str | None = None  # the week the sampler was last advanced to
        self._watermark_day: int | None = None  # the day of the watermark when `_current` was last checked

    def observe(self, facts: Facts, ctx: Context) -> None:
        """Assess one event, offer it to the sampler, and queue its incident if any. Its stratum's
        app is `ctx.app`, the event's app as the bounded label set names it, and its version
        `ctx.pipeline_version`, set only while the metric families split by pipeline version."""
        incident = incident_of(facts)
        if incident is not None:
            self.incidents.append(incident)
        watermark = ctx.watermark
        if watermark is not None:
            day = int(watermark // DAY)
            if day != self._watermark_day:  # the week can only change with the day
                self._watermark_day = day
                now = self._week(day)
                if now != self._current:
                    self.sampler.advance(now)
                    self._current = now
        config, sampler = self.config, self.sampler
        event = facts.event
        event_id = event.event_id
        day = int(facts.ts // DAY)
        week = self._weeks.get(day) or self._week(day)
        u = uniform(event_id, week, config.salt)
        stratum = stratum_key(ctx.app, event.query.type, ctx.pipeline_version)
        # Most events cannot enter a full reservoir: tell those apart before
        # assessing the risk (even the largest weight would not do) or
        # building candidates.
        open_uniform = sampler.may_keep(week, UNIFORM, (1.0 / u, event_id))
        if not open_uniform and not sampler.may_keep(week, stratum, (config.risk.max_weight / u, event_id)):
            return
        baseline = ctx.baseline  # the active baseline: its vocabulary's new terms, its risk reference
        risk = (assess(facts, 0, config.risk) if baseline is None
                else assess(facts, ctx.new_terms, config.risk, baseline.reference, ctx.app))
        if sampler.may_keep(week, stratum, (risk.weight / u, event_id)):
            sampler.offer(candidate(facts, stratum, risk.weight, week, u, risk.signals))
        if open_uniform:
            sampler.offer(candidate(facts, UNIFORM, 1.0, week, u, risk.signals))

    def take(self) -> tuple[Changes, list[Incident]]:
        """The candidate rows that changed and the incidents queued since the last call."""
        incidents, self.incidents = self.incidents, []
        changes = self.sampler.take_changes()
        if self._restored is not None:
            first, self._restored = self._restored, None
            added, evicted = {_row(c) for c in changes.added}, set(changes.evicted)
            changes = Changes(tuple(c for c in first.added if _row(c) not in evicted) + changes.added,
                              tuple(r for r in first.evicted if r not in added) + changes.evicted)
        return changes, incidents

    def outbox(self) -> QueueRows:
        return QueueRows()

    def flush_due(self, held: QueueRows) -> bool:
        """Security incidents wait in memory until a checkpoint: many of them call for one now."""
        return len(self.incidents) + len(held.incidents) >= FLUSH_INCIDENTS

    def _week(self, day: int) -> str:
        """The ISO week of a day (days since the epoch), memoized."""
        week = self._weeks.get(day)
        if week is None:
            if len(self._weeks) >= 64:
                self._weeks.clear()
            week = self._weeks[day] = iso_week(day * DAY)
        return week


def samples(rows: Iterable[Candidate], budgets: Budgets) -> dict[tuple[str, str], Selection]:
    """Each (week, stratum)'s sample from candidate rows of any partitions and
    replicas: what a batch takes (agent/core/batch.py)."""
    grouped: dict[tuple[str, str], list[Candidate]] = {}
    for row in rows:
        grouped.setdefault((row.week, row.stratum), []).append(row)
    return {key: select(found, budgets.k_for(key[1])) for key, found in sorted(grouped.items())}


def _row(candidate: Candidate) -> tuple[str, str, str]:
    return candidate.week, candidate.stratum, candidate.event_id
