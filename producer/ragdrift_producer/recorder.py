"""Texts kept where the team keeps its own data, for the weekly judgment batch.

Events carry hashes; judges need the query and the chunks as text. A recorder
is told each (query id, text) and (chunk id, text) as the app retrieves, and
keeps them on the app's side. `JsonLinesRecorder` writes the format the
agent's `file` resolver reads (`judgment.resolver: {kind: file, path: ...}`),
so no other code is needed to close the loop; any object with the two methods
of `Recorder` (a database table, a callback) does as well.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from typing import Protocol


class Recorder(Protocol):
    def query(self, query_id: str, text: str) -> None: ...

    def chunk(self, chunk_id: str, text: str) -> None: ...


class JsonLinesRecorder:
    """Appends `{"kind", "id", "text"}` lines, each id once per `remember` recent ids.

    Whole lines are written and flushed one by one, so a crash loses at most
    the line being written. The file is the team's: it holds raw text, so it
    belongs where the app's own data is kept, with the same access rules.
    """

    def __init__(self, path: str | os.PathLike[str], *, remember: int = 100_000) -> None:
        self.path = os.fspath(path)
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open until close()
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._remember = remember

    def query(self, query_id: str, text: str) -> None:
        self._write("query", query_id, text)

    def chunk(self, chunk_id: str, text: str) -> None:
        self._write("chunk", chunk_id, text)

    def _write(self, kind: str, id_: str, text: str) -> None:
        key = (kind, id_)
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
                return
            self._seen[key] = None
            if len(self._seen) > self._remember:
                self._seen.popitem(last=False)
            text = text.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate cannot be written
            self._file.write(json.dumps({"kind": kind, "id": id_, "text": text}, ensure_ascii=False) + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __repr__(self) -> str:
        return f"JsonLinesRecorder({self.path!r})"
