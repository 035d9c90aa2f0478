"""A figure the agent re-reads from the store on a schedule, off the consumer loop.

The calibrations, the drift findings and the judgment queue's gauges are each
read by a background job once at start and then every minute (by default), and scrapes
render whatever the last read left. A read that fails keeps the last figures
(the next one tries again), so a store outage never stops the agent.
"""

from __future__ import annotations

import logging

from apscheduler.schedulers.background import BackgroundScheduler

from agent.io.store.database import StoreError


class Periodic:
    """Runs `reload` every `seconds` and once at `start`; subclasses implement `reload`."""

    def __init__(self, job: str, seconds: float, log: logging.Logger, what: str, **job_defaults):
        self.job, self.log, self.what = job, log, what
        self.scheduler = BackgroundScheduler(
            timezone="UTC", job_defaults={"coalesce": True, "max_instances": 1, **job_defaults})
        self.scheduler.add_job(self.refresh, "interval", seconds=seconds, id=job)

    def start(self):
        self.scheduler.start()
        self.scheduler.add_job(self.refresh, id=f"{self.job}-now")  # once, at start
        return self

    def stop(self) -> None:
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
