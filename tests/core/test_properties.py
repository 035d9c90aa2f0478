"""Property tests (hypothesis) over the pure core: bounds, conservation, decoder."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.core.config import CoreConfig
from agent.core.state import PartitionState
from agent.core.summary import summarize

T0 = 1710158400  # 2024-03-11T12:00:00Z
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CONFIG = CoreConfig(vocabulary_bits=1 << 12, vocabulary_hashes=3)

SOURCES = ["wiki", "kb", "news", "blog", "forum"]
GROUPS = ["grpaaaaa", "grpbbbbb", "grpccccc"]


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def _pick(bits: int, shift: int, choices):
    """Option `shift` of a packed integer: absent (None) half the time, else one of `choices`."""
    code = (bits >> (shift * 4)) & 0xF
    return None if code >= 8 else choices[code % len(choices)]


_RESULT_OPTIONS = {
    "packed": [True, False],
    "status": ["current", "superseded", "draft", "tombstoned", "unknown"],
    "effective_date": ["2024-01-01", "2024-03-11T17:00:00+05:30", "2030-01-01"],
    "expires_at": ["2024-03-11", "2031-01-01T00:00:00-08:00"],
    "acl": [[], ["grpaaaaa"], ["grpbbbbb", "grpccccc"]],
    "tenant": ["t1", "t2"],
    "fingerprint": ["aa", "bb", "AA"],
    "pre_rerank_rank": [1, 2, 5, 17],
}

# One draw per result: rank, score and a packed integer choosing the optional fields.
RESULT = st.tuples(st.integers(1, 30), st.floats(-1e6, 1e6), st.integers(0, 2**64 - 1))


def build_result(rank: int, score: float, bits: int) -> dict:
    r = {
        "chunk_id": f"c{rank}",
        "parent_id": ["p1", "p2", "p3"][bits % 3],
        "source": SOURCES[(bits >> 2) % len(SOURCES)],
        "rank": rank,
        "score": score,
    }
    for shift, (name, choices) in enumerate(_RESULT_OPTIONS.items(), start=2):
        value = _pick(bits, shift, choices)
        if value is not None:
            r[name] = value
    return r


@st.composite
def events(draw, i: int = 0, offset: float = 0.0):
    raw_results = draw(st.lists(RESULT, max_size=8, unique_by=lambda t: t[0]))
    bits = draw(st.integers(0, 2**64 - 1))
    terms = [f"term{(bits >> (3 * j)) % 8:04d}" for j in range(bits % 7)]
    query = {"id": "q0000000", "terms": terms}
    qtype = _pick(bits, 3, ["lexical", "paraphrase", "multi_hop"])
    if qtype:
        query["type"] = qtype
    language = _pick(bits, 4, ["en", "de", "en-US"])
    if language:
        query["language"] = language
    doc = {
        "schema": "retrieval.v1",
        "event_id": f"h-{i}",
        "ts": iso(T0 + offset),
        "app": ["alpha", "beta"][(bits >> 20) & 1],
        "query": query,
        "principal": {
            "tenant": "t1",
            "groups": [[], ["grpaaaaa"], ["grpbbbbb", "grpccccc"]][(bits >> 21) % 3],
            "claims_present": bool((bits >> 23) & 3),
        },
        "cutoff_k": 1 + (bits >> 25) % 6,
        "results": [build_result(*t) for t in raw_results],
    }
    if (bits >> 28) & 1:
        candidates = (bits >> 29) % 21
        doc["stages"] = {"candidates": candidates, "after_filter": (bits >> 34) % (candidates + 1)}
    if (bits >> 40) & 1:
        doc["latency_ms"] = float((bits >> 41) % 100_000) / 7
    if (bits >> 58) & 1:
        doc["filters"] = [
            {"name": ["acl", "recency"][(bits >> 59) & 1], "status": ["applied", "skipped", "error"][(bits >> 60) % 3],
             "removed": (bits >> 62) % 4}
        ]
    return doc


@st.composite
def streams(draw, spread: float = 3000.0, max_size: int = 15):
    offsets = draw(st.lists(st.floats(0, spread, allow_nan=False), min_size=1, max_size=max_size))
    return [draw(events(i, offset)) for i, offset in enumerate(offsets)]



def run(docs, config: CoreConfig = CONFIG) -> PartitionState:
    state = PartitionState(config)
    for doc in docs:
        state.process(orjson.dumps(doc))
    return state


def retrievals(tally) -> float:
    return sum(v for k, v in tally.items() if k[0] == "retrievals")


# --------------------------------------------------------------------------- bounds


@FAST
@given(streams())
def test_rates_and_shares_stay_in_unit_interval(docs):
    s = summarize(run(docs).totals(), {})
    for name in ("zero_result_rate", "filter_zero_rate", "new_term_rate", "mean_parent_diversity", "top_source_share"):
        value = s[name]
        assert value is None or 0.0 <= value <= 1.0, (name, value)
    for mix in ("query_type_share", "language_share"):
        shares = s[mix]
        assert all(0.0 <= v <= 1.0 for v in shares.values())
        assert abs(sum(shares.values()) - 1.0) < 1e-9
    assert s["events"]["processed"] == len(docs)


@FAST
@given(streams())
def test_source_hhi_between_one_over_n_and_one(docs):
    admitted_sources = set()
    for doc in docs:
        k = doc["cutoff_k"]
        for r in doc["results"]:
            if r.get("packed", r["rank"] <= k):
                admitted_sources.add(r["source"])
    s = summarize(run(docs).totals(), {})
    n = len(admitted_sources)
    if n == 0:
        return  # undefined; see test_definitions for what summarize should say
    assert 1 / n - 1e-12 <= s["source_hhi"] <= 1 + 1e-12
    assert 1 / n - 1e-12 <= s["top_source_share"] <= 1 + 1e-12
    assert s["top_source_share"] ** 2 <= s["source_hhi"] + 1e-12 <= s["top_source_share"] + 2e-12


# --------------------------------------------------------------------------- conservation


@FAST
@given(streams(spread=3000.0))
def test_widest_window_holds_every_event_within_it(docs):
    # Lateness as long as the spread: nothing is late, so the widest window holds everything.
    config = CoreConfig(lateness_seconds=3600, vocabulary_bits=1 << 12)
    state = run(docs, config)
    now = max(datetime.fromisoformat(d["ts"]).timestamp() for d in docs)
    _, seconds = max(config.windows, key=lambda w: w[1])
    assert retrievals(state.windows.window(seconds, now)) == len(docs)
    assert retrievals(state.totals()) == len(docs)
    assert ("late_events",) not in state.totals()


@FAST
@given(streams(spread=20_000.0, max_size=30), st.randoms(use_true_random=False))
def test_totals_count_every_event_whatever_the_order(docs, rng):
    rng.shuffle(docs)
    config = CoreConfig(windows=(("5m", 300),), lateness_seconds=120, vocabulary_bits=1 << 12)
    state = run(docs, config)
    t = state.totals()
    assert retrievals(t) == len(docs)
    assert sum(v for k, v in t.items() if k[0] == "results") == sum(len(d["results"]) for d in docs)
    # An independent model of lateness: late = older than (max ts so far) - lateness.
    watermark, late = None, 0
    for doc in docs:
        ts = datetime.fromisoformat(doc["ts"]).timestamp()
        if watermark is not None and ts < watermark - config.lateness_seconds:
            late += 1
        else:
            watermark = ts if watermark is None else max(watermark, ts)
    assert t.get(("late_events",), 0) == late
    in_buckets = sum(retrievals(b) for b in state.windows.buckets.values())
    assert in_buckets + retrievals(state.windows.retired) == len(docs)
    assert len(state.windows.buckets) <= config.horizon_buckets


# The decoder's robustness on arbitrary input is tested in tests/test_schema.py.


@FAST
@given(streams(spread=1000.0, max_size=20), st.data())
def test_checkpoint_anywhere_changes_nothing(docs, data):
    cut = data.draw(st.integers(0, len(docs)))
    config = CoreConfig(lateness_seconds=60, max_label_values=2, vocabulary_bits=1 << 12)
    whole = run(docs, config)
    first = run(docs[:cut], config)
    resumed = PartitionState.from_dict(config, orjson.loads(orjson.dumps(first.to_dict())))
    for doc in docs[cut:]:
        resumed.process(orjson.dumps(doc))
    assert resumed.to_dict() == whole.to_dict()
