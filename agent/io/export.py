"""A batch on disk, confined to the export directory.

Each batch gets its own directory, named by its id, created once: a batch
that is already there is never overwritten. Every file is created
exclusively, relative to that directory's descriptor and without following
symlinks, so nothing is written outside the export directory whatever its
contents. The private key and the regression list (its chunks in rank
order) are readable by their owner only.

    <export dir>/<batch id>/manifest.json     what, how many, tau per stratum, configuration
    <export dir>/<batch id>/items.jsonl       blinded items for judges (with text when resolved)
    <export dir>/<batch id>/items.csv         the same, one row per (item, chunk)
    <export dir>/<batch id>/key.jsonl         private: items back to events, ranks, scores, weights
    <export dir>/<batch id>/regression.jsonl  private: queries a regression set may use (no holdout query)
    <export dir>/<batch id>/label-studio/     tasks.json and config.xml (with --format label-studio)
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from contextlib import contextmanager
from pathlib import Path

from agent.core.batch import Batch
from agent.io.resolver import Texts

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")


class ExportError(RuntimeError):
    """The batch cannot be written where it was asked to go."""


def blinded_items(batch: Batch, texts: Texts) -> list[dict]:
    """The judges' items with the resolved text filled in (the batch itself holds none)."""
    return [
        {**item,
         "query": {**item["query"], "text": texts.queries.get(item["query"]["id"])},
         "chunks": [{**chunk, "text": texts.chunks.get(chunk["chunk_id"])} for chunk in item["chunks"]]}
        for item in batch.items
    ]


def write(export_dir: str | os.PathLike, batch: Batch, items: list[dict],
          extra: dict[str, str] | None = None) -> Path:
    """Write the batch's files; `extra` maps more relative names (one level of
    subdirectory at most) to their text. Returns the batch's directory."""
    root = Path(export_dir)
    root.mkdir(parents=True, exist_ok=True)
    files = {
        "manifest.json": json.dumps(batch.manifest, indent=2, sort_keys=True) + "\n",
        "items.jsonl": _jsonl(items),
        "items.csv": _csv(items),
        **(extra or {}),
    }
    with _directory(root, batch.batch_id) as fd:
        for name, text in files.items():
            _write(fd, name, text, 0o644)
        _write(fd, "key.jsonl", _jsonl(batch.key), 0o600)
        _write(fd, "regression.jsonl", _jsonl(batch.regression), 0o600)
    return root / batch.batch_id


def read_key(directory: str | os.PathLike) -> list[dict]:
    """A written batch's key.jsonl rows."""
    path = Path(directory) / "key.jsonl"
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise ExportError(f"cannot read the batch's key {path}: {exc}") from None


def read_batch(directory: str | os.PathLike) -> tuple[dict, list[dict]]:
    """A written batch's manifest and key rows."""
    path = Path(directory) / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExportError(f"cannot read the batch's manifest {path}: {exc}") from None
    return manifest, read_key(directory)


@contextmanager
def _directory(root: Path, name: str):
    _check(name)
    parent = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            os.mkdir(name, 0o755, dir_fd=parent)
        except FileExistsError:
            raise ExportError(f"{root / name} exists: a batch is never overwritten") from None
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
        try:
            yield fd
        finally:
            os.close(fd)
    finally:
        os.close(parent)


def _write(fd: int, name: str, text: str, mode: int) -> None:
    parts = name.split("/")
    if len(parts) > 2:
        raise ExportError(f"{name}: at most one level of subdirectory")
    for part in parts:
        _check(part)
    if len(parts) == 2:
        try:
            os.mkdir(parts[0], 0o755, dir_fd=fd)
        except FileExistsError:
            pass
        sub = os.open(parts[0], os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        try:
            _write(sub, parts[1], text, mode)
        finally:
            os.close(sub)
        return
    out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=fd)
    with os.fdopen(out, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)


def _check(name: str) -> None:
    """A plain file name: no separator, no `..`, nothing absolute or hidden."""
    if not _NAME.match(name) or name in (".", ".."):
        raise ExportError(f"{name!r} is not a plain file name")


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows)


def _csv(items: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["item", "judges", "query_id", "query_text", "chunk", "chunk_id", "chunk_text"])
    for item in items:
        for chunk in item["chunks"]:
            writer.writerow([item["item"], item["judges"], _cell(item["query"]["id"]), _cell(item["query"]["text"]),
                             chunk["chunk"], _cell(chunk["chunk_id"]), _cell(chunk["text"])])
    return out.getvalue()


def _cell(text: str | None) -> str:
    """Text or an id as a spreadsheet shows it, never as a formula (OWASP's
    CSV injection advice: a leading = + - @ tab or CR gets a quote)."""
    if not text:
        return ""
    return "'" + text if text[0] in "=+-@\t\r" else text
