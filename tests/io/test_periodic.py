"""The shared shape of the agent's store readers: once at start, then on an interval; a failed read keeps the last figures."""

from __future__ import annotations

import logging
import threading

import pytest

from agent.io.background.periodic import Periodic, new_scheduler
from agent.io.store.database import StoreError


class Reader(Periodic):
    def __init__(self, outcomes, scheduler=None):
        super().__init__("test-reader", 3600, logging.getLogger("ragdrift.test"), what="the test figures",
                         scheduler=scheduler or new_scheduler())
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
    scheduler = new_scheduler()
    reader = Reader([7], scheduler).start()
    scheduler.start()
    try:
        assert reader.read.wait(10)  # the interval is an hour
        assert scheduler.get_job("test-reader") is not None  # and the interval job stays
    finally:
        scheduler.shutdown(wait=False)
    assert reader.figures == 7


class AskedLock:
    """The reader's lock, telling when a thread asks for it."""

    def __init__(self):
        self.lock, self.asked = threading.Lock(), threading.Semaphore(0)

    def __enter__(self):
        self.asked.release()
        self.lock.acquire()

    def __exit__(self, *_):
        self.lock.release()


class Overlap(Periodic):
    """A read that holds on until it is released, counting the reads inside at once."""

    def __init__(self):
        super().__init__("test-overlap", 3600, logging.getLogger("ragdrift.test"), what="the test figures", scheduler=new_scheduler())
        self.lock = AskedLock()
        self.inside = 0
        self.most = 0
        self.reads = 0
        self.entered, self.release = threading.Event(), threading.Event()

    def reload(self) -> None:
        self.inside += 1
        self.most = max(self.most, self.inside)
        self.reads += 1
        if self.reads == 1:
            self.entered.set()
            assert self.release.wait(10)
        self.inside -= 1


def test_reads_asked_for_from_two_threads_take_turns():
    reader = Overlap()  # the interval's read, and the weekly batch's refresh on another thread
    first = threading.Thread(target=reader.refresh)
    first.start()
    assert reader.lock.asked.acquire(timeout=10) and reader.entered.wait(10)  # the first read holds the lock ...
    second = threading.Thread(target=reader.refresh)
    second.start()
    assert reader.lock.asked.acquire(timeout=10)  # ... and the second asked while the first may hold it
    assert reader.reads == 1  # the first is inside (it waits for `release`), the second waits for the lock
    reader.release.set()
    first.join(10)
    second.join(10)
    assert reader.reads == 2 and reader.most == 1


def test_reload_is_the_subclass_s():
    with pytest.raises(NotImplementedError):
        Periodic("bare", 60, logging.getLogger("ragdrift.test"), what="nothing", scheduler=new_scheduler()).reload()
