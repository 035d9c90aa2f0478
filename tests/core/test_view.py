"""The per-app key tables the metric families read (agent/core/view.py)."""

from agent.core.config import CoreConfig
from agent.core.labels import OTHER, LabelSet
from agent.core.view import Keys, Table

BY_THING = Table("source", lambda app, label: ("things", app, label))


def test_a_table_keeps_only_values_its_label_set_keeps():
    labels = {"source": LabelSet(2)}
    table = Keys("app-a", CoreConfig(), labels, {})[BY_THING]
    seen = [table[value] for value in ("a", "b", "c", "a", "d", "c")]
    assert seen == [("things", "app-a", v) for v in ("a", "b", OTHER, "a", OTHER, OTHER)]
    assert list(table) == ["a", "b"]  # the folded values are labelled again each time: bounded as the set is
    assert table["a"] is table["a"]  # a known value's key is built once
    assert list(labels["source"]) == ["a", "b"]


def test_a_fixed_label_list_folds_the_rest_without_remembering_it():
    labels = {"source": LabelSet(10, ("wiki",))}
    table = Keys("app-a", CoreConfig(), labels, {})[BY_THING]
    assert [table[v] for v in ("wiki", "news", OTHER)] == [("things", "app-a", v) for v in ("wiki", OTHER, OTHER)]
    assert sorted(table) == [OTHER, "wiki"]  # `other` itself is its own label


def test_each_app_has_its_own_table():
    labels = {"source": LabelSet(10)}
    a, b = (Keys(app, CoreConfig(), labels, {})[BY_THING] for app in ("app-a", "app-b"))
    assert a["x"] == ("things", "app-a", "x") and b["x"] == ("things", "app-b", "x")


def test_a_table_without_the_app_label_is_one_for_every_app():
    labels, shared = {"language": LabelSet(10)}, {}
    by_language = Table("language", lambda app, label: ("languages", label), by_app=False)
    a, b = (Keys(app, CoreConfig(), labels, shared)[by_language] for app in ("app-a", "app-b"))
    assert a is b and a["en"] == ("languages", "en") and list(shared[by_language]) == ["en"]
