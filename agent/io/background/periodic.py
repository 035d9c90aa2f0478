"""A figure the agent re-reads from the store on a schedule, off the consumer loop.

The calibrations, the drift findings and the judgment queue's gauges are each
read by a background job once at start and then every minute (by default), and scrapes
render whatever the last read left. A read that fails keeps the last figures
(the next one tries again), so a store outage never stops the agent.

In the agent every such job runs on one scheduler (`new_scheduler()`), which the
agent starts and stops; a reader given none has one of its own.
"""

from __future__ import annotations

import logging

from apscheduler.schedulers.background import BackgroundScheduler

from agent.io.store.database import StoreError


def new_scheduler() -> BackgroundScheduler:
    """A background scheduler whose jobs never overlap themselves and run once after a delay."""
    return BackgroundScheduler(timezone="UTC", job_defaults={"coalesce": True, "max_instances": 1})


class Periodic:
    """Runs `reload` every `seconds` and once at `start`; subclasses implement `reload`.

    `options` are the jobs' own (a `misfire_grace_time`, say). On a shared
    `scheduler` that is started already, `start` only adds the first read."""

    def __init__(self, job: str, seconds: float, log: logging.Logger, what: str,
                 scheduler: BackgroundScheduler | None = None, **options):
        self.job, self.log, self.what, self.options = job, log, what, options
        self.own = scheduler is None
        self.scheduler = new_scheduler() if scheduler is None else scheduler
        self.scheduler.add_job(self.refresh, "interval", seconds=seconds, id=job, **options)

    def start(self):
        if self.own:
            self.scheduler.start()
        self.scheduler.add_job(self.refresh, id=f"{self.job}-now", **self.options)  # once, at start
        return self

    def stop(self) -> None:
        if self.own:
            self.scheduler.shutdown(wait=False)

    def refresh(self) -> None:
        """One read; a failure is logged and the last figures stay."""
        try:
            self.reload()
        except StoreError as exc:
            self.log.warning(f"cannot read {self.what}", extra={"error": str(exc)})
        except Exception:
            self.log.exception(f"reading {self.what} failed")

    def reload(self) -> None:
        raise NotImplementedError
