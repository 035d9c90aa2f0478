"""Label Studio's JSON export of a batch's project, read into labels.

Per chunk i of a task, the labeling config (agent/io/label_studio/client.py) has
the controls grade_i, tags_i and group_i. A cancelled (skipped) annotation
is skipped; the judge is the Label Studio user who completed it. A judge
with several annotations of one task (a stray click on "+" makes a second)
counts with the latest (by ``updated_at``, then id): the others are set
aside and reported, so one slip does not hold back everyone's labels. The export
is hostile input like any file: a value of the wrong type anywhere in it is
a problem of its task, and a reason shows no value but ids and short tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.core.judgments.untrusted import chunk_place, grade_of, integer, shown

if TYPE_CHECKING:  # importing.py hands its reader in
    from agent.core.judgments.importing import Parsed, Reader

LABEL_STUDIO_JUDGE = "label-studio:"  # + the Label Studio user id
_CONTROLS = ("grade", "tags", "group")  # control names: <kind>_<chunk index>


def read(reader: Reader, tasks: object) -> Parsed:
    """Every task's annotations into `reader`: its labels and problems."""
    if not isinstance(tasks, list):
        reader.problem(1, "not a Label Studio JSON export (a list of tasks)")
        return reader.done()
    for n, task in enumerate(tasks, 1):
        data = task.get("data") if isinstance(task, dict) else None
        chunks = data.get("chunks") if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(chunks, list) or not all(isinstance(c, dict) for c in chunks):
            reader.problem(n, "not a task of a ragdrift batch (no data.item and data.chunks)")
            continue
        task_id = f"task id {shown(task.get('id'))}"
        annotations = task.get("annotations") or []
        if not isinstance(annotations, list):
            reader.problem(n, f"{task_id}: annotations {shown(annotations)} is not a list")
            continue
        for ann in annotations:
            if not isinstance(ann, dict):
                reader.problem(n, f"{task_id}: annotation {shown(ann)} is not an object")
        for ann in _latest_per_judge(reader, n, task_id, [a for a in annotations if isinstance(a, dict)]):
            if ann.get("was_cancelled"):
                reader.skipped += 1  # the judge skipped the task
            else:
                _annotation(reader, n, f"{task_id}, annotation {shown(ann.get('id'))}: ", data.get("item"), chunks, ann)
    return reader.done()


def _annotation(reader: Reader, n: int, where: str, item: object, chunks: list[dict[str, Any]], ann: dict[str, Any]) -> None:
    judge = _judge(ann.get("completed_by"))
    if judge is None:
        reader.problem(n, where + f"completed_by {shown(ann.get('completed_by'))} names no user")
        return
    results = ann.get("result") or []
    if not isinstance(results, list):
        reader.problem(n, where + f"result {shown(results)} is not a list")
        return
    chosen: dict[tuple[str, int], list[Any]] = {}
    for r in results:
        r = r if isinstance(r, dict) else {}
        name, value = r.get("from_name"), r.get("value")
        kind, _, index = name.rpartition("_") if isinstance(name, str) else ("", "", "")
        position = integer(index) if index.isdigit() else None  # ASCII digits only, and not too many
        choices = value.get("choices") if isinstance(value, dict) else None
        if kind not in _CONTROLS or position is None or position >= len(chunks):
            reader.problem(n, where + f"result {shown(name)} is about no chunk of the task")
        elif not isinstance(choices, list):
            reader.problem(n, where + f"result {shown(name)}: no choices")
        else:
            chosen[(kind, position)] = choices
    for i, c in enumerate(chunks):
        grade = chosen.get(("grade", i))
        group = chosen.get(("group", i))
        place = chunk_place(c.get("chunk"), i)
        if grade is None:
            reader.problem(n, where + place + "no grade")
            continue
        if len(grade) != 1 or (group is not None and len(group) != 1):
            reader.problem(n, where + place + "one grade and at most one evidence group")
            continue
        reader.add(n, where + place, item, c.get("chunk"), judge, grade_of(grade[0]),
                   chosen.get(("tags", i), []), group[0] if group else None)


def _latest_per_judge(reader: Reader, n: int, task_id: str, annotations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each judge's latest annotation, in the export's order; a judge's
    others are reported as set aside. One without a judge stays (it is a problem)."""
    mine: dict[str, list[dict[str, Any]]] = {}
    for ann in annotations:
        if (judge := _judge(ann.get("completed_by"))) is not None:
            mine.setdefault(judge, []).append(ann)
    taken = {judge: max(anns, key=_recency) for judge, anns in mine.items()}
    for judge, anns in mine.items():
        if len(anns) > 1:
            aside = ", ".join(shown(a.get("id")) for a in anns if a is not taken[judge])
            reader.duplicate(n, f"{task_id}: judge {judge} made {len(anns)} annotations: the latest, "
                                f"{shown(taken[judge].get('id'))}, counts; set aside: {aside}")
    latest = {id(a) for a in taken.values()}
    return [a for a in annotations if _judge(a.get("completed_by")) is None or id(a) in latest]


def _recency(ann: dict[str, Any]) -> tuple[str, int]:
    """When an annotation was last submitted: its ``updated_at`` (ISO 8601 from
    one server, so it sorts as text), then its id."""
    stamp, ann_id = ann.get("updated_at"), ann.get("id")
    return (stamp if isinstance(stamp, str) and len(stamp) <= 40 else "",
            ann_id if isinstance(ann_id, int) and not isinstance(ann_id, bool) else -1)


def _judge(completed_by: object) -> str | None:
    """A stable judge name from Label Studio's ``completed_by``: a user id, or
    a user object (its id, the same whichever form the export uses)."""
    if isinstance(completed_by, dict):
        completed_by = completed_by.get("id")
    if isinstance(completed_by, int) and not isinstance(completed_by, bool):
        return f"{LABEL_STUDIO_JUDGE}{completed_by}"
    return None
