"""The published JSON Schema and the decoder agree on the `retrieval.v1` contract.

The decoder (`agent.core.decoder`) is the reference implementation. The conformance
corpus under tests/data/events holds one message per file:

- valid/         accepted by both;
- invalid/       rejected by both, with the decoder's exact reason;
- decoder_only/  rules a JSON Schema cannot express (rank uniqueness, calendar
                 validity, finite numbers, byte size, reason precedence, parser
                 limits): the decoder's reason, and what the schema says.

Each folder's expected.json maps file name to what is expected of it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import sys
import typing
from datetime import datetime
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from agent.core import model as ev
from agent.core import privacy, rules
from agent.core.decoder import Decoded, decode
from agent.core.reasons import RejectedEvent
from agent.schema import load_schema

CORPUS = Path(__file__).parent / "data" / "events"
SCHEMA = load_schema()
VALIDATOR = Draft202012Validator(SCHEMA)
REASON_KINDS = {"invalid_json", "invalid_field", "unsupported_schema", "too_large", "pii_suspected"}
PATH = re.compile(r"^(\$|[a-z_]+(\[\d+\])*(\.[a-z_]+(\[\d+\])*)*)$")


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


@contextlib.contextmanager
def _no_parser_limits():
    """Lift CPython's depth and integer-digit limits: they are not JSON's."""
    depth, digits = sys.getrecursionlimit(), sys.get_int_max_str_digits()
    sys.setrecursionlimit(max(depth, 20_000))
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.setrecursionlimit(depth)
        sys.set_int_max_str_digits(digits)


def schema_accepts(raw: bytes) -> bool:
    """What a producer-side validator says: strict UTF-8 JSON (RFC 8259), then the schema."""
    try:
        text = raw.decode("utf-8")
        with _no_parser_limits():
            doc = json.loads(text, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError):
        return False
    return VALIDATOR.is_valid(doc)


def decoder_verdict(raw: bytes, **kwargs) -> Decoded | RejectedEvent:
    try:
        return decode(raw, **kwargs)
    except RejectedEvent as exc:
        return exc


def _expected(folder: str) -> dict:
    return json.loads((CORPUS / folder / "expected.json").read_text(encoding="utf-8"))


def _cases(folder: str) -> list:
    return [pytest.param(name, meta, id=name.removesuffix(".json")) for name, meta in _expected(folder).items()]


# --------------------------------------------------------------------------- the schema itself


def test_schema_is_valid_draft_2020_12():
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["$id"] and SCHEMA["title"]
    assert SCHEMA["additionalProperties"] is True


def _properties(node: dict, path: str = ""):
    for name, sub in node.get("properties", {}).items():
        yield f"{path}{name}", sub
        yield from _properties(sub, f"{path}{name}.")
        if "items" in sub:
            yield from _properties(sub["items"], f"{path}{name}[].")
    for name, sub in node.get("$defs", {}).items():
        yield from _properties(sub, f"$defs.{name}.")


def test_every_field_has_a_description():
    missing = [path for path, sub in _properties(SCHEMA) if not sub.get("description")]
    assert missing == []


def test_description_lists_the_decoder_only_rules():
    text = SCHEMA["description"]
    for words in ("unique", "calendar", "NaN", "too_large", "pii_suspected", "precedence", "1.0"):
        assert words in text, words
    assert "decoder_only" in SCHEMA["$comment"]


# The decoder's free-text pattern; the schema spells it portably (see its $comment).
_DECODER_TEXT = re.compile(r"^\^\[\^(?P<cls>\\x00-\\x1f\\x7f\\ud800-\\udfff)\]\{(?P<min>\d+),(?P<max>\d+)\}\\Z$")
TEXT_PATTERN = SCHEMA["$defs"]["shortText"]["pattern"]


def _ecma(pattern: str) -> str:
    """The decoder anchors with `\\Z` (Python's `$` admits a final newline); JSON Schema uses `$`."""
    return pattern.removesuffix(r"\Z") + "$"


def _decoder_constraints(tp, struct_path: str, out: dict) -> dict:
    """Flatten a msgspec type into {'types', 'pattern', 'minLength', ...} (recursing into structs)."""
    info = msgspec.inspect.type_info(tp) if not isinstance(tp, msgspec.inspect.Type) else tp
    members = info.types if isinstance(info, msgspec.inspect.UnionType) else (info,)
    c: dict = {"types": set()}
    for m in members:
        if isinstance(m, msgspec.inspect.Metadata):
            # The decoder checks these characters in the struct's __post_init__ and
            # declares the pattern it enforces (lengths included) in extra_json_schema.
            declared = m.extra_json_schema["pattern"].removesuffix("$") + r"\Z"
            m = msgspec.structs.replace(m.type, pattern=declared, min_length=None, max_length=None)
        if isinstance(m, msgspec.inspect.NoneType):
            c["types"].add("null")
        elif isinstance(m, msgspec.inspect.BoolType):
            c["types"].add("boolean")
        elif isinstance(m, (msgspec.inspect.IntType, msgspec.inspect.FloatType)):
            c["types"].add("integer" if isinstance(m, msgspec.inspect.IntType) else "number")
            assert m.gt is None and m.lt is None and m.multiple_of is None, "needs a rule here"
            if m.ge is not None:
                c["minimum"] = m.ge
            if m.le is not None:
                c["maximum"] = m.le
        elif isinstance(m, msgspec.inspect.StrType):
            c["types"].add("string")
            text = _DECODER_TEXT.match(m.pattern or "")
            if text:
                c.update(pattern="<text>", minLength=int(text["min"]), maxLength=int(text["max"]))
            elif m.pattern is not None:
                c["pattern"] = _ecma(m.pattern).replace(r"\d", "[0-9]")
            if m.min_length is not None:
                c["minLength"] = m.min_length
            if m.max_length is not None:
                c["maxLength"] = m.max_length
        elif isinstance(m, msgspec.inspect.DateTimeType):
            c["types"].add("string")
            c["pattern"] = "<rfc3339>"
        elif isinstance(m, msgspec.inspect.LiteralType):
            c["enum"] = set(m.values)
        elif isinstance(m, msgspec.inspect.ListType):
            c["types"].add("array")
            if m.max_length is not None:
                c["maxItems"] = m.max_length
            c["items"] = _decoder_constraints(m.item_type, struct_path + "[]", out)
        elif isinstance(m, msgspec.inspect.StructType):
            c["types"].add("object")
            _decoder_struct(m, struct_path, out)
        else:  # pragma: no cover - a new kind of field type needs a rule here
            raise AssertionError(f"unhandled type {m!r} at {struct_path}")
    if "enum" in c:
        c["enum"] |= {None} if "null" in c["types"] else set()
        c["types"] = set()
    return c


def _decoder_struct(info: msgspec.inspect.StructType, path: str, out: dict) -> None:
    out[f"{path}<required>"] = {f.name for f in info.fields if f.required}
    for f in info.fields:
        out[f"{path}.{f.name}".lstrip(".")] = _decoder_constraints(f.type, f"{path}.{f.name}".lstrip("."), out)


def _resolve(node: dict) -> dict:
    while "$ref" in node:
        extra = {k: v for k, v in node.items() if k not in ("$ref", "description")}
        node = {**SCHEMA["$defs"][node["$ref"].removeprefix("#/$defs/")], **extra}
    return node


def _schema_constraints(node: dict, path: str, out: dict) -> dict:
    node = _resolve(node)
    c: dict = {"types": set()}
    for alt in node.get("anyOf", []):
        sub = _schema_constraints(alt, path, out)
        c["types"] |= sub.pop("types")
        c.update(sub)
    types = node.get("type", [])
    c["types"] |= {types} if isinstance(types, str) else set(types)
    for key in ("pattern", "minLength", "maxLength", "minimum", "maximum", "maxItems"):
        if key in node:
            c[key] = node[key]
    if c.get("pattern") == TEXT_PATTERN:
        c["pattern"] = "<text>"
    if "enum" in node:
        c["enum"] = set(node["enum"])
    if "items" in node:
        c["items"] = _schema_constraints(node["items"], path + "[]", out)
    if "properties" in node:
        out[f"{path}<required>"] = set(node.get("required", []))
        for name, sub in node["properties"].items():
            out[f"{path}.{name}".lstrip(".")] = _schema_constraints(sub, f"{path}.{name}".lstrip("."), out)
    if path == "ts":  # msgspec's own RFC 3339 parser; its spelling is tested on the corpus
        c["pattern"] = "<rfc3339>"
    return c


def test_schema_states_the_decoders_field_rules():
    """Required fields, types, nullability, patterns, lengths, minimums, maxItems, enums."""
    decoder: dict = {}
    _decoder_struct(msgspec.inspect.type_info(ev.Event), "", decoder)
    schema: dict = {}
    top = _schema_constraints(SCHEMA, "", schema)
    assert top["types"] == {"object"}
    # `schema` is a plain str to msgspec and checked in __post_init__; the schema pins it.
    assert schema.pop("schema") == {"types": {"string"}}
    assert SCHEMA["properties"]["schema"]["const"] == ev.SCHEMA
    decoder.pop("schema")
    assert schema == decoder


def test_schema_patterns_are_the_decoders():
    props = SCHEMA["properties"]
    assert SCHEMA["$defs"]["hashToken"]["pattern"] == rules.HASH_PATTERN
    assert props["event_id"]["pattern"] == typing.get_args(ev.EventId)[1].extra_json_schema["pattern"]
    assert props["app"]["pattern"] == typing.get_args(ev.AppName)[1].extra_json_schema["pattern"]
    assert privacy.HASH_BOUND == 128 and "{8,128}" in rules.HASH_PATTERN
    assert set(privacy.HASHED_FIELDS) == {"query.id", "query.terms[]", "principal.groups[]", "results[].acl[]"}
    assert SCHEMA["$defs"]["ident"]["pattern"] == TEXT_PATTERN


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(max_codepoint=0x2FFFF), max_size=6) | st.sampled_from(["\ud800", "a\udfff", "\x7f", "\x9f", "\U0001F4DA"]))
def test_portable_text_pattern_is_the_decoders(text):
    """Same verdict as the decoder's [^\\x00-\\x1f\\x7f\\ud800-\\udfff]{1,n} on any string."""
    decoder = re.fullmatch(r"[^\x00-\x1f\x7f\ud800-\udfff]{1,6}", text) is not None
    schema = re.fullmatch(TEXT_PATTERN.removeprefix("^").removesuffix("$"), text) is not None and 1 <= len(text) <= 6
    assert schema == decoder


