"""Build and run the project's container image with rootful podman.

No container registry is reachable from CI, so the Dockerfile's base image
is made here: ``mmdebstrap`` installs Debian bookworm's Python 3.11 from the
host's Debian mirror into a tarball, which podman imports under the name the
Dockerfile's ``FROM`` uses. That base is kept between runs (a tag check);
the project's image is built from the current tree every time.

Storage lives in ``~/.cache/ragdrift/containers`` (``--root``/``--runroot``),
never in the system's podman store. Builds use ``--isolation chroot`` and the
host network, with the host's CA bundle and pip index mounted, so pip reaches
PyPI as it does on the host. Containers run with runc and the cgroupfs
manager (no systemd here).

When podman, runc or mmdebstrap is missing, a test using the ``podman``
fixture FAILS in CI (``CI=true``) and skips elsewhere, naming the install
command.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.services import apt, unavailable

ROOT = Path(__file__).resolve().parent.parent
INSTALL_HINT = "apt-get install podman runc mmdebstrap"
STORE = Path.home() / ".cache" / "ragdrift" / "containers"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
MIRROR_SUITES = ("bookworm", "bookworm-updates")
# What the base needs beyond Debian's minimal system: the interpreter, venv
# (ensurepip) for the build stage, useradd, and the CA bundle at run time.
BASE_PACKAGES = ("python3", "python3-venv", "passwd", "ca-certificates")
# Modest limits, capped by this process's own: runc refuses a limit it cannot
# set (here even the host's own process limit).
NOFILE, NPROC = 4096, 1024


class PodmanError(AssertionError):
    """podman exited non-zero; the message carries its output."""


def base_image() -> str:
    """The image the Dockerfile builds FROM, as podman names it locally."""
    (name,) = set(re.findall(r"^FROM\s+(\S+)", (ROOT / "Dockerfile").read_text(), re.M))
    return name if "/" in name else f"docker.io/library/{name}"


def debian_mirrors() -> tuple[str, str]:
    """The host's Debian and security mirror URIs (deb822 or one-line sources)."""
    apt = Path("/etc/apt")
    files = [apt / "sources.list", *apt.glob("sources.list.d/*.list"), *apt.glob("sources.list.d/*.sources")]
    text = "\n".join(f.read_text() for f in files if f.is_file())
    uris = re.findall(r"^(?:URIs:|deb(?:\s+\[[^\]]*\])?)\s+(\S+)", text, re.M)
    security = next((u for u in uris if u.rstrip("/").endswith("debian-security")), None)
    main = next((u for u in uris if u != security), None)
    return main or "http://deb.debian.org/debian", security or "http://deb.debian.org/debian-security"


def host_limits() -> list[str]:
    """``--ulimit`` flags at or below this process's own limits."""
    flags = []
    for name, kind, want in (("nofile", resource.RLIMIT_NOFILE, NOFILE), ("nproc", resource.RLIMIT_NPROC, NPROC)):
        soft, _ = resource.getrlimit(kind)
        value = want if soft == resource.RLIM_INFINITY else min(want, soft)
        flags += ["--ulimit", f"{name}={value}:{value}"]
    return flags


@pytest.fixture(scope="session", name="podman")
def podman_fixture() -> Podman:
    """A podman with its store under ~/.cache/ragdrift/containers."""
    missing = [b for b in ("podman", "runc", "mmdebstrap") if not shutil.which(b)]
    if missing:
        unavailable(f"{', '.join(missing)} not on PATH: {INSTALL_HINT}", apt(*missing))
    return Podman(STORE)


class Podman:
    """Rootful podman over a private store, with runc and the cgroupfs manager."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.prefix = ["podman", "--root", str(store / "storage"), "--runroot", str(store / "run"),
                       "--storage-driver", "overlay", "--runtime", "runc", "--cgroup-manager", "cgroupfs"]

    def run(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        done = subprocess.run([*self.prefix, *args], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        if check and done.returncode != 0:
            output = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            raise PodmanError(f"podman {args[0]} exited {done.returncode}:\n{output}")
        return done

    def has_image(self, name: str) -> bool:
        return self.run("image", "exists", name, check=False).returncode == 0

    def ensure_base(self) -> str:
        """The Dockerfile's base image: made from Debian packages once, then reused."""
        name = base_image()
        if self.has_image(name):
            return name
        main, security = debian_mirrors()
        sources = [f"deb {main} {suite} main" for suite in MIRROR_SUITES]
        sources.append(f"deb {security} bookworm-security main")
        tarball = self.store / "base.tar"
        self.store.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(
                ["mmdebstrap", "--variant=minbase", "--quiet", f"--include={','.join(BASE_PACKAGES)}",
                 "--aptopt=APT::Install-Recommends \"false\"", "bookworm", str(tarball), *sources],
                capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
            )
            if done.returncode != 0:
                raise PodmanError(f"mmdebstrap exited {done.returncode}:\n{done.stderr[-3000:]}")
            self.run("import", "--change", "ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                     "--change", 'CMD=["python3"]', str(tarball), name)
        finally:
            tarball.unlink(missing_ok=True)
        return name

    def build(self, tag: str, workdir: Path) -> None:
        """Build the project's image from the tree at ROOT, offline but for PyPI.

        No layer cache: every run installs from PyPI as a real build would, and
        the image it replaces is pruned, so the store holds one build.
        """
        pip_conf = workdir / "pip.conf"
        pip_conf.write_text(f"[global]\ncert = /etc/ssl/certs/host-ca.crt\nindex-url = {pip_index()}\n")
        self.run("build", "--isolation", "chroot", "--network", "host", "--pull=never", "--layers=false",
                 "--volume", f"{HOST_CA}:/etc/ssl/certs/host-ca.crt:ro",
                 "--volume", f"{pip_conf}:/etc/pip.conf:ro",
                 "--tag", tag, str(ROOT), timeout=900)
        self.run("image", "prune", "--force")


def pip_index() -> str:
    """The index pip uses on this host (its environment, then its config), PyPI by default."""
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    done = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "https://pypi.org/simple"
