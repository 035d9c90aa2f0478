"""`ragdrift judgments pull` against a hostile server (tests/hostile_http.py):
whatever the server does, the command ends with one line naming the
problem and exit status 2, within its --timeout, and the token goes nowhere
but the configured origin."""

from __future__ import annotations

import pytest

from agent.cli import main
from tests.hostile_http import HostileServer

TOKEN = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "ragdrift.yaml"
    path.write_text(f"store: {{url: 'sqlite:///{tmp_path}/state.db'}}\n")
    return path


def pull(capsys, url: str, token_file, config, *extra: str) -> tuple[int, str]:
    code = main(["judgments", "pull", "--label-studio-url", url, "--project", "1", "--label-studio-token-file",
                 str(token_file), "--config", str(config), *extra])
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1, err  # one line, no traceback
    assert TOKEN not in err
    return code, err


def test_a_redirect_to_another_host_is_an_error_naming_it_and_the_token_stays_home(capsys, token_file, config):
    with HostileServer("redirect") as home:
        target = f"http://localhost:{home.port}/landed"  # the same server, under another name
        home.options["to"] = target
        code, err = pull(capsys, home.url, token_file, config)
    assert code == 2 and "another origin" in err and target in err
    assert [path for _, path, _ in home.requests] == ["/api/projects/1/export"]


def test_a_redirect_to_another_port_is_refused_too(capsys, token_file, config):
    with HostileServer() as away, HostileServer("redirect", to=f"{away.url}/landed") as home:
        code, err = pull(capsys, home.url, token_file, config)
    assert code == 2 and f"{away.url}/landed" in err and away.requests == []


def test_a_trickling_server_fails_the_pull_at_its_timeout(capsys, token_file, config):
    with HostileServer("trickle") as server:
        code, err = pull(capsys, server.url, token_file, config, "--timeout", "1")
    assert code == 2 and "no complete answer within the command's deadline of 1 s" in err


@pytest.mark.parametrize("behaviour", ["cut", "cut_chunked"])
def test_a_cut_off_export_is_one_line(capsys, token_file, config, behaviour):
    with HostileServer(behaviour) as server:
        code, err = pull(capsys, server.url, token_file, config)
    assert code == 2 and "cut off" in err and "/api/projects/1/export" in err


def test_a_deeply_nested_export_is_one_line(capsys, token_file, config):
    with HostileServer("nested", depth=200000) as server:
        code, err = pull(capsys, server.url, token_file, config)
    assert code == 2 and "nested too deeply" in err and "/api/projects/1/export" in err


def test_an_export_above_the_bound_says_how_to_proceed(capsys, token_file, config):
    with HostileServer("big", bytes=3000000) as server:
        code, err = pull(capsys, server.url, token_file, config, "--max-export-mb", "1")
    assert code == 2 and "larger than the limit of 1000000 bytes" in err and "--max-export-mb" in err


@pytest.mark.parametrize("content", [TOKEN + "\nsecond line\n", TOKEN + "\r\n" + TOKEN, "\n\n", TOKEN + "\x00"])
def test_a_token_file_that_is_not_one_line_is_one_line_without_the_token(capsys, tmp_path, config, content):
    bad = tmp_path / "bad-token"
    bad.write_text(content)
    with HostileServer() as server:
        code, err = pull(capsys, server.url, bad, config)
    assert code == 2 and str(bad) in err and server.requests == []
