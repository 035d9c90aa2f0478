"""Rendering: a drafted event as `retrieval.v1` JSON, and the invalid messages that stand in for some."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

import orjson

from agent.core.model import SCHEMA
from agent.synth.corpus import _Chunk
from agent.synth.draw import _Draft

INVALID_KINDS = ("invalid_json", "invalid_field", "unsupported_schema", "pii_suspected")
_RAW_QUERIES = ("how many vacation days do I have left", "reset password for vpn", "parental leave policy germany")
_EMAILS = ("jane.doe@example.com", "m.garcia@example.org")


class _Render:
    """How `_Traffic` renders a draft; invalid lines draw only from the invalid stream (`self.vrng`)."""

    vrng: random.Random
    start: datetime
    end: datetime
    id_prefix: str
    invalid_count: int
    bases: dict[_Chunk, tuple[dict, dict]]

    def _render(self, d: _Draft) -> dict:
        app = d.app
        n = d.n
        stages = {"candidates": d.c, "after_filter": d.m}
        if app.reranked:
            stages["after_rerank"] = n
        stages["packed"] = sum(d.adm)
        results = []
        chunks, ranks, scores = d.chunks, d.ranks, d.scores
        bases = self.bases
        reranks: Any  # None unless reranked, and then read only when `which` is 1
        pres: Any
        reranks, pres = d.reranks, d.pres
        which = 0 if reranks is None else 1
        for j in range(n):
            chunk = chunks[j]
            pair = bases.get(chunk)
            if pair is None:
                pair = bases[chunk] = chunk.bases(self.start, self.end)
            result = pair[which].copy()
            result["rank"] = ranks[j]
            result["score"] = scores[j]
            if which:
                result["rerank_score"] = reranks[j]
                result["pre_rerank_rank"] = pres[j]
            results.append(result)
        if d.packed is not None:
            for result, packed in zip(results, d.packed):
                result["packed"] = packed
        doc = {
            "schema": SCHEMA,
            "event_id": f"{self.id_prefix}-{d.i:09d}",
            "ts": (self.start + timedelta(milliseconds=d.ts_ms)).isoformat(timespec="milliseconds")[:-6] + "Z",
            "app": app.name,
            "pipeline": d.pipeline,
            "query": d.query,
            "principal": d.principal,
            "cutoff_k": d.k,
            "stages": stages,
            "filters": d.filters,
            "results": results if d.order is None else [results[j] for j in d.order],
            "latency_ms": d.latency,
        }
        if d.trace is not None:
            doc["trace_id"] = d.trace
        if d.feedback is not None:
            rephrased, correction, thumbs, cited = d.feedback
            feedback: dict = {}
            if rephrased:
                feedback["rephrased"] = True
            if correction:
                feedback["correction"] = True
            if thumbs is not None:
                feedback["thumbs"] = thumbs
            cited_ids = [chunks[j].id for j in range(n) if d.adm[j]][:cited]
            if cited_ids:
                feedback["cited"] = cited_ids
            if feedback:
                doc["feedback"] = feedback
        return doc

    def _corrupt(self, doc: dict) -> bytes:
        """One invalid message in place of this event, cycling through the dead-letter reasons."""
        kind = INVALID_KINDS[self.invalid_count % len(INVALID_KINDS)]
        variant = self.invalid_count // len(INVALID_KINDS)
        self.invalid_count += 1
        if kind == "invalid_json":  # a producer died mid-write: any strict prefix of an object is not JSON
            line = orjson.dumps(doc)
            return line[: 1 + int(self.vrng.random() * (len(line) - 1))]
        if kind == "invalid_field":
            if doc["results"] and variant % 2:
                doc["results"][0]["rank"] = 0
            else:
                doc["cutoff_k"] = 0
        elif kind == "unsupported_schema":
            doc["schema"] = "retrieval.v2"
        elif variant % 3 == 0:  # raw query text where its hash belongs
            doc["query"] = {**doc["query"], "id": _RAW_QUERIES[variant // 3 % len(_RAW_QUERIES)]}
        elif variant % 3 == 1:
            doc["query"] = {**doc["query"], "id": _EMAILS[variant // 3 % len(_EMAILS)]}
        else:
            principal = doc["principal"]
            doc["principal"] = {**principal, "groups": [_EMAILS[variant // 3 % len(_EMAILS)], *principal["groups"]]}
        return orjson.dumps(doc)
