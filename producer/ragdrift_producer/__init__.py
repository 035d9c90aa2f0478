"""ragdrift's producer library: an app's retrievals as privacy-safe `retrieval.v1` events.

Build one `Producer` per app and call `retrieval(...)` per retrieval, or let
`ragdrift_producer.otel.RetrievalSpanProcessor` turn the retriever spans of an
instrumented framework into the same calls. Query and document text are
hashed in the app's process and never leave it.
"""

from ragdrift_producer.event import Dropped
from ragdrift_producer.hashing import HashKey, HashKeyError
from ragdrift_producer.producer import Producer, Stats, current_user, user_context
from ragdrift_producer.recorder import JsonLinesRecorder, Recorder
from ragdrift_producer.values import Feedback, Filter, Pipeline, Result, Stages, User

__version__ = "0.1.0"

__all__ = [
    "Dropped", "Feedback", "Filter", "HashKey", "HashKeyError", "JsonLinesRecorder", "Pipeline", "Producer",
    "Recorder", "Result", "Stages", "Stats", "User", "current_user", "user_context",
]
