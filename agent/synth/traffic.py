"""`generate`: one stream's state and its three random streams (traffic, incidents, invalid lines)."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

import orjson

from agent.synth.corpus import _CORPUS, _Chunk, _Mix, _Pool
from agent.synth.deployment import _APPS, _PERSONAS, _TENANT_LANGUAGES, _TENANTS, _cumulative, _group, _principal
from agent.synth.draw import _App, _Draw
from agent.synth.incidents import INCIDENT_MINUTES, ScheduledIncident, _Incidents
from agent.synth.render import _Render

DEFAULT_START = datetime(2026, 1, 5, tzinfo=UTC)

_UTC = UTC
# Dates placed "after the stream" stay after it: expiries and future effective dates use this horizon.
_MAX_HORIZON_DAYS = 3650


def generate(
    events: int,
    seed: int,
    start: datetime | None = None,
    rate: float = 20.0,
    incidents: Sequence[ScheduledIncident] = (),
    invalid_rate: float = 0.0,
) -> Iterator[bytes]:
    """Yield `events` JSON lines (bytes, no newline) of retrieval traffic; same arguments, same bytes."""
    if isinstance(events, bool) or not isinstance(events, int) or events < 0:
        raise ValueError(f"events must be an int >= 0, not {events!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, not {seed!r}")
    if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be a finite number > 0, not {rate!r}")
    if not (isinstance(invalid_rate, (int, float)) and 0 <= invalid_rate <= 1):
        raise ValueError(f"invalid_rate must be in [0, 1], not {invalid_rate!r}")
    for incident in incidents:
        if not isinstance(incident, ScheduledIncident):
            raise ValueError(f"incidents must be ScheduledIncident objects (see parse_incident), not {incident!r}")
    if start is None:
        start = DEFAULT_START
    elif start.tzinfo is None:
        start = start.replace(tzinfo=_UTC)  # a naive start is read as UTC
    # Whole milliseconds, so that `ts - start` is exact and windows are unambiguous.
    start = start.astimezone(_UTC)
    start = start.replace(microsecond=start.microsecond // 1000 * 1000)
    traffic = _Traffic(seed, start, float(rate), events, tuple(incidents), float(invalid_rate))
    return traffic.lines(events)


class _Traffic(_Draw, _Incidents, _Render):
    """One stream's state: the three random streams, the corpus, and caches local to this stream."""

    def __init__(self, seed: int, start: datetime, rate: float, events: int,
                 incidents: tuple[ScheduledIncident, ...], invalid_rate: float) -> None:
        self.rng = random.Random(seed)
        self.irng = random.Random(f"ragdrift:{seed}:incidents")
        self.vrng = random.Random(f"ragdrift:{seed}:invalid")
        self.start = start
        self.rate = rate
        self.step_ms = 1000.0 / rate
        self.jitter_ms = min(self.step_ms, 2000.0)
        self.invalid_rate = invalid_rate
        self.invalid_count = 0
        self.id_prefix = f"{random.Random(f'ragdrift:{seed}:ids').getrandbits(40):010x}"
        horizon = min(_MAX_HORIZON_DAYS, (events + 1) / rate / 86400.0 + 1.0)
        self.end = start + timedelta(days=horizon)
        self.corpus = _CORPUS
        self.bases: dict[_Chunk, tuple[dict, dict]] = {}
        self.apps = tuple(_App(i, spec) for i, spec in enumerate(_APPS))
        span = INCIDENT_MINUTES * 60_000
        self.windows = tuple((inc.kind, inc.minute * 60_000, inc.minute * 60_000 + span) for inc in incidents)
        self.pools: dict[tuple[str, int, str], _Pool] = {}
        self.mixes: dict[tuple[int, int, str], _Mix] = {}
        self.queries: dict[tuple[int, int, int], tuple[dict, str]] = {}
        self.groups = {
            (ti, persona): frozenset(_group(tenant, role) for role in roles)
            for ti, tenant in enumerate(_TENANTS)
            for persona, roles in _PERSONAS.items()
        }
        self.principals = {
            (ti, persona, explicit): _principal(tenant, sorted(self.groups[(ti, persona)]), explicit)
            for ti, tenant in enumerate(_TENANTS)
            for persona in _PERSONAS
            for explicit in (False, True)
        }
        self.languages = tuple(
            (tuple(lang for lang, _ in mix), _cumulative([w for _, w in mix])) for mix in _TENANT_LANGUAGES
        )
        self.apply = {
            "leak": self._leak,
            "stale": self._stale,
            "score-drift": self._score_drift,
            "source-dominance": self._dominance,
            "filter-outage": self._filter_outage,
            "new-terms": self._new_terms,
        }

    def lines(self, events: int) -> Iterator[bytes]:
        dumps = orjson.dumps
        windows = self.windows
        vrandom = self.vrng.random
        invalid_rate = self.invalid_rate
        for i in range(events):
            draft = self._draw(i)
            if windows:
                self._incidents(draft)
            doc = self._render(draft)
            if invalid_rate and vrandom() < invalid_rate:
                yield self._corrupt(doc)
            else:
                yield dumps(doc)
