"""ragdrift: a production monitor for RAG retrieval."""

__version__ = "0.1.0"
