"""An event's pipeline version, raw (agent/core/pipelines.py), and its settings in the core's configuration."""

import msgspec
import pytest

from agent.core.config import CoreConfig
from agent.core.decoder import decode
from agent.core.model import Event, Pipeline
from agent.core.pipelines import version_of


def event(pipeline: Pipeline | None) -> Event:
    doc = {"schema": "retrieval.v1", "event_id": "ev-1", "ts": "2026-11-25T12:00:00Z", "app": "app",
           "query": {"id": "q0000000"}, "principal": {"tenant": "t1", "groups": []}, "cutoff_k": 1, "results": []}
    if pipeline is not None:
        doc["pipeline"] = msgspec.to_builtins(pipeline)
    return decode(msgspec.json.encode(doc)).event


def test_version_of_reads_the_pipeline_version_as_sent():
    assert version_of(event(Pipeline(version="v1.5-canary", retriever="bm25"))) == "v1.5-canary"


@pytest.mark.parametrize("pipeline", [None, Pipeline(retriever="bm25")])
def test_no_pipeline_or_no_version_is_none(pipeline):
    assert version_of(event(pipeline)) is None


def test_the_split_is_off_and_bounded_by_default():
    config = CoreConfig()
    assert not config.by_pipeline_version and config.max_pipeline_versions == 4
    assert CoreConfig(label_values={"pipeline_version": ("v1", "v2")}).label_values["pipeline_version"] == ("v1", "v2")
    with pytest.raises(ValueError, match="max_pipeline_versions"):
        CoreConfig(max_pipeline_versions=0)
