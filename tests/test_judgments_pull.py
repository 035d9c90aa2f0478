"""The Label Studio round trip on a real Label Studio: a batch built from a
replayed generated week is pushed as a project, two judges annotate it
through the REST API (one task skipped, one disagreement on a double-judged
item, tags and evidence groups), `ragdrift judgments pull` brings the
annotations back, and the store holds exactly the labels the judges made.

The `round_trip` fixture exposes those labels (and the batch's key) for the
report's figures to be checked against a hand computation over them.
"""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout
from types import SimpleNamespace

import pytest

from agent.cli import main
from agent.core.judgments.labels import Label
from agent.io.files.batch_files import read_key
from agent.io.settings.agent import load
from agent.io.store.database import Store
from agent.io.store.qrels import TABLES as QRELS
from agent.io.store.qrels import Qrels
from tests.test_judgments_cli import copy_store, latest, replayed_batch

pytestmark = pytest.mark.label_studio


def grade_result(index: int, grade: int, tags=(), group: str | None = None) -> list[dict]:
    """Label Studio's result entries for one chunk, as its UI submits them."""
    out = [{"from_name": f"grade_{index}", "to_name": f"chunk_{index}", "type": "choices",
            "value": {"choices": [str(grade)]}}]
    if tags:
        out.append({"from_name": f"tags_{index}", "to_name": f"chunk_{index}", "type": "choices",
                    "value": {"choices": list(tags)}})
    if group:
        out.append({"from_name": f"group_{index}", "to_name": f"chunk_{index}", "type": "choices",
                    "value": {"choices": [group]}})
    return out


def judgment(chunk_index: int, n_chunks: int) -> tuple[int, tuple[str, ...], str | None]:
    """The judges' (grade, tags, evidence group) of one chunk: fixed, varied, the same for both judges."""
    grade = (chunk_index + n_chunks) % 4
    tags = ("stale",) if chunk_index == n_chunks - 1 and grade < 2 else ()
    group = "A" if grade >= 2 and n_chunks > 1 else None
    return grade, tags, group


def annotate(client, task: dict, user_id: int, disagree: bool = False) -> list[Label]:
    """Post one judge's annotation of a task; the labels it stands for. With
    `disagree`, the first chunk's grade falls on the other side of relevance."""
    chunks = task["data"]["chunks"]
    result, labels = [], []
    for i, c in enumerate(chunks):
        grade, tags, group = judgment(i, len(chunks))
        if disagree and i == 0:
            grade = 3 if grade < 2 else 0  # across the relevance threshold
        result += grade_result(i, grade, tags, group)
        item = task["data"]["item"]
        labels.append(Label(batch_id=item.rsplit("-", 1)[0], item=item, chunk=c["chunk"], judge=f"label-studio:{user_id}", grade=grade, tags=tags,
                            evidence_group=group))
    client._call("POST", f"/api/tasks/{task['id']}/annotations/", {"result": result, "completed_by": user_id})
    return labels


