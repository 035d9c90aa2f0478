"""Keyed hashing: the cross-language test vectors, the term table, and the key's rules.

`producer/hashing-vectors.json` is what a producer in another language must
match byte for byte. Every vector is recomputed here with the library, and
again without it (plain `unicodedata`, `hmac`, `hashlib` and `base64`,
following the file's own `recipe` text), so the recipe is proven, not only
the code. `RAGDRIFT_WRITE_VECTORS=1` rewrites the file from `CASES`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import pickle
import re
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.core.rules import HASH_PATTERN
from ragdrift_producer import HashKey, HashKeyError, Producer, _letters
from ragdrift_producer.hashing import FINGERPRINT, GROUP, ID, QUERY, TERM, Hasher
from ragdrift_producer.normalize import normalize, terms

VECTORS = Path(__file__).resolve().parents[2] / "producer" / "hashing-vectors.json"
EXAMPLE_KEY = "199e0601d858e041bbd40484b84d60b476f0e94f6274ff56246aa3c53a25acb5"

RECIPE = {
    "key": "The key is the bytes of the deployment's secret as given (RAGDRIFT_HASH_KEY's value, trimmed, "
           "in UTF-8; a hex string is NOT hex-decoded): at least 32 bytes with 8 different values.",
    "normalize": "Unicode NFKC (Unicode 14.0.0), then full case folding (CaseFolding.txt statuses C and F); "
                 "then every run of whitespace becomes one space (U+0020) and the ends are trimmed. "
                 "Whitespace is Unicode White_Space plus U+001C-U+001F (Python's str.isspace): "
                 "U+0009-U+000D, U+001C-U+0020, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, "
                 "U+202F, U+205F, U+3000.",
    "terms": "The maximal runs of letters, marks and numbers (general categories L, M and N of Unicode "
             "14.0.0, listed in ragdrift_producer/_letters.py) in the normalised text, in order, repeats kept.",
    "token": "HMAC-SHA256 under the key, over the domain name, a zero byte and the UTF-8 of the normalised "
             "value; the first 16 bytes of the MAC, base64url without padding (22 characters).",
    "query": "query_id: the token of the normalised query in domain ragdrift.query; term_tokens: the token "
             "of each term in domain ragdrift.term.",
    "group": "The token of the normalised group name (or ACL entry: one domain for both) in domain "
             "ragdrift.group.",
    "fingerprint": "The first 8 bytes of the HMAC-SHA256 (same key, domain ragdrift.fingerprint, a zero "
                   "byte, the UTF-8 of the normalised chunk text), in lower-case hex (16 characters).",
}
AGENT_HASH = re.compile(HASH_PATTERN.removesuffix("$") + r"\Z")
DOMAINS = {"query": QUERY, "term": TERM, "group": GROUP, "fingerprint": FINGERPRINT, "id": ID}

# (what it shows, input)
CASES = [
    ("ASCII", "How do I reset my password"),
    ("mixed case", "ReSeT PassWORD for VPN"),
    ("repeated and odd whitespace, trimmed", "  reset \t\t password\r\n\n now  "),
    ("no-break space (NFKC makes it a space)", "reset\u00a0password"),
    ("ideographic space U+3000", "reset\u3000password"),
    ("whitespace beyond ASCII: U+001F, U+0085, U+2028, U+1680, U+202F", "a\x1fb\x85c\u2028d\u1680e\u202ff"),
    ("zero-width space: not whitespace (kept), not a term character (splits terms)", "re\u200bset"),
    ("full-width letters and space", "\uff32\uff25\uff33\uff25\uff34\u3000\uff50\uff41\uff53\uff53"),
    ("ligature fi", "\ufb01le \ufb01nder"),
    ("superscripts, circled digit, Roman numeral", "x\u00b2 m\u00b3 \u2460 \u216b"),
    ("Kelvin and Angstrom signs", "5\u212a 3\u212b"),
    ("sharp s folds to ss", "Stra\u00dfe STRASSE"),
    ("capital sharp s", "\u1e9e"),
    ("Greek final sigma folds to sigma", "\u039f\u0394\u039f\u03a3 \u03bf\u03b4\u03bf\u03c2"),
    ("Turkish dotted capital I: i and a combining dot", "\u0130stanbul"),
    ("combining mark, decomposed (NFD) input", "cafe\u0301 re\u0301sume\u0301"),
    ("the same, precomposed (same outputs)", "caf\u00e9 r\u00e9sum\u00e9"),
    ("Devanagari: vowel signs and virama inside a word", "\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0937\u093e"),
    ("CJK without spaces: one term", "\u6771\u4eac\u306e\u5929\u6c17"),
    ("half-width katakana", "\uff76\uff80\uff76\uff85"),
    ("Hangul", "\ud55c\uad6d\uc5b4 \uac80\uc0c9"),
    ("Arabic, question mark not a term", "\u0645\u0627 \u0647\u0648 \u0627\u0644\u0637\u0642\u0633\u061f"),
    ("Arabic with harakat (marks inside the word)", "\u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627"),
    ("emoji are not terms", "reset \U0001f511 password \U0001f44d\U0001f3fd"),
    ("punctuation separates terms", "what's the e-mail policy? (v2.0)"),
    ("digits, Arabic-Indic and Devanagari digits", "error 404 on port 8080, \u0663\u0664 and \u096a\u0968"),
    ("underscore is punctuation: a separator", "snake_case_name"),
    ("only punctuation: no terms", "?!\u2026"),
    ("empty string", ""),
    ("a lone space", " "),
]


def _vector(hasher: Hasher, name: str, text: str) -> dict[str, object]:
    normalized = normalize(text)
    query_id, term_tokens = hasher.query(text)
    return {"name": name, "input": text, "normalized": normalized, "terms": terms(normalized),
            "query_id": query_id, "term_tokens": term_tokens, "group": hasher.group(text),
            "fingerprint": hasher.fingerprint(text)}


def _document() -> dict[str, object]:
    hasher = Hasher(HashKey(EXAMPLE_KEY.encode()))
    return {
        "description": "Test vectors for ragdrift's keyed hashing (ragdrift_producer.hashing and .normalize). "
                       "A producer in any language must produce every output of every case from its input "
                       "under key.utf8. Regenerate: RAGDRIFT_WRITE_VECTORS=1 pytest tests/producer/test_hashing.py",
        "key": {"note": "EXAMPLE ONLY: published with these vectors, never a deployment's key.",
                "utf8": EXAMPLE_KEY},
        "domains": {name: domain.decode() for name, domain in DOMAINS.items()},
        "recipe": RECIPE,
        "cases": [_vector(hasher, name, text) for name, text in CASES],
    }


def _visible(text: str) -> str:
    """JSON text with every character that does not print (no-break and other spaces, format
    characters) as its escape, so no case hides what it holds."""
    def escape(match: re.Match[str]) -> str:
        units = match[0].encode("utf-16-be")
        return "".join(f"\\u{int.from_bytes(units[i:i + 2], 'big'):04x}" for i in range(0, len(units), 2))

    return re.sub(r"[^ -~\n]", lambda m: m[0] if m[0].isprintable() else escape(m), text)


@pytest.fixture(scope="module")
def vectors() -> dict:
    if os.environ.get("RAGDRIFT_WRITE_VECTORS") == "1":
        VECTORS.write_text(_visible(json.dumps(_document(), ensure_ascii=False, indent=2)) + "\n", encoding="utf-8")
    return json.loads(VECTORS.read_text(encoding="utf-8"))


def test_the_vectors_file_is_what_the_library_computes(vectors):
    assert vectors == _document()


def test_the_vectors_cover_every_kind_of_case(vectors):
    cases = {c["name"]: c for c in vectors["cases"]}
    assert cases["empty string"]["normalized"] == "" and cases["empty string"]["terms"] == []
    assert cases["a lone space"]["normalized"] == "" and cases["a lone space"]["term_tokens"] == []
    assert cases["a lone space"]["query_id"] == cases["empty string"]["query_id"]
    assert cases["sharp s folds to ss"]["terms"] == ["strasse", "strasse"]
    assert cases["Greek final sigma folds to sigma"]["terms"] == ["\u03bf\u03b4\u03bf\u03c3"] * 2
    assert cases["ligature fi"]["normalized"] == "file finder"
    assert cases["superscripts, circled digit, Roman numeral"]["normalized"] == "x2 m3 1 xii"
    decomposed, composed = cases["combining mark, decomposed (NFD) input"], cases["the same, precomposed (same outputs)"]
    assert {k: v for k, v in decomposed.items() if k not in ("name", "input")} == \
        {k: v for k, v in composed.items() if k not in ("name", "input")}
    assert cases["Devanagari: vowel signs and virama inside a word"]["terms"] == [
        "\u0939\u093f\u0928\u094d\u0926\u0940", "\u092d\u093e\u0937\u093e"]
    assert len(cases["CJK without spaces: one term"]["terms"]) == 1
    assert cases["emoji are not terms"]["terms"] == ["reset", "password"]
    assert cases["underscore is punctuation: a separator"]["terms"] == ["snake", "case", "name"]
    assert cases["punctuation separates terms"]["terms"] == ["what", "s", "the", "e", "mail", "policy", "v2", "0"]
    assert cases["whitespace beyond ASCII: U+001F, U+0085, U+2028, U+1680, U+202F"]["normalized"] == "a b c d e f"
    assert cases["zero-width space: not whitespace (kept), not a term character (splits terms)"]["terms"] == ["re", "set"]


def _plain_normalize(text: str) -> str:
    """The recipe's normalisation, with nothing from the library."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    out, space = [], False
    for ch in folded:
        if ch.isspace():
            space = True
            continue
        if space and out:
            out.append(" ")
        space = False
        out.append(ch)
    return "".join(out)


