"""Versioned qrels, the pure part: new, changed and unchanged labels by hand,
and an import repeated adds nothing whatever the labels."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given
from hypothesis import strategies as st

from agent.core.judgments.labels import Label
from agent.core.judgments.qrels import revise
from tests.core.test_judgments_importing import label_strategy, unique_pairs
from tests.core.test_properties import FAST

B = "2026-W48-0f1e2d3c"
A = Label(batch_id=B, item=f"{B}-0001", chunk=f"{B}-0001-1", judge="ana", grade=2)
A_CHANGED = Label(batch_id=B, item=f"{B}-0001", chunk=f"{B}-0001-1", judge="ana", grade=2, tags=("stale",))
BO = Label(batch_id=B, item=f"{B}-0001", chunk=f"{B}-0001-1", judge="bo", grade=2)


def test_a_first_label_is_version_one_and_a_change_the_next():
    first = revise({}, [A, BO])
    assert first.versions == ((1, A), (1, BO)) and (first.new, first.changed, first.unchanged) == (2, 0, 0)
    held = {A.pair: (1, A), BO.pair: (1, BO)}
    again = revise(held, [BO, A_CHANGED])
    assert again.versions == ((2, A_CHANGED),) and (again.new, again.changed, again.unchanged) == (0, 1, 1)


def test_the_same_pair_twice_in_one_import_takes_the_later():
    r = revise({A.pair: (3, A)}, [A_CHANGED, A])
    assert r.versions == ((4, A_CHANGED), (5, A)) and r.changed == 2


@FAST
@given(st.lists(st.lists(label_strategy, max_size=10), max_size=4))
def test_versions_count_up_from_one_and_importing_again_adds_nothing(imports):
    held, written = {}, defaultdict(list)
    for labels in imports:
        revision = revise(held, labels)
        assert revision.new + revision.changed + revision.unchanged == len(labels)
        for version, label in revision.versions:
            written[label.pair].append(version)
            held[label.pair] = (version, label)
        latest = unique_pairs(labels)  # each pair's last label: what the import left
        again = revise(held, latest)
        assert again.versions == () and again.unchanged == len(latest)
    assert all(versions == list(range(1, len(versions) + 1)) for versions in written.values())
