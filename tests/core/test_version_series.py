"""Pipeline versions coming and going over event time, through the partitions (agent/core/metrics.py)
and the series a scrape shows (agent/core/snapshot.py): every count stays exact and each app names at
most `max_pipeline_versions` versions besides `none` and `other`, whatever the sequence of versions."""

import dataclasses
from collections import defaultdict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.core.config import CoreConfig
from agent.core.families import FAMILIES
from agent.core.pipelines import conform
from agent.core.snapshot import Exposition
from agent.core.state import PartitionState, recent
from agent.core.tally import Histogram, Tally, add, total
from tests.core.test_pipelines import T0, doc

CONFIG = CoreConfig(windows=(("5m", 300), ("1h", 3600)), lateness_seconds=120, by_pipeline_version=True,
                    max_pipeline_versions=2, pipeline_version_idle_seconds=300)
PLAIN = dataclasses.replace(CONFIG, by_pipeline_version=False)
SPLIT_KEYS = {name for family in FAMILIES if CONFIG.labels_of(family)[1:2] == ("pipeline_version",)
              for name in ((family.bucket_key, family.count_key, family.sum_key) if isinstance(family, Histogram)
                           else (family.name,))}

steps = st.lists(st.tuples(
    st.integers(0, 600),  # event time since the previous event, seconds
    st.sampled_from(["alpha", "beta"]),
    st.sampled_from([*(f"v{k}" for k in range(8)), None]),
    st.integers(0, 1),  # the partition
    st.integers(0, 200),  # how late it comes
    st.booleans(),  # a scrape after it
), max_size=80)


def named(tally: Tally) -> dict[str, set[str]]:
    """Per app, the pipeline versions a tally names."""
    out: dict[str, set[str]] = defaultdict(set)
    for key in tally:
        if key[0] in SPLIT_KEYS:
            out[key[1]].add(key[2])
    return out


@given(steps)
def test_every_count_stays_exact_and_each_app_names_at_most_the_bound(steps):
    split, plain = [PartitionState(CONFIG) for _ in range(2)], [PartitionState(PLAIN) for _ in range(2)]
    exposition = Exposition(CONFIG, top_n=50)
    counters: Tally = {}  # the process's, as the agent sums them
    unsplit: Tally = {}  # the same events without the split
    ended: Tally = {}  # every series that ended, at the value it last showed
    shown: Tally = {}
    t = T0
    for i, (dt, app, version, part, late, scrape) in enumerate(steps):
        t += dt
        raw = doc(i, version, app=app, t=t - late)
        split[part].process(raw)
        plain[part].process(raw)
        add(counters, split[part].take_added())
        add(unsplit, plain[part].take_added())
        if not scrape:
            continue
        windows = {name: total(s.windows.window(seconds, t) for s in split) for name, seconds in CONFIG.windows}
        snap = exposition.snapshot(counters, windows, t, live=recent(CONFIG, split))
        for tally in (snap.counters, *snap.windows.values()):
            assert all(len(versions - {"none", "other"}) <= CONFIG.max_pipeline_versions
                       for versions in named(tally).values())
        for key, value in shown.items():
            if key in snap.counters:
                assert snap.counters[key] >= value, key  # a counter series never goes down
            else:
                assert key[2] != "other", key  # nor does `other` ever end
                ended[key] = ended.get(key, 0) + value
        shown = snap.counters
        # Each event is in exactly one series: the sum over versions of every counter is the unsplit count.
        assert conform(total([shown, ended]), False) == pytest.approx(unsplit)
        assert snap.processed == unsplit.get(("retrievals", "alpha"), 0) + unsplit.get(("retrievals", "beta"), 0)
    assert conform(total(s.totals() for s in split), False) == pytest.approx(total(p.totals() for p in plain))
    for state in split:  # each partition names at most the bound per app at any time
        assert all(len(v.known) <= CONFIG.max_pipeline_versions for v in state.feature("windows").versions.values())