def _plain_terms(normalized: str) -> list[str]:
    found, run = [], ""
    for ch in normalized + " ":
        if unicodedata.category(ch)[0] in "LMN":
            run += ch
        elif run:
            found.append(run)
            run = ""
    return found


def _plain_mac(key: bytes, domain: str, value: str) -> bytes:
    return hmac.new(key, domain.encode() + b"\x00" + value.encode("utf-8"), hashlib.sha256).digest()


def _plain_token(key: bytes, domain: str, value: str) -> str:
    return base64.urlsafe_b64encode(_plain_mac(key, domain, value)[:16]).decode().rstrip("=")


def test_the_recipe_alone_reproduces_every_vector(vectors):
    """Without the library: the file's key, domains and recipe are enough."""
    assert unicodedata.unidata_version == "14.0.0", "the vectors are Unicode 14.0.0's (Python 3.11)"
    key, domains = vectors["key"]["utf8"].encode("utf-8"), vectors["domains"]
    assert vectors["recipe"] == RECIPE
    for case in vectors["cases"]:
        normalized = _plain_normalize(case["input"])
        assert normalized == case["normalized"], case["name"]
        assert _plain_terms(normalized) == case["terms"], case["name"]
        assert _plain_token(key, domains["query"], normalized) == case["query_id"], case["name"]
        assert [_plain_token(key, domains["term"], t) for t in case["terms"]] == case["term_tokens"], case["name"]
        assert _plain_token(key, domains["group"], normalized) == case["group"], case["name"]
        assert _plain_mac(key, domains["fingerprint"], normalized)[:8].hex() == case["fingerprint"], case["name"]
        assert len(case["query_id"]) == 22 and len(case["fingerprint"]) == 16


