"""ragdrift: a production monitor for RAG retrieval.

The layers, a record's way to `/metrics` and the exactly-once rule: docs/architecture.md.
"""

__version__ = "0.2.0"
