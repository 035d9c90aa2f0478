"""Child processes for the demo, tests and benchmarks, and the small helpers they use.

Readiness is a polled condition, never a fixed sleep. Stopping kills the
child's process group and reaps it; children also die with the Python process
that started them (PR_SET_PDEATHSIG, plus an atexit hook), so nothing is left
behind.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, Self


class ServiceError(RuntimeError):
    """A real service could not be started or did not become ready."""


class StopWaiting(Exception):
    """Raised by a ``wait_until`` predicate to abort the wait at once."""


# --------------------------------------------------------------------------
# small helpers


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 10.0,
    interval: float = 0.05,
    message: str = "condition",
) -> Any:
    """Poll ``predicate`` until it returns a truthy value; return that value.

    Exceptions raised by the predicate count as "not yet" (the last one is
    chained to the TimeoutError), except ``StopWaiting``, which aborts. Raises ``TimeoutError`` naming ``message``
    after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except StopWaiting:
            raise
        except Exception as exc:  # polled condition
            last_exc = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_exc!r})" if last_exc else ""
            raise TimeoutError(
                f"timed out after {timeout:.1f}s waiting for {message}{detail}"
            ) from last_exc
        time.sleep(interval)


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


_LIVE: set[ChildProcess] = set()


def _stop_all_at_exit() -> None:
    for proc in list(_LIVE):
        proc.stop()


atexit.register(_stop_all_at_exit)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """preexec_fn: SIGKILL this child when the parent dies (Linux), so a test
    run killed by a timeout leaves no broker or Prometheus behind."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # best effort, not on Linux
        pass


class ChildProcess:
    """A child process with a log file, a temp dir and a readiness check."""

    name = "service"
    start_timeout = 30.0

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.tmpdir = Path(tempfile.mkdtemp(prefix=f"ragdrift-{self.name}-"))
        self.log_path = self.tmpdir / f"{self.name}.log"
        self._log_file: BinaryIO | None = None

    # subclasses implement
    def command(self) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def ready(self) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def env(self) -> dict[str, str] | None:
        return None

    # lifecycle
    def start(self) -> Self:
        if self.proc is not None:
            return self
        cmd = self.command()
        self._log_file = open(self.log_path, "wb")  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                env=self.env(),
                start_new_session=True,  # own process group: killpg on stop
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            self._close_log()
            raise ServiceError(f"cannot start {self.name}: {cmd[0]}: {exc}") from exc
        _LIVE.add(self)
        try:
            wait_until(self._ready_or_dead, self.start_timeout, 0.05, f"{self.name} ready")
        except BaseException as exc:
            log = self.log_tail()
            rc = self.proc.poll()
            self.stop(keep_files=True)  # leave the log for the reader
            raise ServiceError(
                f"{self.name} did not become ready (exit code {rc}): {exc}\n"
                f"command: {' '.join(cmd)}\n--- {self.log_path} ---\n{log}"
            ) from exc
        return self

    def _ready_or_dead(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise StopWaiting(f"{self.name} exited with code {self.proc.returncode}")
        return self.ready()

    def log_tail(self, max_bytes: int = 8000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return "<no log>"
        return data[-max_bytes:].decode("utf-8", "replace")

    def stop(self, keep_files: bool = False) -> None:
        _LIVE.discard(self)
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=5 if sig == signal.SIGTERM else 10)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if proc is not None:
            # reap, whatever happened above
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
        self._close_log()
        if not keep_files:
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL the service (a crash, for fault tests); keeps the log."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self) -> None:  # last resort: never leak a child
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

