"""The published JSON Schema (draft 2020-12) of the `retrieval.v1` event, for producers.

The decoder in `agent.core.decoder` is the reference implementation; the schema states
the same rules, except the few listed in its top-level `description`.
"""

from __future__ import annotations

import json
from importlib import resources

SCHEMA_FILE = "retrieval.v1.json"


def load_schema() -> dict:
    """Return a fresh copy of the `retrieval.v1` JSON Schema."""
    text = resources.files(__name__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    return json.loads(text)