def pull(capsys, config, server, token_file, project: int) -> tuple[int, dict]:
    code = main(["judgments", "pull", "--label-studio-url", server.url, "--project", str(project),
                 "--label-studio-token-file", str(token_file), "--config", str(config), "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def round_trip(label_studio, tmp_path_factory):
    """A batch pushed to Label Studio and judged there by two judges.

    ``labels``: every label the judges made (their latest), sorted by pair;
    ``key``: the batch's key.jsonl rows; ``config``, ``directory``,
    ``batch_id``, ``project``, ``judges`` (user ids), ``token_file``,
    ``skipped`` (the item the first judge skipped), ``disagreement``
    ((item, chunk) the two judges grade on either side of relevance; on
    every other chunk of a double-judged item they agree).
    """
    tmp = tmp_path_factory.mktemp("round-trip")
    token_file = tmp / "token"
    token_file.write_text(label_studio.token)
    (tmp / "batch").mkdir()
    config, directory = replayed_batch(tmp / "batch", double_judged_share=0.3)
    # the batch, now pushed to Label Studio
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["batch", "push", directory.name, "--config", str(config),
                     "--label-studio-url", label_studio.url, "--label-studio-token-file", str(token_file)])
    assert code == 0
    project = int(re.search(r"Label Studio project (\d+)", out.getvalue()).group(1))
    client = label_studio.client()
    first = client._call("GET", "/api/current-user/whoami")["id"]
    second = client._call("POST", "/api/users/", {
        "email": f"second-{project}@ragdrift.test", "username": f"second-{project}", "first_name": "Second"})["id"]

    tasks = sorted(client.project_tasks(project), key=lambda t: t["data"]["item"])
    double = [t for t in tasks if t["overlap"] == 2]
    single = [t for t in tasks if t["overlap"] == 1]
    assert len(double) >= 2 and len(single) >= 2, "the batch needs both kinds of item"
    skipped = single[0]
    client._call("POST", f"/api/tasks/{skipped['id']}/annotations/",
                 {"result": [], "was_cancelled": True, "completed_by": first})
    labels = []
    for task in tasks:
        if task is not skipped:
            labels += annotate(client, task, first)
    for n, task in enumerate(double):
        labels += annotate(client, task, second, disagree=n == 0)
    # the second judge's disagreement: chunk 0 of the first double-judged item
    disagreement = (double[0]["data"]["item"], double[0]["data"]["chunks"][0]["chunk"])
    return SimpleNamespace(
        config=config, directory=directory, batch_id=directory.name, project=project, token_file=token_file,
        judges=(first, second), key=read_key(directory), labels=sorted(labels, key=lambda x: x.pair),
        skipped=skipped["data"]["item"], disagreement=disagreement,
    )


@pytest.fixture
def rt(round_trip, tmp_path):
    """The round trip with a store of the test's own (the batch, no labels yet)."""
    return SimpleNamespace(**{**vars(round_trip), "config": copy_store(round_trip.config, tmp_path)})


def test_pulled_labels_are_the_judges_labels(rt, label_studio, capsys):
    code, out = pull(capsys, rt.config, label_studio, rt.token_file, rt.project)
    assert code == 0
    (summary,) = out["files"]
    assert summary == {"file": f"label-studio project {rt.project}", "format": "label-studio",
                       "batches": [rt.batch_id], "labels": len(rt.labels), "new": len(rt.labels),
                       "changed": 0, "unchanged": 0, "skipped": 1, "duplicates": []}
    assert latest(rt.config, rt.batch_id) == rt.labels

    # what the fixture promises: a skipped task, a disagreement across the threshold, two judges
    assert rt.skipped not in {x.item for x in rt.labels}
    grades = {x.judge: x.grade for x in rt.labels if (x.item, x.chunk) == rt.disagreement}
    assert len(grades) == 2 and len({g >= 2 for g in grades.values()}) == 2
    assert {x.judge for x in rt.labels} == {f"label-studio:{j}" for j in rt.judges}
    assert any(x.tags for x in rt.labels) and any(x.evidence_group for x in rt.labels)

    # pulling again adds nothing
    code, out = pull(capsys, rt.config, label_studio, rt.token_file, rt.project)
    assert code == 0 and (out["files"][0]["new"], out["files"][0]["changed"]) == (0, 0)
    assert out["files"][0]["unchanged"] == len(rt.labels)


def test_a_judge_who_changes_an_annotation_makes_a_new_version(rt, label_studio, capsys):
    client = label_studio.client()
    code, _ = pull(capsys, rt.config, label_studio, rt.token_file, rt.project)
    assert code == 0
    exported = client.export_annotations(rt.project)
    task = next(t for t in exported if t["data"]["item"] == rt.disagreement[0])
    ann = next(a for a in task["annotations"] if not a["was_cancelled"] and
               (a["completed_by"]["id"] if isinstance(a["completed_by"], dict) else a["completed_by"]) == rt.judges[1])
    result = [r for r in ann["result"] if r["from_name"] != "grade_0"] + grade_result(0, 2)
    client._call("PATCH", f"/api/annotations/{ann['id']}/", {"result": result})
    try:
        code, out = pull(capsys, rt.config, label_studio, rt.token_file, rt.project)
        assert code == 0 and (out["files"][0]["new"], out["files"][0]["changed"]) == (0, 1)
        with Store(load(rt.config).store.url, None, QRELS) as store:
            history = Qrels(store).history(rt.batch_id, *rt.disagreement, f"label-studio:{rt.judges[1]}")
        assert [v.version for v in history] == [1, 2] and history[1].label.grade == 2
        assert history[0].label == next(x for x in rt.labels if (x.item, x.chunk) == rt.disagreement
                                        and x.judge == f"label-studio:{rt.judges[1]}")
    finally:  # leave the judges' labels as the fixture says, for whoever uses it next
        client._call("PATCH", f"/api/annotations/{ann['id']}/", {"result": ann["result"]})


def test_a_bad_annotation_refuses_the_pull_and_names_the_task(rt, label_studio, capsys):
    client = label_studio.client()
    (task,) = [t for t in client.project_tasks(rt.project) if t["data"]["item"] == rt.skipped]
    result = [r for i in range(len(task["data"]["chunks"])) for r in grade_result(i, 9 if i == 0 else 1)]
    bad = client._call("POST", f"/api/tasks/{task['id']}/annotations/",
                       {"result": result, "completed_by": rt.judges[1]})["id"]
    try:
        code = main(["judgments", "pull", "--label-studio-url", label_studio.url, "--project", str(rt.project),
                     "--label-studio-token-file", str(rt.token_file), "--config", str(rt.config)])
        err = capsys.readouterr().err
        assert code == 2
        assert re.search(rf"label-studio project {rt.project}: task \d+: task id {task['id']}, annotation {bad}: "
                         rf"chunk {rt.skipped}-\d+: grade 9 is not one of 0, 1, 2, 3", err), err
        assert latest(rt.config, rt.batch_id) == []  # nothing of the project, not even its good annotations
    finally:
        client._call("DELETE", f"/api/annotations/{bad}/")


def test_a_judges_second_annotation_of_a_task_is_reported_not_refused(rt, label_studio, capsys):
    """A stray "+": the first judge annotates a task again. The pull brings
    every label in, the judge's latest annotation for that task, and names the one set aside."""
    client = label_studio.client()
    task = next(t for t in client.project_tasks(rt.project) if t["data"]["item"] == rt.disagreement[0])
    before = {a["id"] for a in client._call("GET", f"/api/tasks/{task['id']}/annotations/")}
    earlier = next(a["id"] for a in client._call("GET", f"/api/tasks/{task['id']}/annotations/")
                   if a["completed_by"] == rt.judges[0])
    again = annotate(client, task, rt.judges[0], disagree=True)
    (latest_id,) = {a["id"] for a in client._call("GET", f"/api/tasks/{task['id']}/annotations/")} - before
    try:
        code = main(["judgments", "pull", "--label-studio-url", label_studio.url, "--project", str(rt.project),
                     "--label-studio-token-file", str(rt.token_file), "--config", str(rt.config)])
        err = capsys.readouterr().err
        assert code == 0, err
        assert (f"ragdrift: warning: label-studio project {rt.project}: task " in err and
                f"task id {task['id']}: judge label-studio:{rt.judges[0]} made 2 annotations: the latest, "
                f"{latest_id}, counts; set aside: {earlier}" in err), err
        want = [x for x in rt.labels if not (x.item == task["data"]["item"] and x.judge == again[0].judge)] + again
        assert latest(rt.config, rt.batch_id) == sorted(want, key=lambda x: x.pair)
    finally:
        client._call("DELETE", f"/api/annotations/{latest_id}/")


def by_hand(key: list[dict], labels: list[Label], threshold: float = 2) -> dict:
    """The report's figures recomputed from the definitions in docs/judgments.md, "The report":
    per item a judge labelled, its admitted chunks in rank order that someone graded for its
    query, cut at cutoff_k; a chunk's relevance is the mean of every grade it got for its query
    (in any item: one event sampled in two strata is two items); precision over that ranking."""
    grades: dict[tuple[str, str], list[int]] = {}
    chunk_ids = {(row["item"], c["chunk"]): (row["query_id"], c["chunk_id"]) for row in key if row["item"]
                 for c in row["chunks"]}
    for x in labels:
        grades.setdefault(chunk_ids[(x.item, x.chunk)], []).append(x.grade)
    labelled = {x.item for x in labels}
    precision = {}
    for row in key:
        ranked = [c for c in sorted(row["chunks"], key=lambda c: c["rank"])
                  if (row["query_id"], c["chunk_id"]) in grades][:row["cutoff_k"]]
        if row["item"] in labelled and ranked:
            relevant = [sum(g) / len(g) >= threshold for g in (grades[(row["query_id"], c["chunk_id"])] for c in ranked)]
            precision[row["item"]] = (row["stratum"], row["weight"], sum(relevant) / len(relevant))
    return precision


def linear_kappa(pairs: list[tuple[int, int]]) -> float:
    """Cohen's kappa with linear weights |i - j| / 3 over grades 0-3, from its formula."""
    n = len(pairs)
    observed = sum(abs(a - b) / 3 for a, b in pairs) / n
    first = [sum(a == g for a, _ in pairs) / n for g in range(4)]
    second = [sum(b == g for _, b in pairs) / n for g in range(4)]
    expected = sum(first[i] * second[j] * abs(i - j) / 3 for i in range(4) for j in range(4))
    return 1 - observed / expected


def test_the_report_of_the_pulled_labels_equals_a_hand_computation(rt, label_studio, capsys):
    code, _ = pull(capsys, rt.config, label_studio, rt.token_file, rt.project)
    assert code == 0
    assert main(["judgments", "report", "--config", str(rt.config), "--batch", rt.batch_id,
                 "--format", "json", "--resamples", "200"]) == 0
    report = json.loads(capsys.readouterr().out)
    precision = by_hand(rt.key, rt.labels)
    assert rt.skipped not in precision and report["counts"]["judged"] == len(precision)
    assert report["counts"]["unjudged_items"] == 1  # the skipped task
    views = {(v["view"], v["stratum"]): v for v in report["views"]}
    challenge = views[("challenge", "all")]["metrics"]["precision"]
    assert challenge["n"] == len(precision)
    assert challenge["estimate"] == pytest.approx(sum(p for _, _, p in precision.values()) / len(precision))
    assert challenge["low"] <= challenge["estimate"] <= challenge["high"]
    for stratum in {s for s, _, _ in precision.values()}:
        members = [(w, p) for s, w, p in precision.values() if s == stratum]
        traffic = views[("traffic", stratum)]["metrics"]["precision"]
        assert traffic["estimate"] == pytest.approx(sum(w * p for w, p in members) / sum(w for w, _ in members))
    risk = [(w, p) for s, w, p in precision.values() if s != "uniform"]
    assert views[("traffic", "all")]["metrics"]["precision"]["estimate"] == pytest.approx(
        sum(w * p for w, p in risk) / sum(w for w, _ in risk))

    # agreement: the pairs of grades on double-judged chunks, the one disagreement across the threshold
    by_chunk: dict[tuple[str, str], dict[str, int]] = {}
    for x in rt.labels:
        by_chunk.setdefault((x.item, x.chunk), {})[x.judge] = x.grade
    pairs = [tuple(g[j] for j in sorted(g)) for g in by_chunk.values() if len(g) == 2]
    agreement = report["agreement"]
    assert agreement["pairs"] == len(pairs)
    assert agreement["kappa"] == pytest.approx(linear_kappa(pairs))
    crossing = [(d["item"], d["chunk"]) for d in agreement["disagreements"] if d["crosses_threshold"]]
    assert crossing == [rt.disagreement]
    # tags: every chunk a judge tagged stale is counted
    stale = {(x.item, x.chunk) for x in rt.labels if "stale" in x.tags}
    assert report["tags"]["found"]["stale"]["chunks"] == len(stale)