def test_load_schema_returns_a_fresh_copy():
    first = load_schema()
    first["title"] = "changed"
    assert load_schema()["title"] == SCHEMA["title"]


# --------------------------------------------------------------------------- the corpus


def test_corpus_index_matches_files():
    for folder in ("valid", "invalid", "decoder_only"):
        files = {p.name for p in (CORPUS / folder).glob("*.json")} - {"expected.json"}
        assert files == set(_expected(folder)), folder
    assert len(_expected("valid")) >= 20 and len(_expected("invalid")) >= 50


@pytest.mark.parametrize(("name", "meta"), _cases("valid"))
def test_valid_event_is_accepted_by_both(name, meta):
    raw = (CORPUS / "valid" / name).read_bytes()
    verdict = decoder_verdict(raw)
    assert isinstance(verdict, Decoded), verdict
    assert verdict.unknown_fields == meta["unknown_fields"]
    assert [r.rank for r in verdict.event.results] == meta["ranks"]
    errors = [e.message for e in VALIDATOR.iter_errors(json.loads(raw))]
    assert errors == []
    assert schema_accepts(raw)


@pytest.mark.parametrize(("name", "meta"), _cases("invalid"))
def test_invalid_message_is_rejected_by_both(name, meta):
    raw = (CORPUS / "invalid" / name).read_bytes()
    verdict = decoder_verdict(raw)
    assert isinstance(verdict, RejectedEvent), f"decoder accepted {name}"
    assert verdict.reason == meta["reason"]
    assert not schema_accepts(raw), f"schema accepted {name}"


