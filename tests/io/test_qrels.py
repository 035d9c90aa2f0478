"""Versioned qrels in the store, on SQLite and on the real PostgreSQL: an
import is idempotent, a change is a new version, history is never lost."""

from __future__ import annotations

import pytest
from sqlalchemy import event, func, select

from agent.core.judgments.labels import Label
from agent.io.store.database import Store, StoreError
from agent.io.store.qrels import TABLES, Qrels, Version

B, OTHER = "2026-W48-0f1e2d3c", "2026-W49-aa11bb22"


def label(chunk: int, judge: str, grade: int, tags=(), group=None, batch=B) -> Label:
    return Label(batch_id=batch, item=f"{batch}-0001", chunk=f"{batch}-0001-{chunk}", judge=judge, grade=grade, tags=tuple(tags),
                 evidence_group=group)


@pytest.fixture
def qrels(url):
    with Store(url, None, TABLES) as store:
        yield Qrels(store)


def counts(revision) -> tuple[int, int, int]:
    return revision.new, revision.changed, revision.unchanged


def test_import_again_is_a_no_op_and_a_change_is_a_new_version(qrels, url):
    first = [label(1, "ana", 3, ["stale", "wrong_locale"], "A"), label(2, "ana", 0), label(1, "bo", 1),
             label(1, "ana", 2, batch=OTHER)]
    assert counts(qrels.add(first, "a.jsonl", now=100.0)) == (4, 0, 0)
    assert counts(qrels.add(first, "a.jsonl", now=200.0)) == (0, 0, 4)
    table = qrels.table
    assert qrels.store.read(select(func.count()).select_from(table))[0][0] == 4

    changed = label(1, "bo", 2, group="B")
    assert counts(qrels.add([first[0], changed], "b.csv", now=300.0)) == (0, 1, 1)
    assert sorted(qrels.latest(B), key=lambda x: x.pair) == qrels.latest(B)
    assert set(qrels.latest(B)) == {first[0], first[1], changed}
    assert qrels.latest(OTHER) == [first[3]] and qrels.latest("2020-W01-00000000") == []
    assert qrels.history(B, f"{B}-0001", f"{B}-0001-1", "bo") == [
        Version(1, 100.0, "a.jsonl", label=first[2]), Version(2, 300.0, "b.csv", label=changed)]

    # back to the first grade: a third version, the history keeps all three
    assert counts(qrels.add([first[2]], "c.jsonl", now=400.0)) == (0, 1, 0)
    assert [v.version for v in qrels.history(B, f"{B}-0001", f"{B}-0001-1", "bo")] == [1, 2, 3]
    assert first[2] in qrels.latest(B) and changed not in qrels.latest(B)

    # another process opening the same store reads the same
    with Store(url, None, TABLES) as again:
        assert Qrels(again).latest(B) == qrels.latest(B)
        assert counts(Qrels(again).add(first, "a.jsonl")) == (0, 0, 4)


def test_nothing_to_add(qrels):
    assert counts(qrels.add([], "empty.jsonl")) == (0, 0, 0)


def test_a_racing_import_fails_whole_and_never_overwrites(qrels, url):
    """Another import writes version 1 of a pair between this one's read and
    its write: the primary key refuses this one, and none of its labels land."""
    mine, theirs = [label(2, "ana", 1), label(1, "ana", 3)], label(1, "ana", 0)
    other, raced = Store(url, None, TABLES), []

    def race(conn, clauseelement, *args):
        if getattr(clauseelement, "is_insert", False) and not raced:
            raced.append(Qrels(other).add([theirs], "theirs.jsonl"))

    event.listen(qrels.store.engine, "before_execute", race)
    try:
        with pytest.raises(StoreError, match="run it again"):
            qrels.add(mine, "mine.jsonl")
    finally:
        event.remove(qrels.store.engine, "before_execute", race)
        other.close()
    assert qrels.latest(B) == [theirs]
    assert counts(qrels.add(mine, "mine.jsonl")) == (1, 1, 0)  # run again: a new version on top of theirs
    assert [v.label.grade for v in qrels.history(B, f"{B}-0001", f"{B}-0001-1", "ana")] == [0, 3]
