"""A batch on disk, confined to the export directory.

Each batch gets its own directory, named by its id, created once: a batch
that is already there is never overwritten. The files are written into a
temporary directory beside it (`.<batch id>.<random>.building`) and renamed
into place while the store records the batch, so a failure at any step
leaves no batch directory behind and a retry starts afresh; a temporary
directory left by a killed build is removed by the next build of that batch.
Every file is created exclusively, relative to its directory's descriptor
and without following symlinks, so nothing is written outside the export
directory whatever its contents. The private key and the regression list (its
chunks in rank order) are readable by their owner only.

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
import secrets
import shutil
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from agent.core.batch import Batch
from agent.core.judgments.untrusted import loads
from agent.io.http.resolver import Texts

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
          extra: dict[str, str] | None = None, recording: AbstractContextManager | None = None) -> Path:
    """Write the batch's files; `extra` maps more relative names (one level of
    subdirectory at most) to their text. The directory is renamed into place
    inside `recording` (the store's transaction): when that fails, nothing
    stays. Returns the batch's directory."""
    root = Path(export_dir)
    files = {
        "manifest.json": json.dumps(batch.manifest, indent=2, sort_keys=True) + "\n",
        "items.jsonl": _jsonl(items),
        "items.csv": _csv(items),
        **(extra or {}),
    }
    public = {name: _encoded(name, text) for name, text in files.items()}
    private = {name: _encoded(name, _jsonl(rows)) for name, rows in (("key.jsonl", batch.key),
                                                                      ("regression.jsonl", batch.regression))}
    name = batch.batch_id
    _check(name)
    try:
        root.mkdir(parents=True, exist_ok=True)
        parent = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except FileExistsError:
        what = "a symlink that leads nowhere" if root.is_symlink() else "not a directory"
        raise ExportError(f"{root}: cannot use it as the export directory: {what}") from None
    except OSError as exc:
        raise ExportError(f"{root}: cannot use it as the export directory: {exc.strerror}") from None
    try:
        _vacant(root, parent, name)
        building = _staged(root, parent, name, public, private)
        placed = False
        try:
            with recording or nullcontext():
                _rename(root, parent, building, name)
                placed = True
        except BaseException:
            if placed:  # the store did not record it: no batch
                shutil.rmtree(name, dir_fd=parent, ignore_errors=True)
            raise
        finally:
            shutil.rmtree(building, dir_fd=parent, ignore_errors=True)
    finally:
        os.close(parent)
    return root / name


def read_key(directory: str | os.PathLike) -> list[dict]:
    """A written batch's key.jsonl rows."""
    return _read_jsonl(Path(directory) / "key.jsonl", "key")


def read_items(directory: str | os.PathLike) -> list[dict]:
    """A written batch's items.jsonl rows, as judges got them."""
    return _read_jsonl(Path(directory) / "items.jsonl", "items")


def read_batch(directory: str | os.PathLike) -> tuple[dict, list[dict]]:
    """A written batch's manifest and key rows."""
    path = Path(directory) / "manifest.json"
    try:
        manifest = loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExportError(f"cannot read the batch's manifest {path}: {exc}") from None
    return manifest, read_key(directory)


def read_label_studio(directory: str | os.PathLike) -> tuple[str, list[dict]] | None:
    """A written batch's Label Studio configuration and tasks; None when it was written without them."""
    base = Path(directory) / "label-studio"
    tasks = base / "tasks.json"
    if not tasks.exists():
        return None
    try:
        return (base / "config.xml").read_text(encoding="utf-8"), loads(tasks.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ExportError(f"cannot read the batch's Label Studio files in {base}: {exc}") from None
    except ValueError as exc:
        raise ExportError(f"cannot read the batch's Label Studio tasks {tasks}: {exc}") from None


def _read_jsonl(path: Path, what: str) -> list[dict]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError) as exc:
        raise ExportError(f"cannot read the batch's {what} {path}: {exc}") from None
    rows = []
    for n, line in enumerate(lines, 1):
        if line.strip():
            try:
                rows.append(loads(line))
            except ValueError as exc:
                raise ExportError(f"cannot read the batch's {what} {path}: line {n}: {exc}") from None
    return rows


def _staged(root: Path, parent: int, name: str, public: dict[str, bytes], private: dict[str, bytes]) -> str:
    """The batch's files in a fresh temporary directory beside where it goes; its name."""
    prefix = f".{name}."
    for leftover in os.listdir(parent):  # of a build that was killed half way
        if leftover.startswith(prefix) and leftover.endswith(".building"):
            shutil.rmtree(leftover, dir_fd=parent, ignore_errors=True)
    building = f"{prefix}{secrets.token_hex(4)}.building"
    try:
        os.mkdir(building, 0o700, dir_fd=parent)
        fd = os.open(building, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    except OSError as exc:
        raise ExportError(f"{root}: cannot write a batch there: {exc.strerror}") from None
    try:
        for file, data in public.items():
            _write(root, fd, file, data, 0o644)
        for file, data in private.items():
            _write(root, fd, file, data, 0o600)
        os.chmod(fd, 0o755)
    except BaseException:
        shutil.rmtree(building, dir_fd=parent, ignore_errors=True)
        raise
    finally:
        os.close(fd)
    return building


def _vacant(root: Path, parent: int, name: str) -> None:
    """Refuse a name already taken, by anything (a directory, a file, a symlink)."""
    try:
        os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    raise ExportError(f"{root / name} exists: a batch is never overwritten (move it away to build it again)")


def _rename(root: Path, parent: int, building: str, name: str) -> None:
    """Put the directory in place; an entry that appeared there meanwhile is
    kept (rename would replace an empty directory: refused first)."""
    _vacant(root, parent, name)
    try:
        os.rename(building, name, src_dir_fd=parent, dst_dir_fd=parent)
    except OSError as exc:
        raise ExportError(f"{root / name}: cannot put the batch in place: {exc.strerror}") from None


def _encoded(name: str, text: str) -> bytes:
    """UTF-8, or an error naming the file and position (never the text):
    a resolver can hand back a lone surrogate, which no file can hold."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ExportError(f"{name}: the resolved text holds a character that is not valid Unicode "
                          f"(a lone surrogate) at offset {exc.start}: fix the resolver's answer") from None


def _write(root: Path, fd: int, name: str, data: bytes, mode: int) -> None:
    parts = name.split("/")
    if len(parts) > 2:
        raise ExportError(f"{name}: at most one level of subdirectory")
    for part in parts:
        _check(part)
    try:
        if len(parts) == 2:
            try:
                os.mkdir(parts[0], 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            sub = os.open(parts[0], os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            try:
                _write(root, sub, parts[1], data, mode)
            finally:
                os.close(sub)
            return
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=fd)
        with os.fdopen(out, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise ExportError(f"{root}: cannot write the batch's {name}: {exc.strerror}") from None


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
