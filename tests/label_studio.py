"""A real Label Studio for tests: the ``label_studio`` fixture and its server.

Label Studio (~1 GB of Django) lives in its own virtual environment, never
in the project's: ``.ci/label-studio`` installs label-studio 1.23.2 into
``$LABEL_STUDIO_VENV`` (default ``~/.cache/ragdrift/label-studio-venv``).
``make test`` runs it first (``make tools``). When it is missing, a test using
the fixture FAILS in CI (``CI=true``) and skips elsewhere, saying to run that script.

The server runs the README's ``label-studio start`` command, with the
settings it sets (Sentry error reports and usage analytics off) and no other
``LABEL_STUDIO_*`` variable of the caller's: its own free port, a fresh data
directory (``LABEL_STUDIO_BASE_DATA_DIR`` in its temp dir) and one user whose
legacy API token is set with ``--user-token`` and enabled for its
organization with ``--enable-legacy-api-token`` (since 1.17 legacy tokens are
off by default per organization). Nothing else: every test that uses the
server shows the README's command works as written.

    from tests.label_studio import LabelStudioServer
    with LabelStudioServer() as server:
        client = server.client()        # agent.io.label_studio.client.LabelStudio
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shlex
import time
import urllib.error
from pathlib import Path

import pytest

from agent.io.label_studio.client import LabelStudio, LabelStudioError
from tests.services import ChildProcess, Missing, ServiceError, free_port, http_get, unavailable

VERSION = "1.23.2"
INSTALL_HINT = "run .ci/label-studio to install it"
MISSING = Missing("label-studio", "make tools", root=False)
ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints" / "label-studio.txt"
STAMP = ".ragdrift-constraints"  # .ci/label-studio writes the constraints' SHA-256 here


def venv() -> Path:
    default = Path.home() / ".cache" / "ragdrift" / "label-studio-venv"
    return Path(os.environ.get("LABEL_STUDIO_VENV") or default)


class LabelStudioMissing(ServiceError):
    """label-studio is not installed at the pinned version (as against failing to start)."""


def label_studio_bin() -> str:
    """The ``label-studio`` executable at the pinned version, or LabelStudioMissing."""
    where = venv()
    exe = where / "bin" / "label-studio"
    if not exe.is_file():
        raise LabelStudioMissing(f"label-studio is not installed in {where}: {INSTALL_HINT}")
    found = sorted(p.name for p in where.glob("lib/python*/site-packages/label_studio-*.dist-info"))
    if f"label_studio-{VERSION}.dist-info" not in found:
        raise LabelStudioMissing(f"{where} holds {found or 'no label_studio'}, not label-studio {VERSION}: "
                           f"{INSTALL_HINT}")
    stamp = where / STAMP
    if not stamp.is_file() or stamp.read_text().strip() != hashlib.sha256(CONSTRAINTS.read_bytes()).hexdigest():
        raise LabelStudioMissing(f"{where} was not installed with the current {CONSTRAINTS.relative_to(ROOT)}: "
                                 f"{INSTALL_HINT}")
    return str(exe)


def installed() -> Path:
    """The venv .ci/label-studio installs; when it is not there, the test fails in CI and skips elsewhere."""
    reason = None
    try:
        label_studio_bin()
    except LabelStudioMissing as exc:
        reason = str(exc)
    if reason is not None:  # outside the except block: no chained traceback in the report
        unavailable(reason, MISSING)
    return venv()


def readme_command() -> tuple[dict[str, str], list[str]]:
    """The README's ``label-studio start`` command as a shell reads it: the variables it sets, then its words."""
    lines = (ROOT / "README.md").read_text().splitlines()
    first = last = next(i for i, line in enumerate(lines) if "label-studio start" in line)
    while lines[first - 1].endswith("\\"):
        first -= 1
    while lines[last].endswith("\\"):
        last += 1
    words = shlex.split(" ".join(line.removesuffix("\\") for line in lines[first:last + 1]))
    settings = {}
    while re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        settings[name] = value
    return settings, words


class LabelStudioServer(ChildProcess):
    """The README's ``label-studio start`` with one user and a known legacy token."""

    name = "label-studio"
    start_timeout = 120.0  # ~20-30 s on two cores: migrations run on every fresh data dir

    def __init__(self, binary: str | None = None, port: int | None = None) -> None:
        self.binary = binary or label_studio_bin()  # before the temp dir exists
        super().__init__()
        self.port = port or free_port()
        self.username = "judge@ragdrift.test"
        self.password = secrets.token_hex(16)  # never a leading "-", which argparse would take for an option
        self.token = secrets.token_hex(20)  # the legacy token format: 40 hex characters
        self.started_in: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        words = [self.binary, *readme_command()[1][1:]]
        for option, value in (("--port", str(self.port)), ("--username", self.username),
                              ("--password", self.password), ("--user-token", self.token)):
            words[words.index(option) + 1] = value
        return words

    def env(self) -> dict[str, str]:
        # Label Studio reads LABEL_STUDIO_X, then HEARTEX_X, then X: the caller's own go, the README's are read first
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LABEL_STUDIO_", "HEARTEX_"))}
        env.update(readme_command()[0])
        env["LABEL_STUDIO_BASE_DATA_DIR"] = str(self.tmpdir / "data")
        return env

    def ready(self) -> bool:
        try:
            return b'"UP"' in http_get(self.url + "/health", timeout=1)
        except (urllib.error.URLError, OSError):
            return False

    def start(self) -> LabelStudioServer:
        t0 = time.monotonic()
        super().start()
        self.started_in = time.monotonic() - t0
        try:  # the token must work, not just the server answer
            self.client()._call("GET", "/api/current-user/whoami")
        except LabelStudioError as exc:
            log = self.log_tail()
            self.stop(keep_files=True)
            raise ServiceError(f"label-studio is up but its API token is refused: {exc}\n"
                               f"--- {self.log_path} ---\n{log}") from None
        return self

    def client(self) -> LabelStudio:
        return LabelStudio(self.url, self.token)


def started() -> LabelStudioServer:
    """A started ``LabelStudioServer``; when it cannot start, the test fails in CI and skips elsewhere."""
    server, reason, missing = None, None, None
    try:
        server = LabelStudioServer().start()
    except ServiceError as exc:
        reason, missing = str(exc), MISSING if isinstance(exc, LabelStudioMissing) else None
    if server is None:  # outside the except block: no chained traceback in the report
        unavailable(reason, missing)
    return server


@pytest.fixture(scope="session", name="label_studio")
def label_studio_fixture():
    """A started ``LabelStudioServer`` (``.url``, ``.token``, ``.client()``), one per session."""
    server = started()
    try:
        yield server
    finally:
        server.stop()
