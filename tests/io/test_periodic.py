"""The shared shape of the agent's store readers: once at start, then on an interval; a failed read keeps the last figures."""

from __future__ import annotations

import logging
import threading

import pytest

from agent.io.background.periodic import Periodic
from agent.io.store.database import StoreError


class Reader(Periodic):
    def __init__(self, outcomes):
        super().__init__("test-reader", 3600, logging.getLogger("ragdrift.test"), "the test figures")
        self.outcomes = list(outcomes)
        self.figures = None
        self.read = threading.Event()

    def reload(self) -> None:
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        self.figures = outcome
        self.read.set()


def test_a_failed_read_keeps_the_last_figures_and_says_why(caplog):
    reader = Reader([1, StoreError("store down"), RuntimeError("bug"), 2])
    with caplog.at_level(logging.WARNING, "ragdrift.test"):
        reader.refresh()
        reader.refresh()
        assert reader.figures == 1
        reader.refresh()
        assert reader.figures == 1
        reader.refresh()
    assert reader.figures == 2
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert messages == [("WARNING", "cannot read the test figures"), ("ERROR", "reading the test figures failed")]
    assert caplog.records[0].error == "store down"


def test_start_reads_once_without_waiting_for_the_interval():
    reader = Reader([7]).start()
    try:
        assert reader.read.wait(10)  # the interval is an hour
        assert reader.scheduler.get_job("test-reader") is not None  # and the interval job stays
    finally:
        reader.stop()
    assert reader.figures == 7


def test_reload_is_the_subclass_s():
    with pytest.raises(NotImplementedError):
        Periodic("bare", 60, logging.getLogger("ragdrift.test"), "nothing").reload()
