"""Keyed hashes: the only form in which query text, terms and groups leave the app.

Every token is HMAC-SHA256 under the deployment's key, over a domain name, a
zero byte and the UTF-8 of the normalised value; the first 16 bytes of the MAC,
base64url without padding (22 characters), are the token. Domains keep a
query from hashing like the term it consists of. Groups and ACL entries share
one domain, since the agent intersects them. A fingerprint is the first 8
bytes of the MAC of the chunk's normalised text, in hex: keyed, so that a
short, guessable passage cannot be recovered by hashing candidates.

HMAC-SHA256 is in the standard library of Java, Go, .NET and Node.js, so any
producer can match `producer/hashing-vectors.json` byte for byte.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import os
from pathlib import Path
from typing import NoReturn

from ragdrift_producer.normalize import normalize, terms

QUERY = b"ragdrift.query"
TERM = b"ragdrift.term"
GROUP = b"ragdrift.group"
FINGERPRINT = b"ragdrift.fingerprint"
ID = b"ragdrift.id"

MIN_KEY_BYTES = 32
MIN_DISTINCT_BYTES = 8
DEFAULT_ENV = "RAGDRIFT_HASH_KEY"
# Group tokens kept per Hasher (names up to 256 characters): every retrieval hashes the user's groups and each
# result's ACL again, from a small set of names.
GROUP_CACHE = 4096
_URLSAFE = bytes.maketrans(b"+/", b"-_")


class HashKeyError(ValueError):
    """The hashing key is missing or weak. The message never holds the key."""


class HashKey:
    """The deployment's hashing key: at least 32 bytes with 8 distinct values.

    Built from bytes, an environment variable or a file; its repr and str never
    show it. Generate one with `openssl rand -hex 32`.
    """

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes) -> None:
        if not isinstance(secret, bytes | bytearray):
            raise HashKeyError("the hashing key must be bytes")
        if len(secret) < MIN_KEY_BYTES or len(set(secret)) < MIN_DISTINCT_BYTES:
            raise HashKeyError(f"the hashing key is weak: it needs at least {MIN_KEY_BYTES} bytes with "
                            f"{MIN_DISTINCT_BYTES} different values (openssl rand -hex 32 makes one)")
        self._secret = bytes(secret)

    @classmethod
    def from_env(cls, name: str = DEFAULT_ENV) -> HashKey:
        value = os.environ.get(name)
        if not value:
            raise HashKeyError(f"no hashing key: the environment variable {name} is unset or empty")
        try:
            return cls(value.strip().encode())
        except HashKeyError as exc:
            raise HashKeyError(f"{name}: {exc}") from None

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> HashKey:
        try:
            secret = Path(path).read_bytes().strip()
        except OSError as exc:
            raise HashKeyError(f"the hashing key file {os.fspath(path)!r} cannot be read: {exc.strerror}") from None
        try:
            return cls(secret)
        except HashKeyError as exc:
            raise HashKeyError(f"{os.fspath(path)!r}: {exc}") from None

    def __repr__(self) -> str:
        return "HashKey(<hidden>)"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:  # never pickled into a log, a queue or a crash report
        raise TypeError("a HashKey is not picklable")


class Hasher:
    """Tokens for one deployment's key."""

    __slots__ = ("_groups", "_mac")

    def __init__(self, key: HashKey) -> None:
        self._mac = hmac.new(key._secret, digestmod=hashlib.sha256)
        self._groups: dict[str, str] = {}

    def __repr__(self) -> str:
        return "Hasher(<key hidden>)"

    def _digest(self, domain: bytes, value: str) -> bytes:
        mac = self._mac.copy()
        mac.update(domain + b"\x00" + value.encode("utf-8", "surrogatepass"))
        return mac.digest()

    def token(self, domain: bytes, normalized: str) -> str:
        return binascii.b2a_base64(self._digest(domain, normalized)[:16], newline=False)[:22].translate(
            _URLSAFE).decode("ascii")

    def query(self, text: str, most: int | None = None) -> tuple[str, list[str]]:
        """The query id and the term tokens of a query text (of its first `most` terms only)."""
        normalized = normalize(text)
        return self.token(QUERY, normalized), [self.token(TERM, t) for t in terms(normalized)[:most]]

    def group(self, name: str) -> str:
        token = self._groups.get(name)
        if token is None:
            token = self.token(GROUP, normalize(name))
            if len(name) <= 256:
                if len(self._groups) >= GROUP_CACHE:
                    self._groups.clear()
                self._groups[name] = token
        return token

    def fingerprint(self, text: str) -> str:
        return self._digest(FINGERPRINT, normalize(text))[:8].hex()

    def identifier(self, value: str) -> str:
        """An id or label too long or unprintable for the contract, as a short stable token."""
        return "~" + self.token(ID, value)
