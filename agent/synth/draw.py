"""The clean event: drawn from the traffic stream only, as a draft that incidents may edit before rendering."""

from __future__ import annotations

import base64
import hashlib
import math
import random
import struct
from bisect import bisect
from typing import Any

from agent.synth.corpus import _Chunk, _Corpus, _flatten, _Mix, _Pool
from agent.synth.deployment import (
    _APP_CUM,
    _FILTER_RUNS,
    _FILTER_WEIGHTS,
    _INV32,
    _LOG,
    _OWNED,
    _QUERY_CUM,
    _SECURITY_FILTERS,
    _SLICES,
    _SOURCES,
    _TENANT_CUM,
    _VOCABULARY_CUM,
    _AppSpec,
    _cumulative,
    _token,
)


class _Draft:
    """One event before rendering; incidents edit this, never the traffic stream."""

    __slots__ = ("i", "ts_ms", "app", "ti", "persona", "query", "qtype", "k", "c", "m", "n", "chunks", "ranks",
                 "scores", "reranks", "pres", "packed", "adm", "order", "filters", "feedback", "latency",
                 "pipeline", "principal", "trace")
    i: int
    ts_ms: int
    app: _App
    ti: int
    persona: str
    query: dict
    qtype: str
    k: int
    c: int
    m: int
    n: int
    chunks: list[_Chunk]
    ranks: list[int]
    scores: list[float]
    reranks: list[float] | None
    pres: list[int] | None
    packed: list[bool] | None
    adm: list[bool]
    order: list[int] | None
    filters: list[dict]
    feedback: tuple[bool, bool, int | None, int] | None
    latency: float
    pipeline: dict
    principal: dict
    trace: str | None


class _App:
    """An app spec with its lookups precomputed, so the per-event path only bisects."""

    def __init__(self, index: int, spec: _AppSpec):
        self.index = index
        self.spec = spec
        self.name = spec.name
        self.sources = tuple(name for name, _ in spec.sources)
        self.owned_sources = tuple(s.name for s in _SOURCES if s.owned and s.name in self.sources)
        self.personas = tuple(name for name, _ in spec.personas)
        self.persona_cum = _cumulative([w for _, w in spec.personas])
        self.types = tuple(name for name, _ in spec.types)
        self.type_cum = _cumulative([w for _, w in spec.types])
        self.reranked = "reranker" in spec.pipeline
        self.bm25 = spec.scale == "bm25"


