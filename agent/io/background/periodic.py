"""A figure the agent re-reads from the store on a schedule, off the consumer loop.

The calibrations, the drift findings and the judgment queue's gauges are each
read by a background job once at start and then every minute (by default), and scrapes
render whatever the last read left. A read that fails keeps the last figures
(the next one tries again), so a store outage never stops the agent.

Every such job runs on the agent's one scheduler (`new_scheduler()`), which
the agent starts and stops. A read is never run twice at once: the interval's
and one another job asks for (the weekly batch's) take turns.
"""

from __future__ import annotations

import logging
import threading

from apscheduler.schedulers.background import BackgroundScheduler

from agent.io.store.database import StoreError


def new_scheduler() -> BackgroundScheduler:
    """A background scheduler whose jobs never overlap themselves and run once after a delay."""
    return BackgroundScheduler(timezone="UTC", job_defaults={"coalesce": True, "max_instances": 1})


class Periodic:
    """Runs `reload` every `seconds` on `scheduler` and once at `start`; subclasses implement `reload`.

    `options` are the jobs' own (a `misfire_grace_time`, say)."""

    def __init__(self, job: str, seconds: float, log: logging.Logger, *, what: str, scheduler: BackgroundScheduler,
                 **options):
        self.job, self.log, self.what, self.options = job, log, what, options
        self.scheduler = scheduler
        self.lock = threading.Lock()  # one read at a time, whichever thread asks
        scheduler.add_job(self.refresh, "interval", seconds=seconds, id=job, **options)

    def start(self):
        """The first read, once the scheduler runs."""
        self.scheduler.add_job(self.refresh, id=f"{self.job}-now", **self.options)
        return self

    def refresh(self) -> None:
        """One read; a failure is logged and the last figures stay."""
        with self.lock:
            try:
                self.reload()
            except StoreError as exc:
                self.log.warning(f"cannot read {self.what}", extra={"error": str(exc)})
            except Exception:
                self.log.exception(f"reading {self.what} failed")

    def reload(self) -> None:
        raise NotImplementedError