@settings(max_examples=500)
@given(st.text(st.characters(codec=None), max_size=40))
def test_the_library_follows_the_recipe_for_any_text(text):
    """Any text, lone surrogates included: the same normal form and terms as the recipe's plain
    reading, and tokens the agent takes as hashes (never as raw text or a phone number)."""
    normalized = normalize(text)
    assert normalized == _plain_normalize(text)
    assert terms(normalized) == _plain_terms(normalized)
    assert normalize(normalized) == normalized
    hasher = Hasher(HashKey(EXAMPLE_KEY.encode()))
    query_id, term_tokens = hasher.query(text)
    for token in (query_id, *term_tokens, hasher.group(text), hasher.identifier(text)[1:]):
        assert len(token) == 22 and AGENT_HASH.match(token), token
    assert re.fullmatch(r"[0-9a-f]{16}", hasher.fingerprint(text))


def test_one_vector_by_hand():
    """The first case spelled out, so the recipe's every step is visible in one place."""
    key = EXAMPLE_KEY.encode()
    message = b"ragdrift.query\x00how do i reset my password"
    digest = hmac.new(key, message, hashlib.sha256).digest()
    expected = base64.urlsafe_b64encode(digest[:16]).rstrip(b"=").decode()
    assert Hasher(HashKey(key)).query("How do I reset my password")[0] == expected
    reset = hmac.new(key, b"ragdrift.term\x00reset", hashlib.sha256).digest()
    assert base64.urlsafe_b64encode(reset[:16]).rstrip(b"=").decode() in Hasher(HashKey(key)).query("RESET")[1]
    fingerprint = hmac.new(key, b"ragdrift.fingerprint\x00reset", hashlib.sha256).hexdigest()[:16]
    assert Hasher(HashKey(key)).fingerprint(" Reset\n") == fingerprint


