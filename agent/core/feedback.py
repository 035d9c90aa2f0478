"""User feedback signals: rephrases, corrections, thumbs."""

from agent.core.tally import Counter, Tally, inc
from agent.core.view import Table, View

FEEDBACK = Counter("feedback", ("app", "signal"), "User feedback signals.")
METRICS = (FEEDBACK,)
BY_SIGNAL = Table(None, FEEDBACK.key)

_THUMBS: dict[int | None, str] = {-1: "thumbs_down", 1: "thumbs_up"}


def observe(view: View, tally: Tally) -> None:
    feedback = view.facts.event.feedback
    if feedback is None:
        return
    by_signal = view.keys[BY_SIGNAL]
    if feedback.rephrased:
        inc(tally, by_signal["rephrased"])
    if feedback.correction:
        inc(tally, by_signal["correction"])
    thumbs = _THUMBS.get(feedback.thumbs)
    if thumbs:
        inc(tally, by_signal[thumbs])
