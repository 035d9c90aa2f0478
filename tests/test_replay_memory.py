"""`ragdrift replay` holds a bounded number of window buckets, however long the input."""

from collections import Counter

from agent import synth
from agent.cli.replay import run
from agent.core.config import CoreConfig
from agent.core.partitions import Outbox
from agent.core.state import PartitionState


def _held(events: int) -> int:
    """Tallies the windows hold after replaying `events` events, one per 50 s of event time."""
    state = PartitionState(CoreConfig(max_label_values=1 << 30))
    run(state, synth.generate(events, 7, None, 0.02, [], 0.0), 1 << 20, Counter(), Outbox())
    windows = state.windows
    return len(windows.buckets) + len(windows._before) + len(windows._blocks)


def test_replay_holds_as_many_buckets_for_ten_times_the_events():
    # 2,500 events span ~35 h of event time, more than the longest window plus lateness.
    short, long = _held(2500), _held(25000)
    assert long <= short + 2
