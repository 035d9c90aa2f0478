"""The setting names the configuration check knows are the installed libraries' own."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaException, Producer

from agent.io.kafka import librdkafka
from agent.io.kafka.options import NAMES


def _known_to_librdkafka(name: str) -> bool:
    """librdkafka tells an unknown property from a bad value when a client is built."""
    try:
        Producer({name: "\x01not a value", "logger": logging.getLogger("tests.librdkafka")})
    except KafkaException as exc:
        return "No such configuration property" not in str(exc)
    except (TypeError, ValueError):  # confluent-kafka checks the type of a few properties itself
        pass
    return True


def test_every_librdkafka_name_is_a_property_of_the_installed_librdkafka():
    names = sorted(librdkafka.CONSUMER | librdkafka.PRODUCER)
    assert [name for name in names if not _known_to_librdkafka(name)] == []
    assert not _known_to_librdkafka("sasl.mechanizm")  # the check can fail


@pytest.mark.parametrize("names", NAMES.values(), ids=list(NAMES))
def test_the_agent_sets_only_settings_of_its_library(names):
    assert set(names.managed) <= names.consumer | names.producer
