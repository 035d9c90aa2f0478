"""Text for judges, from the team's own stores, by id.

Events carry hashed query ids and chunk ids, never text. A batch asks a
resolver for the text of its queries and chunks; what comes back goes only
into the batch's export directory (agent/io/files/batch_files.py), never into Kafka,
the store, metrics or logs. Three kinds, chosen by `judgment.resolver.kind`:

- `file`: JSON Lines of `{"kind": "query" | "chunk", "id": ..., "text": ...}`
  (a last line without its newline that does not parse is one being written,
  and is left for the next read);
- `command`: a program given `{"queries": [ids], "chunks": [ids]}` as JSON on
  stdin that prints `{"queries": {id: text}, "chunks": {id: text}}`;
- `http`: the same request POSTed as JSON to a URL, the same answer back.

An id the resolver does not know stays without text, and the item keeps its id.
`timeout` bounds the whole call, and so does the `deadline` of the command
the call is part of: a command's process group is killed when either passes
(its children too), and an http request is one bounded request of
agent/io/http/fetch.py (redirects only within the URL's origin, a user and
password in the URL sent as Basic credentials). Errors show the URL with its
credentials masked, and never what the resolver answered.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from agent.core.judgments.untrusted import loads
from agent.io.http.fetch import Deadline, FetchError, fetch
from agent.io.secrets import redact_url


class ResolverError(RuntimeError):
    """The resolver failed; the message names the resolver, never any text."""


@dataclass(frozen=True)
class Texts:
    queries: dict[str, str] = field(default_factory=dict)
    chunks: dict[str, str] = field(default_factory=dict)


def resolve(kind: str, queries: list[str], chunks: list[str], *, path: str | None = None,
            command: list[str] | None = None, url: str | None = None, timeout: float = 30.0,
            deadline: Deadline | None = None) -> Texts:
    """Ask the configured resolver for the texts of these ids, within `timeout` and `deadline`."""
    if kind == "none":
        return Texts()
    if kind == "file":
        assert path is not None, "the settings give a file resolver its path"
        return _from_file(Path(path), set(queries), set(chunks))
    request = json.dumps({"queries": sorted(set(queries)), "chunks": sorted(set(chunks))}).encode()
    if kind == "command":
        assert command is not None, "the settings give a command resolver its command"
        who = f"resolver command {command[0]!r}"
        try:
            limit = timeout if deadline is None else deadline.within(timeout)
        except FetchError as exc:
            raise ResolverError(f"{who}: {exc}") from None
        return _from_command(command, request, limit, who)
    if kind == "http":
        assert url is not None, "the settings give an http resolver its url"
        who = f"resolver {redact_url(url)}"
        try:
            body = fetch(url, method="POST", data=request, headers={"Content-Type": "application/json"},
                         timeout=timeout, deadline=deadline)
        except FetchError as exc:
            raise ResolverError(f"{who} failed: {exc}") from None
        return _answer(body, who)
    raise ResolverError(f"unknown resolver kind {kind!r}")


def _from_command(command: list[str], request: bytes, timeout: float, who: str) -> Texts:
    """Run the command in a process group of its own, killed whole when it times out or is done.

    Its answer ends when its stdout closes: a child it leaves running with
    stdout open holds the call until the timeout. Its stderr is discarded (it
    may quote text)."""
    try:
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
    except OSError as exc:
        raise ResolverError(f"{who} failed: {exc.__class__.__name__}") from None
    try:
        out, _ = child.communicate(request, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ResolverError(f"{who} failed: no answer within {timeout:g} s") from None
    finally:
        _kill_group(child)
    if child.returncode != 0:
        raise ResolverError(f"{who} exited with {child.returncode}")
    return _answer(out, who)


def _kill_group(child: subprocess.Popen) -> None:
    """Kill whatever the command left running (its group outlives it), then reap it."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group is gone already
    child.communicate()


def _from_file(path: Path, queries: set[str], chunks: set[str]) -> Texts:
    texts = Texts()
    try:
        with path.open(encoding="utf-8") as lines:
            for n, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    entry = loads(line)
                    kind, id_, text = entry["kind"], entry["id"], entry["text"]
                except (ValueError, KeyError, TypeError):
                    if not line.endswith("\n"):
                        break  # the last line, still being written (by the app's recorder): not an entry yet
                    raise ResolverError(f"resolver file {path}: line {n} is not a resolver entry") from None
                if kind == "query" and id_ in queries:
                    texts.queries[id_] = str(text)
                elif kind == "chunk" and id_ in chunks:
                    texts.chunks[id_] = str(text)
    except OSError as exc:
        raise ResolverError(f"resolver file {path}: {exc.strerror}") from None
    return texts


def _answer(body: bytes | bytearray, who: str) -> Texts:
    try:
        doc = loads(body.decode())
        return Texts({str(k): str(v) for k, v in doc.get("queries", {}).items()},
                     {str(k): str(v) for k, v in doc.get("chunks", {}).items()})
    except (ValueError, AttributeError):
        raise ResolverError(f"{who} did not answer with the resolver's JSON") from None
