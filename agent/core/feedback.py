"""User feedback signals: rephrases, corrections, thumbs."""

from agent.core.tally import Counter, Tally, inc
from agent.core.view import View

FEEDBACK = Counter("feedback", ("app", "signal"), "User feedback signals.")
METRICS = (FEEDBACK,)

_THUMBS: dict[int | None, str] = {-1: "thumbs_down", 1: "thumbs_up"}


def observe(view: View, tally: Tally) -> None:
    feedback = view.facts.event.feedback
    if feedback is None:
        return
    app = view.keys.app
    if feedback.rephrased:
        inc(tally, FEEDBACK.key(app, "rephrased"))
    if feedback.correction:
        inc(tally, FEEDBACK.key(app, "correction"))
    thumbs = _THUMBS.get(feedback.thumbs)
    if thumbs:
        inc(tally, FEEDBACK.key(app, thumbs))