@pytest.mark.parametrize(("name", "meta"), _cases("decoder_only"))
def test_decoder_only_rule(name, meta):
    raw = (CORPUS / "decoder_only" / name).read_bytes()
    kwargs = {"max_bytes": meta["max_bytes"]} if "max_bytes" in meta else {}
    verdict = decoder_verdict(raw, **kwargs)
    assert isinstance(verdict, RejectedEvent), f"decoder accepted {name}"
    assert verdict.reason == meta["reason"]
    assert schema_accepts(raw) is (meta["schema"] == "accepts")


def test_decoder_only_cases_are_documented_in_the_schema():
    topics = ("unique", "calendar", "NaN", "too_large", "precede", "integer", "depth")
    why = " ".join(meta["why"] for meta in _expected("decoder_only").values())
    for topic in topics:
        assert topic in why, topic
        assert topic in SCHEMA["description"], topic


# --------------------------------------------------------------------------- properties

FIELD_NAMES = sorted(
    {f for s in (ev.Event, ev.Query, ev.Principal, ev.Pipeline, ev.Stages, ev.Filter, ev.Feedback, ev.Result)
     for f in s.__struct_fields__}
)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["retrieval.v1", "a b", "x@y", "abcdefgh", "2026-01-01", "applied", "current"])
)
json_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=6), children, max_size=5),
    max_leaves=25,
)


