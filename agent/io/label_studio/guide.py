"""The grading guide judges read: grades, tags and evidence groups explained.

The grade names the labeling view offers and the Label Studio project's
instructions (shown before a judge's first task, and under *Instructions*)
come from here, so the choices and their explanation cannot drift apart.
"""

from __future__ import annotations

import html

GRADES = (("0", "irrelevant"), ("1", "marginally relevant"), ("2", "relevant"), ("3", "highly relevant"))
GRADE_MEANINGS = {
    "0": "says nothing that helps answer the query, or is about something else",
    "1": "on the topic, but a reader would still have to look elsewhere for the answer",
    "2": "answers part of the query, or answers it with gaps",
    "3": "answers the query on its own, correctly and for the situation asked about",
}
TAG_MEANINGS = {
    "stale": "outdated: superseded by a newer document or version",
    "duplicate": "repeats another chunk of this task",
    "unauthorized": "content the person asking should not see",
    "wrong_locale": "in another language or for another country or region",
    "wrong_version": "about another version of the product or policy than the one asked about",
    "low_authority": "from a source that should not be trusted for this (a draft, a forum post, hearsay)",
}
EVIDENCE_GROUPS = ("A", "B", "C")
EVIDENCE_MEANING = ("When the query needs several chunks together to be answered, give each of those "
                    "chunks the same letter; a second letter is another complete answer. "
                    "Leave it empty for a chunk that answers alone or does not help.")


def instructions(tags) -> str:
    """The project's instructions (HTML): what each grade, tag and evidence group means."""
    grades = "".join(f"<li><b>{g} {html.escape(name)}</b>: {html.escape(GRADE_MEANINGS[g])}</li>"
                     for g, name in GRADES)
    tag_items = "".join(f"<li><b>{html.escape(t)}</b>: {html.escape(TAG_MEANINGS.get(t, ''))}</li>" for t in tags)
    return ("<h3>Grading guide</h3>"
            "<p>Each task is one search query (pinned at the top) and the chunks the search returned, "
            "numbered in no particular order. Judge every chunk on its own against the query.</p>"
            f"<h4>Grade (required for every chunk)</h4><ul>{grades}</ul>"
            + (f"<h4>Tags (optional, any number)</h4><ul>{tag_items}</ul>" if tags else "")
            + f"<h4>Evidence group (optional)</h4><p>{html.escape(EVIDENCE_MEANING)}</p>"
            "<p>Submit once per task. Use <i>Skip</i> when you cannot judge a task; "
            "never add a second annotation with <i>+</i>: only your latest one counts.</p>")
