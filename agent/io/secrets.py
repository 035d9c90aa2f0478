"""What must never be printed: secrets read strictly, URLs shown without their credentials.

A secret (the Label Studio token, a password file) is one line: a second
line, a control character or an empty file is an error that names the
source and never the content, because the content is what must not leak.
A URL is shown only through `redact_url`; `scrub` is the last line of
defence for free text (log lines, the command's last-resort error), masking
what looks like a credential in any URL or Authorization value it holds.
"""

from __future__ import annotations

import re

MASK = "***"
SECRET_WORDS = ("password", "passwd", "pwd", "secret", "token", "key", "salt", "auth", "credential", "signature")

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_AUTH = re.compile(r"\b(Token|Bearer|Basic) +[^\s'\"]+")
_ASSIGNED = re.compile(r"([\w.-]+)=(['\"]?)[^\s&;'\",)]+?(?=[\s&;'\",)]|: |:?$)")


class SecretError(ValueError):
    """A secret that is not one line; the message names its source, never its content."""


def secret_name(name: str) -> bool:
    """Whether a key or parameter named `name` holds a secret."""
    name = name.lower()
    return any(word in name for word in SECRET_WORDS)


def one_line(value: str | bytes, source: str) -> str:
    """`value` without surrounding whitespace; `SecretError` unless it is one line of printable text."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise SecretError(f"{source} is not UTF-8 text") from None
    value = value.strip()
    if not value:
        raise SecretError(f"{source} is empty")
    if not value.isprintable():
        raise SecretError(f"{source} must hold the secret alone on one line (it has more lines or control characters)")
    return value


def redact_url(url: str) -> str:
    """`url` with its password (or a user-only credential) and secret query values masked.

    Tolerant of what strict parsers refuse: the userinfo ends at the last "@"
    before the query, so a raw "@" or "/" in a password stays hidden too.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:  # no scheme: "user:password@host" is still a userinfo
        scheme, rest = "", url
    before_query, q, query = rest.partition("?")
    userinfo, at, host = before_query.rpartition("@")
    if at:
        user, colon, _ = userinfo.partition(":")
        userinfo = f"{user}:{MASK}" if colon and "/" not in user else MASK
        before_query = f"{userinfo}@{host}"
    return f"{scheme}{sep}{before_query}{q}{_mask_assignments(query)}"


def scrub(text: str) -> str:
    """Free text with every URL redacted and every Authorization value masked."""
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    text = _AUTH.sub(lambda m: f"{m.group(1)} {MASK}", text)
    return _mask_assignments(text)


def _mask_assignments(text: str) -> str:
    """`name=value` pairs (query parameters, DSN options) whose name is a secret's, masked."""
    return _ASSIGNED.sub(lambda m: f"{m.group(1)}={m.group(2)}{MASK}" if secret_name(m.group(1)) else m.group(0), text)
