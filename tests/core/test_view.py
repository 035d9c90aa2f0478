"""The per-app key tables the metric families read (agent/core/view.py)."""

from agent.core.config import CoreConfig
from agent.core.labels import OTHER, LabelSet
from agent.core.scores import TOP1
from agent.core.sources import BY_SOURCE
from agent.core.view import Keys, Table
from agent.core.zero_results import RETRIEVALS

BY_THING = Table("source", lambda *labels: ("things", *labels))


def test_a_table_keeps_only_values_its_label_set_keeps():
    labels = {"source": LabelSet(2)}
    table = Keys(("app-a",), CoreConfig(), labels, shared={})[BY_THING]
    seen = [table[value] for value in ("a", "b", "c", "a", "d", "c")]
    assert seen == [("things", "app-a", v) for v in ("a", "b", OTHER, "a", OTHER, OTHER)]
    assert list(table) == ["a", "b"]  # the folded values are labelled again each time: bounded as the set is
    assert table["a"] is table["a"]  # a known value's key is built once
    assert list(labels["source"]) == ["a", "b"]


def test_a_fixed_label_list_folds_the_rest_without_remembering_it():
    labels = {"source": LabelSet(10, ("wiki",))}
    table = Keys(("app-a",), CoreConfig(), labels, shared={})[BY_THING]
    assert [table[v] for v in ("wiki", "news", OTHER)] == [("things", "app-a", v) for v in ("wiki", OTHER, OTHER)]
    assert sorted(table) == [OTHER, "wiki"]  # `other` itself is its own label


def test_each_app_has_its_own_table():
    labels = {"source": LabelSet(10)}
    a, b = (Keys((app,), CoreConfig(), labels, shared={})[BY_THING] for app in ("app-a", "app-b"))
    assert a["x"] == ("things", "app-a", "x") and b["x"] == ("things", "app-b", "x")


def test_a_table_without_the_app_label_is_one_for_every_app():
    labels, shared = {"language": LabelSet(10)}, {}
    by_language = Table("language", lambda label: ("languages", label), by_app=False)
    a, b = (Keys((app,), CoreConfig(), labels, shared=shared)[by_language] for app in ("app-a", "app-b"))
    assert a is b and a["en"] == ("languages", "en") and list(shared[by_language]) == ["en"]


def test_keys_lead_with_the_app_then_the_pipeline_version_when_split():
    labels, config = {"source": LabelSet(10)}, CoreConfig(by_pipeline_version=True)
    keys = Keys(("app-a", "v2"), config, labels, shared={})
    assert keys[RETRIEVALS] == ("retrievals", "app-a", "v2")
    assert keys[BY_THING]["wiki"] == ("things", "app-a", "v2", "wiki")
    assert keys[BY_SOURCE]["wiki"] == ("admitted_results", "app-a", "v2", "wiki")
    top1 = keys[TOP1]
    assert top1.count == ("top1_score_count", "app-a", "v2") and top1.sum == ("top1_score_sum", "app-a", "v2")
    assert top1.buckets[0] == ("top1_score_bucket", "app-a", "v2", "0.0") and top1.buckets[-1][-1] == "+Inf"
    assert Keys(("app-a",), CoreConfig(), labels, shared={})[RETRIEVALS] == ("retrievals", "app-a")  # unsplit


def test_score_buckets_stay_per_app_when_split():
    config = CoreConfig(by_pipeline_version=True, score_buckets_by_app={"bm25": (0.0, 10.0)})
    keys = Keys(("bm25", "v1"), config, {}, shared={})[TOP1]
    assert keys.bounds == (0.0, 10.0) and [k[-1] for k in keys.buckets] == ["0.0", "10.0", "+Inf"]
