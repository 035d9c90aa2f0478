"""`ragdrift demo` end to end: starts, processes live traffic, stops cleanly on Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

from agent.io.embedded import _port_open, free_port, wait_until
from tests.agentctl import ROOT
from tests.services import http_get

pytestmark = pytest.mark.broker


def test_demo_runs_and_leaves_nothing_behind(tansu_bin, tmp_path):
    port = free_port()
    out = tmp_path / "demo.out"
    with open(out, "wb") as sink:
        demo = subprocess.Popen(
            [sys.executable, "-m", "agent.cli", "demo", "--port", str(port), "--rate", "200"],
            stdout=sink, stderr=subprocess.STDOUT, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
    try:
        def processed() -> float:
            text = http_get(f"http://127.0.0.1:{port}/metrics", timeout=2).decode()
            match = re.search(r'^ragdrift_events_total\{outcome="processed"\} (\S+)$', text, re.M)
            return float(match.group(1)) if match else 0.0

        wait_until(lambda: processed() > 100, 60, 0.2, "demo traffic processed")
        broker = re.search(r"broker \(tansu\) at 127\.0\.0\.1:(\d+)", out.read_text())
        assert broker, out.read_text()
        demo.send_signal(signal.SIGINT)
        assert demo.wait(20) == 0, out.read_text()
    finally:
        if demo.poll() is None:
            demo.kill()
    text = out.read_text()
    assert f"http://127.0.0.1:{port}/metrics" in text
    assert "ragdrift demo: stopped" in text
    assert not _port_open("127.0.0.1", int(broker.group(1))), "the demo left its broker running"
    assert not _port_open("127.0.0.1", port), "the demo left its metrics endpoint open"