def _assert_contained(raw: bytes, **kwargs) -> None:
    """decode() returns a Decoded or raises RejectedEvent with a known reason, nothing else."""
    try:
        result = decode(raw, **kwargs)
    except RejectedEvent as exc:
        kind, _, path = exc.reason.partition(":")
        assert kind in REASON_KINDS and exc.kind == kind
        if kind == "invalid_field":
            assert PATH.match(path), exc.reason
        if kind == "pii_suspected":
            assert PATH.match(exc.detail), exc.detail
    else:
        assert isinstance(result, Decoded)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_decoder_raises_only_rejected_event_on_bytes(raw):
    _assert_contained(raw)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_decoder_raises_only_rejected_event_on_json_values(value):
    _assert_contained(json.dumps(value).encode())


# ---- a strategy for valid events, and mutations of them

HASH_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
# Cheap draws plus the boundary values (long strings are slow to generate).
hash_tokens = st.text(HASH_ALPHABET, min_size=8, max_size=16) | st.sampled_from(["h" * 128, "H_-9" * 32, "a1b2C3d_"])
_printable = st.characters(exclude_categories=("Cs",), exclude_characters=[chr(i) for i in range(32)] + ["\x7f"])
short_texts = st.text(_printable, min_size=1, max_size=12) | st.sampled_from(["T" * 128, "é" * 128, "📚" * 128, "☃"])
idents = st.text(_printable, min_size=1, max_size=12) | st.sampled_from(["c" * 256, "ü" * 256])
labels = st.text("ABCxyz019_.:-", min_size=1, max_size=8) | st.just("L" * 64)
finite = st.floats(-1e12, 1e12) | st.integers(-(10**12), 10**12)
counts = st.integers(0, 10**9)


