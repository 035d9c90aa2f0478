"""`ragdrift demo` end to end: starts, processes live traffic, stops cleanly
on Ctrl-C and on SIGTERM, whatever signal disposition it inherited."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from datetime import UTC, datetime

import pytest
import yaml

from agent.demo.process import _port_open, free_port, wait_until
from agent.demo.retriever import QUERIES, Helpdesk
from tests.agentctl import ROOT
from tests.services import http_get

pytestmark = pytest.mark.broker


def _ignore_sigint() -> None:
    """As a shell starts a background job, or a process manager its children."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(("stop_with", "sigint_ignored"), [
    pytest.param(signal.SIGINT, False, id="ctrl-c"),
    pytest.param(signal.SIGTERM, True, id="sigterm-with-sigint-ignored"),
    pytest.param(signal.SIGINT, True, id="sigint-though-inherited-ignored"),
])
def test_demo_runs_and_leaves_nothing_behind(tansu_bin, tmp_path, stop_with, sigint_ignored):
    port = free_port()
    out = tmp_path / "demo.out"
    preexec = _ignore_sigint if sigint_ignored else None
    with open(out, "wb") as sink:
        demo = subprocess.Popen(
            [sys.executable, "-m", "agent.cli", "demo", "--port", str(port), "--rate", "200",
             "--dir", str(tmp_path / "demo")],
            stdout=sink, stderr=subprocess.STDOUT, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
            preexec_fn=preexec,
        )
    try:
        def processed() -> float:
            text = http_get(f"http://127.0.0.1:{port}/metrics", timeout=2).decode()
            match = re.search(r'^ragdrift_events_total\{outcome="processed"\} (\S+)$', text, re.M)
            return float(match.group(1)) if match else 0.0

        wait_until(lambda: processed() > 100, 60, 0.2, "demo traffic processed")
        broker = re.search(r"broker \(tansu\) at 127\.0\.0\.1:(\d+)", out.read_text())
        assert broker, out.read_text()
        demo.send_signal(stop_with)
        assert demo.wait(20) == 0, out.read_text()
    finally:
        if demo.poll() is None:
            demo.kill()
    text = out.read_text()
    assert f"http://127.0.0.1:{port}/metrics" in text
    assert "ragdrift demo: stopped" in text
    assert not _port_open("127.0.0.1", int(broker.group(1))), "the demo left its broker running"
    assert not _port_open("127.0.0.1", port), "the demo left its metrics endpoint open"


def test_a_judgment_batch_of_the_demo_traffic(tansu_bin, tmp_path):
    """The README's walk: run the demo, stop it, build a batch from what it stored, with the app's texts."""
    port = free_port()
    directory = tmp_path / "demo"
    with open(tmp_path / "demo.out", "wb") as sink:
        demo = subprocess.Popen(
            [sys.executable, "-m", "agent.cli", "demo", "--port", str(port), "--rate", "300", "--dir", str(directory)],
            stdout=sink, stderr=subprocess.STDOUT, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
    try:
        def checkpointed() -> float:
            text = http_get(f"http://127.0.0.1:{port}/metrics", timeout=2).decode()
            match = re.search(r'^ragdrift_checkpoints_total\{outcome="ok"\} (\S+)$', text, re.M)
            return float(match.group(1)) if match else 0.0

        wait_until(lambda: checkpointed() >= 3, 90, 0.2, "demo checkpoints")
        demo.send_signal(signal.SIGINT)
        assert demo.wait(20) == 0
    finally:
        if demo.poll() is None:
            demo.kill()
    week = re.search(r"--week (\d{4}-W\d{2})", (tmp_path / "demo.out").read_text()).group(1)
    built = subprocess.run(
        [sys.executable, "-m", "agent.cli", "batch", "build", "--config", str(directory / "ragdrift.yaml"),
         "--week", week, "--partial", "--format", "label-studio"],
        capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120,
    )
    assert built.returncode == 0, built.stderr
    batch = next((directory / "batches").iterdir())
    assert sorted(p.name for p in batch.iterdir()) == ["items.csv", "items.jsonl", "key.jsonl", "label-studio",
                                                       "manifest.json", "regression.jsonl"]
    # The demo's events are the producer library's: its recorder kept the app's texts, the resolver reads them.
    config = yaml.safe_load((directory / "ragdrift.yaml").read_text())
    assert config["judgment"]["resolver"] == {"kind": "file", "path": str((directory / "texts.jsonl").resolve())}
    app = Helpdesk(datetime.now(UTC))
    chunk_texts = {c.id: c.text for c in app.chunks}
    items = [json.loads(line) for line in (batch / "items.jsonl").read_text().splitlines()]
    assert items and all(i["query"]["text"] in {text for text, _ in QUERIES} for i in items)
    assert all(c["text"] == chunk_texts[c["chunk_id"]] for i in items for c in i["chunks"])
    key = (batch / "key.jsonl").read_text()
    assert not any(i["query"]["text"] in key for i in items)
    tasks = json.loads((batch / "label-studio" / "tasks.json").read_text())
    assert [t["data"]["item"] for t in tasks] == [i["item"] for i in items]
    assert f"{len(items)} items for {week}" in built.stdout
