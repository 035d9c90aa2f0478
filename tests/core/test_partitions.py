"""The agent's partition rules (agent/core/partitions.py) and the process
counters' monotonicity, without a broker."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent import synth
from agent.core.config import CoreConfig
from agent.core.partitions import LOG_SHORTFALL_SECONDS, NO_OFFSET, Owned, lag, paused, recreated
from agent.core.state import PartitionState
from agent.core.tally import add, total

CONFIG = CoreConfig()


def _restored(offset: int = 100, topic_id: str | None = "id-1") -> Owned:
    return Owned.restored(PartitionState(CONFIG), offset, topic_id)


def test_a_new_topic_id_means_recreated_whatever_the_log_length():
    for high in (None, 5, 100, 10**6):
        assert recreated(_restored(), "id-2", high, now=0.0)
    assert not recreated(_restored(), "id-1", 10**6, now=0.0)
    assert not recreated(_restored(), None, None, now=0.0)  # the broker reports no id yet


def test_an_unknown_topic_id_is_adopted():
    owned = _restored(topic_id=None)
    assert not recreated(owned, "id-7", None, now=0.0)
    assert owned.topic_id == "id-7"
    assert recreated(owned, "id-8", None, now=1.0)


def test_a_short_log_counts_only_once_it_lasts():
    owned = _restored(topic_id=None)
    assert not recreated(owned, None, 40, now=100.0)
    assert not recreated(owned, None, 40, now=100.0 + LOG_SHORTFALL_SECONDS - 0.1)
    assert recreated(owned, None, 40, now=100.0 + LOG_SHORTFALL_SECONDS)


def test_a_log_reaching_the_checkpoint_is_verified_for_good():
    owned = _restored(topic_id=None)
    assert not recreated(owned, None, 100, now=0.0)
    assert owned.verified
    assert not recreated(owned, None, 3, now=LOG_SHORTFALL_SECONDS * 10)  # no longer compared


def test_dirty_and_saved():
    owned = Owned.fresh(PartitionState(CONFIG))
    assert not owned.dirty  # start unknown: nothing to save
    owned.next_offset = 0
    assert owned.dirty
    owned.saved()
    assert not owned.dirty and owned.checkpointed_offset == 0
    owned.next_offset = 7
    assert owned.dirty


def test_lag_takes_the_latest_log_end():
    owned = _restored(offset=100)
    assert lag(owned, 130, None) == 30
    assert lag(owned, 120, 250) == 150  # paused: the fetcher's watermark is stale, the probe is not
    assert lag(owned, None, None) is None
    assert lag(owned, 90, None) == 0
    assert lag(Owned.fresh(PartitionState(CONFIG)), 500, 500) is None


def test_pause_after_three_failed_checkpoints():
    assert [paused(n) for n in range(5)] == [False, False, False, True, True]
    assert NO_OFFSET < 0


_LINES = list(synth.generate(120, seed=13, incidents=[synth.parse_incident("score-drift@0")]))
_MAY_FALL = {"top1_score_sum", "admitted_score_sum", "score_gap_sum"}  # scores may be negative


@settings(max_examples=15)
@given(st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=len(_LINES), max_size=len(_LINES)))
def test_process_counters_never_go_down(plan):
    """Events spread over partitions, each partition's additions taken into one
    process-wide tally at arbitrary ends of rounds: no counter key (integer or
    float sum of non-negative values) ever decreases, and in the end the
    counters equal the states' totals."""
    parts = [PartitionState(CONFIG) for _ in range(3)]
    counters: dict = {}
    last: dict = {}
    for line, (part, round_ends) in zip(_LINES, plan):
        parts[part].process(line)
        if round_ends:
            add(counters, parts[part].take_added())
            for key, value in counters.items():
                if key[0] not in _MAY_FALL:
                    assert value >= last.get(key, 0), key
            last = dict(counters)
    for part in parts:
        add(counters, part.take_added())
    merged = total(part.totals() for part in parts)
    assert set(merged) == set(counters)
    for key, value in counters.items():
        assert abs(value - merged[key]) <= 1e-9 * max(1.0, abs(value)), key
