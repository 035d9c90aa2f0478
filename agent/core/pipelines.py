"""An event's pipeline version: what canary and shadow comparisons split traffic by."""

from __future__ import annotations

from agent.core.model import Event

NO_VERSION = "none"  # the label of events that name no pipeline version


def version_of(event: Event) -> str | None:
    """The event's `pipeline.version` as sent, or None when it names none."""
    pipeline = event.pipeline
    return None if pipeline is None else pipeline.version
