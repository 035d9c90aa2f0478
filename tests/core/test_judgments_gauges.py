"""The judged batch's report as gauge rows: hand-computed cases and properties."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent.core.judgments.gauges import GAUGED, app_of, gauges
from agent.core.judgments.report import ALL


def test_an_app_is_the_part_of_the_stratum_before_the_bar():
    assert app_of("support-bot|lexical") == "support-bot"
    assert app_of("uniform") == ALL == app_of("all") == app_of("other")


def test_every_estimated_metric_becomes_a_row():
    found = gauges({"batch_id": "b", "week": "2026-W48", "views": [
        {"view": "traffic", "stratum": "all", "items": 3, "metrics": {
            "precision": {"estimate": 0.5, "low": 0.25, "high": 0.75, "n": 3}, "recall": None, "groupRecall": None}},
        {"view": "challenge", "stratum": "app|lexical", "items": 0, "metrics": {"precision": None}},
    ]})
    assert (found.batch_id, found.week) == ("b", "2026-W48")
    assert found.items == {("all", "traffic", "all"): 3, ("app", "challenge", "app|lexical"): 0}
    assert [(f.app, f.view, f.stratum, f.metric, f.estimate, f.low, f.high) for f in found.figures] == [
        ("all", "traffic", "all", "precision", 0.5, 0.25, 0.75)]


interval = st.floats(0, 1).map(lambda x: {"estimate": x, "low": x / 2, "high": (1 + x) / 2, "n": 1})
views = st.lists(st.fixed_dictionaries({
    "view": st.sampled_from(["traffic", "challenge"]),
    "stratum": st.sampled_from(["all", "uniform", "other", "a|lexical", "a|semantic", "b|lexical"]),
    "items": st.integers(0, 50),
    "metrics": st.fixed_dictionaries({m: st.none() | interval for m in (*GAUGED, "groupRecall")}),
}), max_size=12, unique_by=lambda v: (v["view"], v["stratum"]))


@given(views)
def test_a_row_per_view_and_estimated_gauged_metric_each_labelled_by_its_view(vs):
    found = gauges({"batch_id": "b", "week": "w", "views": vs})
    assert len(found.items) == len(vs)
    assert len(found.figures) == sum(v["metrics"][m] is not None for v in vs for m in GAUGED)
    for f in found.figures:
        assert (f.app, f.view, f.stratum) in found.items and f.app == app_of(f.stratum)
        assert f.metric in GAUGED and f.low <= f.estimate <= f.high
