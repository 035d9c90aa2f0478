"""Text for judges, from the team's own stores, by id.

Events carry hashed query ids and chunk ids, never text. A batch asks a
resolver for the text of its queries and chunks; what comes back goes only
into the batch's export directory (agent/io/export.py), never into Kafka,
the store, metrics or logs. Three kinds, chosen by `judgment.resolver.kind`:

- `file`: JSON Lines of `{"kind": "query" | "chunk", "id": ..., "text": ...}`;
- `command`: a program given `{"queries": [ids], "chunks": [ids]}` as JSON on
  stdin that prints `{"queries": {id: text}, "chunks": {id: text}}`;
- `http`: the same request POSTed as JSON to a URL, the same answer back.

An id the resolver does not know stays without text, and the item keeps its id.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


class ResolverError(RuntimeError):
    """The resolver failed; the message names the resolver, never any text."""


@dataclass(frozen=True)
class Texts:
    queries: dict[str, str] = field(default_factory=dict)
    chunks: dict[str, str] = field(default_factory=dict)


def resolve(kind: str, queries: list[str], chunks: list[str], *, path: str | None = None,
            command: list[str] | None = None, url: str | None = None, timeout: float = 30.0) -> Texts:
    """Ask the configured resolver for the texts of these ids."""
    if kind == "none":
        return Texts()
    if kind == "file":
        return _from_file(Path(path), set(queries), set(chunks))
    request = json.dumps({"queries": sorted(set(queries)), "chunks": sorted(set(chunks))}).encode()
    if kind == "command":
        try:
            done = subprocess.run(command, input=request, capture_output=True, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ResolverError(f"resolver command {command[0]!r} failed: {exc.__class__.__name__}") from None
        if done.returncode != 0:
            raise ResolverError(f"resolver command {command[0]!r} exited with {done.returncode}")
        return _answer(done.stdout, f"resolver command {command[0]!r}")
    if kind == "http":
        post = urllib.request.Request(url, data=request, headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(post, timeout=timeout) as response:
                return _answer(response.read(), f"resolver {url}")
        except OSError as exc:
            raise ResolverError(f"resolver {url} failed: {exc}") from None
    raise ResolverError(f"unknown resolver kind {kind!r}")


def _from_file(path: Path, queries: set[str], chunks: set[str]) -> Texts:
    texts = Texts()
    try:
        with path.open(encoding="utf-8") as lines:
            for n, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    kind, id_, text = entry["kind"], entry["id"], entry["text"]
                except (ValueError, KeyError, TypeError):
                    raise ResolverError(f"resolver file {path}: line {n} is not a resolver entry") from None
                if kind == "query" and id_ in queries:
                    texts.queries[id_] = str(text)
                elif kind == "chunk" and id_ in chunks:
                    texts.chunks[id_] = str(text)
    except OSError as exc:
        raise ResolverError(f"resolver file {path}: {exc.strerror}") from None
    return texts


def _answer(body: bytes, who: str) -> Texts:
    try:
        doc = json.loads(body)
        return Texts({str(k): str(v) for k, v in doc.get("queries", {}).items()},
                     {str(k): str(v) for k, v in doc.get("chunks", {}).items()})
    except (ValueError, AttributeError):
        raise ResolverError(f"{who} did not answer with the resolver's JSON") from None