def test_domains_keep_a_one_term_query_apart_from_its_term_and_group():
    hasher = Hasher(HashKey(EXAMPLE_KEY.encode()))
    query_id, (term,) = hasher.query("vpn")
    assert len({query_id, term, hasher.group("vpn"), hasher.identifier("vpn")[1:]}) == 4


def test_the_term_table_is_the_unicode_data_it_names():
    """`_letters.RANGES` is generated from Unicode 14.0.0, which Python 3.11 (the project's and
    CI's Python) carries; on another Python the check cannot be made here, which CI does not allow."""
    if unicodedata.unidata_version != _letters.UNICODE_VERSION:
        why = (f"this Python has Unicode {unicodedata.unidata_version}, the table is "
               f"{_letters.UNICODE_VERSION}'s: run this test on Python 3.11")
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    assert _letters.RANGES.split() == _letters.generate().split()


# -- the key ------------------------------------------------------------------------

WEAK_KEYS = {
    "short": b"0123456789abcdef0123456789abcde",  # 31 bytes
    "low variety": b"a" * 64,
    "seven values": b"abcdefg" * 10,
}


@pytest.mark.parametrize("name", sorted(WEAK_KEYS))
def test_a_weak_key_is_refused_without_showing_it(name, tmp_path, monkeypatch):
    secret = WEAK_KEYS[name]
    monkeypatch.setenv("RAGDRIFT_HASH_KEY", secret.decode())
    key_file = tmp_path / "key"
    key_file.write_bytes(secret + b"\n")
    for build in (lambda: HashKey(secret), lambda: HashKey(bytearray(secret)), HashKey.from_env,
                  lambda: HashKey.from_file(key_file)):
        with pytest.raises(HashKeyError) as raised:
            build()
        _assert_hidden(secret, str(raised.value), repr(raised.value), *map(str, raised.value.args))


def test_missing_empty_or_unreadable_keys_are_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("RAGDRIFT_HASH_KEY", raising=False)
    with pytest.raises(HashKeyError, match="RAGDRIFT_HASH_KEY is unset or empty"):
        HashKey.from_env()
    monkeypatch.setenv("RAGDRIFT_HASH_KEY", "")
    with pytest.raises(HashKeyError, match="unset or empty"):
        HashKey.from_env()
    monkeypatch.setenv("RAGDRIFT_HASH_KEY", "   \n")
    with pytest.raises(HashKeyError, match="weak"):
        HashKey.from_env()
    with pytest.raises(HashKeyError, match="cannot be read"):
        HashKey.from_file(tmp_path / "absent")
    for secret in ("", b""):
        with pytest.raises(HashKeyError):
            HashKey(secret)  # type: ignore[arg-type]
    with pytest.raises(HashKeyError, match="must be bytes"):
        HashKey(EXAMPLE_KEY)  # type: ignore[arg-type]


def test_a_good_key_from_env_or_file_is_its_trimmed_utf8_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGDRIFT_HASH_KEY", f" {EXAMPLE_KEY}\n")
    key_file = tmp_path / "key"
    key_file.write_text(EXAMPLE_KEY + "\n")
    expected = Hasher(HashKey(EXAMPLE_KEY.encode())).query("x")
    assert Hasher(HashKey.from_env()).query("x") == expected
    assert Hasher(HashKey.from_file(key_file)).query("x") == expected
    monkeypatch.setenv("OTHER_KEY", EXAMPLE_KEY)
    assert Hasher(HashKey.from_env("OTHER_KEY")).query("x") == expected


def test_the_key_never_shows_in_repr_str_or_pickle():
    secret = EXAMPLE_KEY.encode()
    key = HashKey(secret)
    hasher = Hasher(key)
    producer = Producer(app="app", key=key, kafka={"bootstrap_servers": "127.0.0.1:9"}, registry=None)
    try:
        _assert_hidden(secret, repr(key), str(key), repr(hasher), str(hasher), repr(producer), str(producer),
                       repr(producer.stats()))
    finally:
        producer.close(0)
    with pytest.raises(TypeError, match="not picklable"):
        pickle.dumps(key)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        with pytest.raises(TypeError):
            pickle.dumps(key, protocol=protocol)
    with pytest.raises(TypeError):
        pickle.dumps(hasher)
    assert not hasattr(key, "__dict__")


def _assert_hidden(secret: bytes, *texts: str) -> None:
    """Neither the key nor a recognisable part of it (its first or last 8 characters) in any text."""
    plain = secret.decode("latin-1")
    for text in texts:
        for part in (plain, plain[:8], plain[-8:], secret.hex()[:16]):
            assert part not in text, text