class _Draw:
    """How `_Traffic` draws the clean event; only the traffic stream (`self.rng`) is read."""

    rng: random.Random
    step_ms: float
    jitter_ms: float
    apps: tuple[_App, ...]
    corpus: _Corpus
    principals: dict[tuple[int, str, bool], dict]
    queries: dict[tuple[int, int, int], tuple[dict, str]]
    languages: tuple[tuple[tuple[str, ...], tuple[float, ...]], ...]
    mixes: dict[tuple[int, int, str], _Mix]
    pools: dict[tuple[str, int, str], _Pool]
    groups: dict[tuple[int, str], frozenset[str]]

    def _draw(self, i: int) -> _Draft:
        rnd = self.rng.random
        d = _Draft()
        d.i = i
        offset = int(i * self.step_ms + rnd() * self.jitter_ms)
        if rnd() < 0.005:  # a producer flushing a buffer late
            offset = max(0, offset - int(rnd() * 20_000))
        d.ts_ms = offset
        app = self.apps[bisect(_APP_CUM, rnd())]
        spec = app.spec
        d.app = app
        ti = bisect(_TENANT_CUM, rnd())
        d.ti = ti
        persona = app.personas[bisect(app.persona_cum, rnd())]
        d.persona = persona
        query, qtype = self._query(app, ti, bisect(_QUERY_CUM, rnd()))
        d.query, d.qtype = query, qtype
        sl = _SLICES[qtype]
        k = spec.cutoffs[int(rnd() * len(spec.cutoffs))]
        d.k = k
        c = spec.candidates[int(rnd() * len(spec.candidates))]
        m = int(c * (0.25 + 0.6 * rnd()))
        language = query.get("language", "en")
        zero_filter = None
        if rnd() < sl.zero:  # nothing clears the similarity threshold
            n = 0
            if app.bm25 and rnd() < 0.5:  # no term matched at all
                c = m = 0
        else:
            n = spec.returned[int(rnd() * len(spec.returned))]
            if spec.over_k:
                n += k
            if sl.mu < 0.6:
                n = max(1, int(n * (0.3 + 0.7 * rnd())))
            n = min(n, m)
            # Legitimate filter-caused zeros: no Japanese docs; nothing effective in the asked period.
            if language == "ja" and "locale" in spec.filters and app.bm25 and rnd() < 0.2:
                zero_filter = "locale"
            elif qtype == "temporal" and "effective_date" in spec.filters and rnd() < 0.03:
                zero_filter = "effective_date"
            if zero_filter:
                n = 0
        d.filters = self._filters(app, c, m, language, qtype, zero_filter)
        if zero_filter:
            m = 0
        d.c, d.m, d.n = c, m, n
        d.pipeline = spec.pipeline
        d.principal = self.principals[(ti, persona, spec.claims_field)]
        d.latency = round(spec.latency_ms * self.rng.lognormvariate(0.0, 0.45) * (0.6 if n == 0 else 1.0), 1)

        ranks = list(range(1, n + 1))
        u = rnd()
        if n and u < 0.03:  # the app logs ranks after a pinned answer card
            ranks = [r + 1 for r in ranks]
        elif n > 2 and u < 0.06:  # a deduplicated result left a gap
            gap = 1 + int(rnd() * (n - 1))
            ranks = ranks[:gap] + [r + 1 for r in ranks[gap:]]
        d.ranks = ranks
        adm = [r <= k for r in ranks]
        packed = None
        if n and rnd() < spec.explicit_packed:
            packed = adm[:]
            if n > k and k >= 2 and rnd() < 0.5:  # token budget: one long chunk skipped, a later one packed
                skip = 1 + int(rnd() * (k - 1))
                later = next((j for j in range(skip + 1, n) if not packed[j]), None)
                if packed[skip] and later is not None:
                    packed[skip], packed[later] = False, True
            adm = packed
        d.packed, d.adm = packed, adm
        d.chunks = self._chunks(app, ti, persona, adm, n)

        s1 = min(0.97, max(0.15, self.rng.gauss(sl.mu, 0.07)))
        a = 0.02 + 0.05 * rnd()
        g = 0.004 * rnd()
        deepest = max(n, 30) - 1
        drop = a * _LOG[deepest] + g * deepest
        if drop > s1 - 0.02:  # flatten the decay rather than clamp every score
            a, g = a * (s1 - 0.02) / drop, g * (s1 - 0.02) / drop
        if app.bm25:
            s1, a, g = s1 * 24.0, a * 24.0, g * 24.0
        # Four decimals via int division: half the cost of round() and the same shortest repr.
        if app.reranked and n:
            pres = self._rerank(n, min(m, 30), sl.spread)
            d.pres = pres
            d.scores = [int((s1 - a * _LOG[p - 1] - g * (p - 1)) * 1e4 + 0.5) / 1e4 for p in pres]
            l1 = self.rng.gauss((sl.mu - 0.55) * 28.0, 1.8)
            la = 0.5 + 1.5 * rnd()
            lc = 0.15 * rnd()
            d.reranks = [math.floor((l1 - la * _LOG[j] - lc * j) * 1e3 + 0.5) / 1e3 for j in range(n)]
        else:
            d.pres = d.reranks = None
            d.scores = [int((s1 - a * _LOG[j] - g * j) * 1e4 + 0.5) / 1e4 for j in range(n)]

        order = None
        if n > 1 and rnd() < 0.03:  # listed in packing order, not rank order
            order = list(range(n))
            self.rng.shuffle(order)
        d.order = order

        feedback = None
        low = sl.mu < 0.6 or n == 0
        if rnd() < (0.15 if low else 0.05):
            v = rnd()
            thumbs = None if v < 0.3 else (-1 if v < (0.7 if low else 0.45) else (1 if v < 0.92 else 0))
            feedback = (rnd() < 0.4, rnd() < 0.12, thumbs, int(rnd() * 3) if n else 0)
        d.feedback = feedback
        # A newer producer SDK adds a field the agent does not read: it must be ignored and counted, not rejected.
        d.trace = f"{self.rng.getrandbits(128):032x}" if spec.extra_field and rnd() < spec.extra_field else None
        return d

    def _rerank(self, n: int, width: int, spread: float) -> list[int]:
        """Retriever ranks of the reranker's top n: swaps and promotions, cheaper than sorting noisy scores."""
        rnd = self.rng.random
        pres = list(range(1, n + 1))
        for _ in range(int(spread * 0.6 * rnd())):
            a = int(rnd() * n)
            b = min(n - 1, a + 1 + int(rnd() * 3))
            pres[a], pres[b] = pres[b], pres[a]
        if width > n:
            for _ in range(int(spread * 0.3 * rnd())):
                deep = n + 1 + int(rnd() * (width - n))
                if deep not in pres:
                    pres[int(rnd() * n)] = deep
        return pres

    def _query(self, app: _App, ti: int, q: int) -> tuple[dict, str]:
        """The q-th most popular query of this app and tenant, the same for every seed so baselines carry over."""
        key = (app.index, ti, q)
        hit = self.queries.get(key)
        if hit is not None:
            return hit
        h = hashlib.blake2b(b"%d|%d|%d" % key, digest_size=64, person=b"ragdrift-query").digest()
        u = struct.unpack_from("<12I", h, 16)
        qtype = app.types[bisect(app.type_cum, u[0] * _INV32)]
        langs, lang_cum = self.languages[ti]
        language = langs[bisect(lang_cum, u[1] * _INV32)]
        lo, hi = _SLICES[qtype].terms
        count = lo + u[2] % (hi - lo + 1)
        terms = [_token(b"term:%d" % bisect(_VOCABULARY_CUM, u[3 + j] * _INV32), 12) for j in range(count)]
        query = {"id": base64.urlsafe_b64encode(h[:16]).rstrip(b"=").decode(), "terms": terms}
        if ((u[2] >> 8) & 0xFFFF) / 65536.0 < app.spec.typed:
            query["type"] = qtype
        query["language"] = language
        hit = self.queries[key] = (query, qtype)
        return hit

    def _filters(self, app: _App, c: int, m: int, language: str, qtype: str, zero_filter: str | None) -> list:
        rnd = self.rng.random
        rows: list[dict] = []
        applied: list[dict] = []
        for name in app.spec.filters:
            if name == "locale":
                runs = not language.startswith("en")
            elif name == "effective_date":
                runs = qtype == "temporal"
            else:
                share = _FILTER_RUNS[name]
                runs = share >= 1.0 or rnd() < share
            if not runs:
                rows.append({"name": name, "status": "skipped", "removed": 0})
            elif name not in _SECURITY_FILTERS and rnd() < 0.003:
                rows.append({"name": name, "status": "error", "removed": 0})  # fails open: nothing removed
            else:
                row: dict[str, Any] = {"name": name, "status": "applied", "removed": 0}
                rows.append(row)
                applied.append(row)
        total = c - m
        if applied and total > 0:
            weight = sum(_FILTER_WEIGHTS[row["name"]] for row in applied)
            left = total
            for row in applied[:-1]:
                row["removed"] = int(total * _FILTER_WEIGHTS[row["name"]] / weight)
                left -= row["removed"]
            applied[-1]["removed"] = left
        if zero_filter:
            for row in rows:
                if row["name"] == zero_filter:
                    row["status"] = "applied"
                    row["removed"] += m
        return rows

    def _chunks(self, app: _App, ti: int, persona: str, adm: list[bool], n: int) -> list[_Chunk]:
        if not n:
            return []
        rng = self.rng
        rnd = rng.random
        key = (app.index, ti, persona)
        mix = self.mixes.get(key)
        if mix is None:
            pools = [self._pool(source, ti, persona) for source in app.sources]
            shares = [w for _, w in app.spec.sources]
            mix = self.mixes[key] = _Mix(pools, shares)
        fresh, fresh_cum, total = mix.fresh, mix.fresh_cum, mix.fresh_cum[-1]
        chunks = [fresh[bisect(fresh_cum, rnd() * total)] for _ in range(n)]
        if False in adm:  # below the cutoff: anything visible, stale versions included
            for j in range(n):
                if not adm[j] and rnd() < 0.2:
                    chunks[j] = mix.any[bisect(mix.any_cum, rnd() * mix.any_cum[-1])]
        for _ in range(int(n * 0.4 * rnd())):  # the next chunk of the same document
            j = int(rnd() * n)
            if j:
                siblings = chunks[j - 1].parent.fresh if adm[j] else chunks[j - 1].parent.current
                if siblings:
                    chunks[j] = siblings[int(rnd() * len(siblings))]
        if len(set(chunks)) < n:
            seen: set[_Chunk] = set()
            for j in range(n):
                chunk = chunks[j]
                for _ in range(5):
                    if chunk not in seen:
                        break
                    chunk = mix.fresh[bisect(mix.fresh_cum, rnd() * mix.fresh_cum[-1])]
                chunks[j] = chunk
                seen.add(chunk)
        return chunks

    def _pool(self, source: str, ti: int, persona: str) -> _Pool:
        # Shared sources are open to everyone: one pool serves every principal.
        key = (source, ti, persona) if source in _OWNED else (source, 0, "")
        pool = self.pools.get(key)
        if pool is not None:
            return pool
        pool = self.pools[key] = _Pool()
        groups = self.groups[(ti, persona)]
        for parent in self.corpus.parents[(source, ti)]:
            if parent.acl and parent.acl.isdisjoint(groups):
                pool.forbidden.extend(parent.fresh)
                continue
            if parent.fresh:
                pool.fresh.append(parent.fresh)
            pool.any.append(parent.current + parent.old)
            pool.stale.extend(parent.old)
            if not parent.fresh:
                pool.stale.extend(parent.current)
            pool.pairs.extend(zip(parent.old, parent.fresh))
        pool.fresh_flat = _flatten(pool.fresh)
        pool.any_flat = _flatten(pool.any)
        return pool
