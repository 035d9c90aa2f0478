"""The one normalisation every producer shares.

The agent matches hashes, never text: query mix and new terms key on
`query.id` and `query.terms`, authorization intersects hashed groups with
hashed ACL entries. Two producers that normalise differently break all three
silently, so the rule is fixed here and in the test vectors
(`producer/hashing-vectors.json`):

1. Unicode NFKC, then full case folding;
2. every run of whitespace becomes one space, and the ends are trimmed.
   Whitespace is what `str.isspace` says: Unicode White_Space and also
   U+001C-U+001F, which a producer in another language must add.

Terms are the maximal runs of letters, marks and numbers (general categories
L, M and N, as listed in `_letters.py`) in the normalised text, in order,
repeats kept (the agent counts term occurrences).
"""

from __future__ import annotations

import re
import unicodedata

from ragdrift_producer._letters import RANGES


def _term_pattern() -> re.Pattern[str]:
    parts = []
    for item in RANGES.split():
        first, _, last = item.partition("-")
        lo = re.escape(chr(int(first, 16)))
        parts.append(f"{lo}-{re.escape(chr(int(last, 16)))}" if last else lo)
    return re.compile(f"[{''.join(parts)}]+")


_TERM = _term_pattern()
# The table's ASCII members alone: a class of hundreds of ranges costs a regex a scan of them per character,
# ten times this one's cost on the ASCII text most queries are.
_ASCII_TERM = re.compile("[" + "".join(re.escape(chr(c)) for c in range(128) if _TERM.fullmatch(chr(c))) + "]+")


def normalize(text: str) -> str:
    """The normalised form of a query, group or ACL entry.

    `str.split()` splits at what `str.isspace` says and drops the ends: one pass, not a regex's.
    """
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def terms(normalized: str) -> list[str]:
    """The terms of an already normalised text."""
    return (_ASCII_TERM if normalized.isascii() else _TERM).findall(normalized)
