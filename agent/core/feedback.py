"""User feedback signals: rephrases, corrections, thumbs."""

from agent.core.tally import Counter, Tally, inc
from agent.core.view import View

METRICS = (Counter("feedback", ("app", "signal"), "User feedback signals."),)

_THUMBS = {-1: "thumbs_down", 1: "thumbs_up"}


def observe(view: View, tally: Tally) -> None:
    feedback = view.event.feedback
    if feedback is None:
        return
    if feedback.rephrased:
        inc(tally, ("feedback", view.app, "rephrased"))
    if feedback.correction:
        inc(tally, ("feedback", view.app, "correction"))
    thumbs = _THUMBS.get(feedback.thumbs)
    if thumbs:
        inc(tally, ("feedback", view.app, thumbs))
