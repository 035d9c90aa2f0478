"""Incidents: their kinds and windows, `KIND@MINUTE` parsing, and how each one edits a drafted event.

Incidents draw only from the incident stream (`self.irng`), never from the traffic stream.
"""

from __future__ import annotations

import base64
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType

from agent.synth.corpus import _Corpus, _Pool
from agent.synth.deployment import _OUTAGE_FILTER, _TENANTS, _principal
from agent.synth.draw import _Draft

INCIDENT_KINDS = ("leak", "stale", "score-drift", "source-dominance", "filter-outage", "new-terms")
INCIDENT_MINUTES = 10.0
# Share of the events inside a window that an incident touches: real incidents hit some traffic, not all.
INCIDENT_SHARE = MappingProxyType(
    {
        "leak": 0.15,
        "stale": 0.2,
        "score-drift": 0.3,
        "source-dominance": 0.3,
        "filter-outage": 0.25,
        "new-terms": 0.3,
    }
)


@dataclass(frozen=True)
class ScheduledIncident:
    """An incident of `kind` that starts `minute` minutes of event time after the stream start."""

    kind: str
    minute: float

    def __post_init__(self) -> None:
        if self.kind not in INCIDENT_KINDS:
            raise ValueError(f"unknown incident kind {self.kind!r}; valid kinds: {', '.join(INCIDENT_KINDS)}")
        if isinstance(self.minute, bool) or not isinstance(self.minute, (int, float)):
            raise ValueError(f"incident minute must be a number, not {self.minute!r}")
        if not math.isfinite(self.minute) or self.minute < 0:
            raise ValueError(f"incident minute must be a finite number >= 0, not {self.minute!r}")
        object.__setattr__(self, "minute", float(self.minute))


def parse_incident(text: str) -> ScheduledIncident:
    """Turn `KIND@MINUTE` (for example `leak@30`) into an ScheduledIncident, for the command line."""
    kind, sep, minute = text.strip().partition("@")
    if not sep:
        raise ValueError(f"incident {text!r}: expected KIND@MINUTE, for example leak@30")
    kind = kind.strip()
    if kind not in INCIDENT_KINDS:
        raise ValueError(f"incident {text!r}: unknown kind {kind!r}; valid kinds: {', '.join(INCIDENT_KINDS)}")
    try:
        value = float(minute)
    except ValueError:
        raise ValueError(f"incident {text!r}: minute {minute.strip()!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"incident {text!r}: minute must be a finite number >= 0")
    return ScheduledIncident(kind, value)


class _Incidents:
    """How `_Traffic` applies incidents: only the incident stream, only the draft."""

    irng: random.Random
    corpus: _Corpus
    windows: tuple[tuple[str, float, float], ...]
    apply: dict[str, Callable[[_Draft], None]]
    _pool: Callable[[str, int, str], _Pool]  # the pool cache of `_Draw`

    def _incidents(self, d: _Draft) -> None:
        irandom = self.irng.random
        for kind, lo, hi in self.windows:
            if lo <= d.ts_ms < hi and irandom() < INCIDENT_SHARE[kind]:
                self.apply[kind](d)

    def _leak(self, d: _Draft) -> None:
        """Results outside the principal's tenant or groups; sometimes claims are missing altogether."""
        if not d.n:
            return
        irandom = self.irng.random
        if irandom() < 0.2:
            d.principal = _principal(_TENANTS[d.ti], [], True, claims=False)
            return
        admitted = [j for j in range(d.n) if d.adm[j]]
        for _ in range(1 if irandom() < 0.7 else 2):
            j = admitted[int(irandom() * len(admitted))] if admitted and irandom() < 0.75 else int(irandom() * d.n)
            source = d.app.owned_sources[int(irandom() * len(d.app.owned_sources))]
            items = self._pool(source, d.ti, d.persona).forbidden if irandom() < 0.5 else None
            if not items:
                other = (d.ti + 1 + int(irandom() * (len(_TENANTS) - 1))) % len(_TENANTS)
                items = self.corpus.owned_fresh[(source, other)]
            chunk = items[int(irandom() * len(items))]
            if chunk not in d.chunks:
                d.chunks[j] = chunk

    def _stale(self, d: _Draft) -> None:
        """Superseded, tombstoned, draft, expired or future content admitted; often beside its current version."""
        admitted = [j for j in range(d.n) if d.adm[j]]
        if not admitted:
            return
        irandom = self.irng.random
        if len(admitted) >= 2 and irandom() < 0.5:
            pair = self._pick(d, "pairs")
            if pair is not None:
                a, b = self.irng.sample(admitted, 2)
                taken = {c.id for j, c in enumerate(d.chunks) if j not in (a, b)}
                if pair[0].id not in taken and pair[1].id not in taken:
                    d.chunks[a], d.chunks[b] = pair
                    return
        for _ in range(1 if irandom() < 0.6 else 2):
            chunk = self._pick(d, "stale")
            if chunk is not None and all(c.id != chunk.id for c in d.chunks):
                d.chunks[admitted[int(irandom() * len(admitted))]] = chunk

    def _pick(self, d: _Draft, kind: str):
        sources = list(d.app.sources)
        self.irng.shuffle(sources)
        for source in sources:
            items = getattr(self._pool(source, d.ti, d.persona), kind)
            if items:
                return items[int(self.irng.random() * len(items))]
        return None

    def _score_drift(self, d: _Draft) -> None:
        """A canary on a new embedding model: renamed model, scores shifted down and compressed."""
        drift = d.app.spec.drift_pipeline
        if drift is None:
            return
        d.pipeline = drift
        d.scores = [int((0.45 * s + 0.15) * 1e4 + 0.5) / 1e4 for s in d.scores]

    def _dominance(self, d: _Draft) -> None:
        """One parent of one source fills the admitted set."""
        admitted = [j for j in range(d.n) if d.adm[j]]
        if not admitted:
            return
        if len(admitted) > 1 and self.irng.random() < 0.3:
            admitted = admitted[1:]  # the top hit survives
        taken = {c.id for j, c in enumerate(d.chunks) if j not in admitted}
        book = [c for c in self.corpus.handbook[d.ti] if c.id not in taken]
        for j, chunk in zip(admitted, self.irng.sample(book, min(len(admitted), len(book)))):
            d.chunks[j] = chunk

    def _filter_outage(self, d: _Draft) -> None:
        """The lifecycle filter fails closed (or is misconfigured) and removes every candidate."""
        if d.c == 0:
            return
        for row in d.filters:
            if row["name"] == _OUTAGE_FILTER:
                row["status"] = "error" if self.irng.random() < 0.7 else "applied"
                row["removed"] += d.m
        d.m = d.n = 0
        d.chunks, d.ranks, d.scores, d.adm = [], [], [], []
        d.reranks = d.pres = d.packed = d.order = None

    def _new_terms(self, d: _Draft) -> None:
        """A burst of never-seen query terms (a launch, a new product name, a bot)."""
        rng = self.irng

        def fresh(size: int = 12) -> str:
            return base64.urlsafe_b64encode(rng.randbytes(size)).rstrip(b"=").decode()

        terms = [fresh() if rng.random() < 0.7 else t for t in d.query["terms"]]
        terms.extend(fresh() for _ in range(1 + int(rng.random() * 3)))
        d.query = {**d.query, "id": fresh(16), "terms": terms[:64]}