@st.composite
def instants(draw, *, ts: bool):
    """An RFC 3339 instant in one of the spellings the decoder takes for `ts` or for dates."""
    when = draw(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)))
    if not ts and draw(st.booleans()):
        return when.strftime("%Y-%m-%d").zfill(10)
    sep = draw(st.sampled_from("Tt " if ts else "Tt"))
    digits = draw(st.integers(0, 12 if ts else 9))
    fraction = "." + "".join(draw(st.lists(st.sampled_from("0123456789"), min_size=digits, max_size=digits))) if digits else ""
    minutes = draw(st.integers(-(24 * 60 - 1), 24 * 60 - 1))
    if minutes == 0 and draw(st.booleans()):
        offset = draw(st.sampled_from("Zz" if ts else "Z"))
    else:
        h, m = divmod(abs(minutes), 60)
        colon = ":" if not ts or draw(st.booleans()) else ""
        offset = f"{'-' if minutes < 0 else '+'}{h:02d}{colon}{m:02d}"
    return f"{when.year:04d}-{when.month:02d}-{when.day:02d}{sep}{when.hour:02d}:{when.minute:02d}:{when.second:02d}{fraction}{offset}"


def _obj(required: dict, optional: dict):
    return st.fixed_dictionaries(required, optional=optional)


def _nullable(strategy):
    return strategy | st.none()


_result_fields = _obj(
    {"chunk_id": idents, "parent_id": idents, "source": idents, "score": finite},
    {
        "rerank_score": _nullable(finite),
        "pre_rerank_rank": _nullable(st.integers(1, 10**6)),
        "effective_date": _nullable(instants(ts=False)),
        "expires_at": _nullable(instants(ts=False)),
        "status": _nullable(st.sampled_from(["current", "superseded", "draft", "tombstoned", "unknown"])),
        "authority": _nullable(short_texts),
        "acl": st.lists(hash_tokens, max_size=3),
        "tenant": _nullable(short_texts),
        "tokens": _nullable(counts),
        "fingerprint": _nullable(st.text("0123456789abcdefABCDEF", min_size=1, max_size=16) | st.just("f" * 128)),
        "packed": _nullable(st.booleans()),
    },
)


@st.composite
def results(draw):
    """Results with unique ranks, in random list order."""
    ranks = draw(st.lists(st.integers(1, 10**6), unique=True, max_size=5))
    return [{**draw(_result_fields), "rank": rank} for rank in ranks]


valid_events = _obj(
    {
        "schema": st.just("retrieval.v1"),
        "event_id": st.text("AZaz09._:-", min_size=1, max_size=12) | st.just("E" * 128),
        "ts": instants(ts=True),
        "app": st.text("az09_-", min_size=1, max_size=12) | st.just("a" * 64),
        "query": _obj(
            {"id": hash_tokens},
            {
                "terms": st.lists(hash_tokens, max_size=4) | hash_tokens.map(lambda t: [t] * 64),
                "type": _nullable(labels),
                "language": _nullable(st.sampled_from(["en", "en-GB", "pt-BR", "zh-Hant-TW", "sgn-BE-FR", "x-1", "EN-us"])),
            },
        ),
        "principal": _obj(
            {"tenant": short_texts, "groups": st.lists(hash_tokens, max_size=4)},
            {"claims_present": st.booleans()},
        ),
        "cutoff_k": st.integers(1, 10**6),
        "results": results(),
    },
    {
        "pipeline": _nullable(_obj({}, {k: _nullable(short_texts) for k in ("version", "retriever", "reranker", "embedding_model")})),
        "stages": _nullable(_obj({}, {k: _nullable(counts) for k in ("candidates", "after_filter", "after_rerank", "packed")})),
        "filters": st.lists(_obj({"name": labels, "status": st.sampled_from(["applied", "skipped", "error"])}, {"removed": counts}), max_size=3),
        "latency_ms": _nullable(st.floats(0, 1e12) | st.integers(0, 10**12)),
        "feedback": _nullable(_obj({}, {
            "rephrased": st.booleans(),
            "correction": st.booleans(),
            "thumbs": _nullable(st.sampled_from([-1, 0, 1])),
            "cited": st.lists(idents, max_size=3),
        })),
    },
)

