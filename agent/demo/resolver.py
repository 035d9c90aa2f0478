"""The demo's resolver: made-up text for the synthetic corpus's ids.

A command resolver (agent/io/http/resolver.py): `python -m agent.demo.resolver`
reads `{"queries": [ids], "chunks": [ids]}` on stdin and prints the texts.
The synthetic traffic has no text behind its hashes, so this writes some,
the same for the same id, marked as synthetic, so that the judging loop can
be tried end to end on a laptop. A real deployment points the resolver at
its own query log and document store.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys

_SOURCES = {"HRP": "HR policies", "BEN": "Benefits guide", "PAY": "Payroll FAQ", "WIKI": "Intranet wiki",
            "KB": "Knowledge base", "TCK": "Resolved ticket", "DOC": "Product docs", "REL": "Release notes",
            "API": "API reference"}  # the synthetic corpus's sources (agent/synth/deployment.py)
_TOPICS = ("rotating API keys", "the VPN client on Linux", "parental leave", "the expense policy", "SSO login errors",
           "the 4.2 release", "rate limits", "travel booking", "password resets", "data retention")
_CHUNK = re.compile(r"(?P<kind>[A-Z]+)-(?P<doc>\d+)#v(?P<version>\d+)\.c(?P<part>\d+)\Z")


def _pick(text: str, options: tuple[str, ...]) -> str:
    return options[hashlib.blake2b(text.encode(), digest_size=4).digest()[0] % len(options)]


def query_text(query_id: str) -> str:
    return f"[synthetic] How do I handle {_pick(query_id, _TOPICS)}? (query {query_id[:8]})"


def chunk_text(chunk_id: str) -> str:
    match = _CHUNK.match(chunk_id)
    if match is None:
        return f"[synthetic] Passage {chunk_id} about {_pick(chunk_id, _TOPICS)}."
    source = _SOURCES.get(match["kind"], match["kind"].title())
    return (f"[synthetic] {source}, document {int(match['doc'])}, version {match['version']}, "
            f"part {match['part']}: notes on {_pick(chunk_id, _TOPICS)}.")


def main() -> int:
    ask = json.load(sys.stdin)
    json.dump({"queries": {q: query_text(q) for q in ask.get("queries", [])},
               "chunks": {c: chunk_text(c) for c in ask.get("chunks", [])}}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
