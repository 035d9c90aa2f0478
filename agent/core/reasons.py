"""Why a message is rejected: the dead-letter reasons and which withhold their payload.

A reason is one of `REASONS`, optionally followed by `:<field path>` for
`invalid_field`; metrics count the bare kind, so their labels stay bounded.
"""

from __future__ import annotations

TOO_LARGE = "too_large"
PII_SUSPECTED = "pii_suspected"
INVALID_JSON = "invalid_json"
UNSUPPORTED_SCHEMA = "unsupported_schema"
INVALID_FIELD = "invalid_field"
REASONS = (INVALID_JSON, INVALID_FIELD, UNSUPPORTED_SCHEMA, TOO_LARGE, PII_SUSPECTED)
# Payloads that never travel further: privacy suspects, and oversized
# messages (too large to forward, and never scanned).
WITHHELD = frozenset((PII_SUSPECTED, TOO_LARGE))


class RejectedEvent(ValueError):
    """A message that cannot become an event; `reason` is its dead-letter reason."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail

    @property
    def kind(self) -> str:
        """The reason without its `:<path>` suffix, for bounded counting."""
        return self.reason.split(":", 1)[0]

    @property
    def withheld(self) -> bool:
        """The payload must not travel further (its dead letter carries facts only)."""
        return self.kind in WITHHELD