# Values a producer bug might put anywhere. Excluded on purpose: integral floats (1.0, 1e12) and
# calendar-invalid dates (decoder-only rules), and strings ending in a newline (Python's `re`, which
# jsonschema uses, lets `$` match before a final newline; ECMA-262 and the decoder's `\Z` do not).
_not_integral = st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer())
odd_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(2**63, 2**70),
    _not_integral,
    st.text(max_size=10).filter(lambda s: not s.endswith("\n")),
    st.text(HASH_ALPHABET, min_size=6, max_size=9),
    st.text(HASH_ALPHABET, min_size=127, max_size=130),
    st.sampled_from(["a b", "jane@example.com", "\t", "", "retrieval.v1", "retrieval.v2", "applied", "current",
                     "2026-01-01", "2026/01/01", "2026-01-01T00:00:00", "2026-01-01T00:00:00z", "A" * 65,
                     "x" * 129, "é" * 257, "2026-01-01T00:00:00.1234567890Z", "2026-01-01T00:00:00+0100",
                     "a\x00b", "\x1b[0m", "\n", "\x7f", "\ud800", 10**12, -(10**12), 999999999999.5,
                     -999999999999.5, 1000000000000.5, -1000000000000.5, 10**13]),
    instants(ts=True),
    instants(ts=False),
    st.lists(st.integers(-1, 2) | st.text(HASH_ALPHABET, min_size=7, max_size=9), max_size=3),
    st.builds(dict),  # fresh objects: a mutation may add keys to them
    st.builds(list),
)


_unknown_names = st.text(max_size=5)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*prefix, i))


def _ranks_unique(doc) -> bool:
    ranks = [r["rank"] for r in doc["results"]]
    return len(ranks) == len(set(ranks))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(valid_events, st.data())
def test_decoder_accepts_iff_schema_accepts(doc, data):
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(0, 3), label="mutations")):
        path = data.draw(st.sampled_from(list(_paths(doc))), label="path")
        action = data.draw(st.sampled_from(["replace", "delete", "add_unknown"]), label="action")
        if not path:
            if action == "add_unknown" and isinstance(doc, dict):
                doc["x_" + data.draw(_unknown_names)] = data.draw(odd_values)
            continue
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        target = parent[path[-1]]
        if action == "replace":
            parent[path[-1]] = data.draw(odd_values, label="value")
        elif action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add_unknown" and isinstance(target, dict):
            target["x_" + data.draw(_unknown_names)] = data.draw(odd_values)
    try:
        raw = json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: only a \u escape can carry it in UTF-8 JSON
        raw = json.dumps(doc).encode()
    by_schema = schema_accepts(raw)
    verdict = decoder_verdict(raw)
    event("accepted" if by_schema else "rejected")
    if by_schema and not _ranks_unique(doc):  # decoder-only rule
        assert isinstance(verdict, RejectedEvent) and verdict.reason == "invalid_field:results"
        return
    assert isinstance(verdict, Decoded) is by_schema, (verdict, [e.message for e in VALIDATOR.iter_errors(doc)])


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(valid_events, st.data())
def test_decoder_contains_arbitrary_json_inside_an_event(doc, data):
    doc = copy.deepcopy(doc)
    path = data.draw(st.sampled_from(list(_paths(doc))[1:]))
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = data.draw(json_values)
    _assert_contained(json.dumps(doc).encode())


@settings(max_examples=50, deadline=None)
@given(valid_events, st.data())
def test_decoder_contains_corrupted_bytes(doc, data):
    raw = bytearray(json.dumps(doc).encode())
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw)))
        raw[at:at + data.draw(st.integers(0, 3))] = data.draw(st.binary(max_size=3))
    _assert_contained(bytes(raw))
