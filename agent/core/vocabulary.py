"""A bounded query-term vocabulary: a Bloom filter over hashed terms.

Memory is fixed by configuration (`bits`). The price is a small false-"seen"
rate, so the new-term rate reads slightly low: about 0.65 % of new terms are
missed once the filter holds 100k distinct terms at 2^20 bits and 7 hashes,
and the error grows as (1 - e^(-kn/m))^k beyond that.
"""

from __future__ import annotations

import base64
import zlib
from hashlib import blake2b
from typing import Any

KNOWN_TERMS = 1 << 14  # bound of the memo of terms known to be in the filter
# An empty 8-byte blake2b, never updated itself: copying a made hasher is
# cheaper than making one, and this hashes a term or an event id per event.
EMPTY_DIGEST = blake2b(digest_size=8)


class Vocabulary:
    __slots__ = ("bits", "hashes", "_array", "frozen", "_known", "_encoded")

    def __init__(self, bits: int = 1 << 20, hashes: int = 7, *, array: bytes | None = None, frozen: bool = False):
        if bits < 8 or bits % 8:
            raise ValueError("vocabulary bits must be a positive multiple of 8")
        self.bits = bits
        self.hashes = hashes
        self._array = bytearray(array) if array is not None else bytearray(bits // 8)
        self.frozen = frozen
        # Query terms follow a Zipf law: most occurrences repeat a term the
        # filter already holds. Remembering those skips hashing; a Bloom filter
        # never forgets, so the memo cannot change an answer.
        self._known: set[str] = set()
        # The array as checkpointed, until a bit changes: a filter that has
        # seen most terms is written again and again unchanged.
        self._encoded: str | None = None

    def _positions(self, term: str) -> list[int]:
        """Double hashing over one 64-bit digest (stable across processes):
        position i is (h1 + i * h2) % bits. Both halves are reduced modulo
        `bits` first, which gives the same positions with small integers
        (arithmetic on the 32-bit halves cost more than the hash itself);
        h2 is odd and `bits` even, so the step is never 0."""
        digest = EMPTY_DIGEST.copy()
        digest.update(term.encode())
        x = int.from_bytes(digest.digest(), "little")
        bits = self.bits
        first, step = (x & 0xFFFFFFFF) % bits, ((x >> 32) | 1) % bits
        return [p % bits for p in range(first, first + self.hashes * step, step)]

    def __contains__(self, term: str) -> bool:
        if term in self._known:
            return True
        array = self._array
        found = all(array[p >> 3] >> (p & 7) & 1 for p in self._positions(term))
        if found:
            self._remember(term)
        return found

    def add(self, term: str) -> bool:
        """Record a term; return True when it was new. A frozen vocabulary only looks."""
        if term in self._known:
            return False
        array = self._array
        new = False
        for p in self._positions(term):
            byte, bit = p >> 3, 1 << (p & 7)
            if not array[byte] & bit:
                if self.frozen:
                    return True
                array[byte] |= bit
                new = True
        if new:
            self._encoded = None
        self._remember(term)
        return new

    def add_all(self, terms: list[str]) -> int:
        """Record terms; return how many were new (`add` for each, the memo checked first)."""
        known = self._known
        new = 0
        for term in terms:
            if term not in known and self.add(term):
                new += 1
        return new

    def _remember(self, term: str) -> None:
        if len(self._known) >= KNOWN_TERMS:
            self._known.clear()
        self._known.add(term)

    def to_dict(self) -> dict[str, Any]:
        if self._encoded is None:
            self._encoded = base64.b64encode(zlib.compress(bytes(self._array))).decode()
        return {"bits": self.bits, "hashes": self.hashes, "frozen": self.frozen, "array": self._encoded}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Vocabulary:
        return cls(data["bits"], data["hashes"], array=zlib.decompress(base64.b64decode(data["array"])), frozen=data["frozen"])
