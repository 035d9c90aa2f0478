"""`ragdrift demo` checks every argument before it starts anything: a bad one is one line and exit 2,
with no broker started (it once started the broker and the agent, then a bad rate killed the traffic
thread and the demo idled for ever). Needs no broker: these must stop before one is looked for."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.agentctl import ROOT


def demo(*args: str) -> subprocess.CompletedProcess:
    # The timeout only ends a demo that did start (the bug): the assertions are on its output.
    return subprocess.run([sys.executable, "-m", "agent.cli", "demo", "--port", "0", *args], capture_output=True,
                          text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)


@pytest.mark.parametrize(("args", "message"), [
    (["--rate", "0"], "ragdrift: error: --rate 0: expected events per second from 0.01 to 100000"),
    (["--rate", "-5"], "ragdrift: error: --rate -5: expected events per second from 0.01 to 100000"),
    (["--rate", "1e-300"], "ragdrift: error: --rate 1e-300: expected events per second from 0.01 to 100000"),
    (["--rate", "nan"], "ragdrift demo: error: argument --rate: not a finite number: 'nan'"),
    (["--rate", "inf"], "ragdrift demo: error: argument --rate: not a finite number: 'inf'"),
    (["--minutes", "-1"], "ragdrift: error: --minutes -1: expected 0 (until Ctrl-C) or more"),
    (["--minutes", "nan"], "ragdrift demo: error: argument --minutes: not a finite number: 'nan'"),
    (["--dir", ""], "ragdrift: error: --dir: expected a directory path"),
])
def test_a_bad_argument_is_one_line_and_exit_2_before_anything_starts(tmp_path, args, message):
    done = demo("--dir", str(tmp_path / "demo"), *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(message) and done.stderr.count("\n") == 1, done.stderr
    assert "broker" not in done.stdout and not (tmp_path / "demo").exists()


def test_a_file_named_as_the_directory_is_one_line_and_exit_2(tmp_path):
    taken = tmp_path / "notes.txt"
    taken.write_text("mine\n")
    done = demo("--dir", str(taken))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == f"ragdrift: error: --dir '{taken}': cannot make the directory: File exists\n"
    assert "broker" not in done.stdout and taken.read_text() == "mine\n"


def test_without_the_producer_library_one_line_says_what_to_install(tmp_path):
    hidden = "import sys; sys.modules['ragdrift_producer'] = None; from agent.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", hidden, "demo", "--port", "0", "--dir", str(tmp_path / "demo")],
                          capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == ("ragdrift: error: the demo's app needs the producer library, which is not installed: "
                           "pip install ./producer\n")
    assert "broker" not in done.stdout and not (tmp_path / "demo").exists()
