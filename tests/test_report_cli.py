"""`ragdrift judgments report` through `add_report`, on real batch directories: the table,
Markdown and JSON renderings of the core's figures, several weeks, the PNG plots, and
one-line errors. The loader is the seam the store fills in (batches and latest labels)."""

from __future__ import annotations

import argparse
import json
import sys

import pytest

from agent.cli.common import UsageError
from agent.cli.report import add_report
from agent.core.batch import BatchConfig, build
from agent.core.judgments.labels import Label
from agent.core.judgments.report import Options
from agent.core.sampling import UNIFORM, Candidate, uniform
from agent.io import export
from agent.jobs.report import Judged, read_batch, reports

CONFIG = BatchConfig(budgets={UNIFORM: 6}, default_budget=4, double_judged_share=0.3, salt="s")


def week_candidates(week: str) -> list[Candidate]:
    out = []
    for n in range(30):
        event_id, query_type = f"{week}-e{n:02d}", ("lexical", "semantic")[n % 2]
        results = tuple((f"c{n}-{r}", "p", "wiki", r, 1.0 - r / 8) for r in range(1, 1 + n % 4))  # n % 4 == 0: none
        u = uniform(event_id, week, "s")
        for stratum, w in ((f"app|{query_type}", 1.0 + n % 3), (UNIFORM, 1.0)):
            out.append(Candidate(event_id=event_id, ts=0.0, week=week, stratum=stratum, app="app",
                                 query_id=f"q{n}", query_type=query_type, language="en", cutoff_k=3,
                                 pipeline_version="v1", results=results, w=w, u=u, priority=w / u,
                                 signals=("low_top1",) if n % 3 else ()))
    return out


def labels_for(batch) -> list[Label]:
    """Rank 1 relevant, the rest not; the second judge of a double-judged item grades rank 2 a 2."""
    labels = []
    for row in batch.key:
        for c in row["chunks"] if row["item"] else ():
            labels.append(Label(batch.batch_id, row["item"], c["chunk"], "ann", 3 if c["rank"] == 1 else 0,
                                ("stale",) if c["rank"] == 3 else ()))
            if row["judges"] == 2:
                labels.append(Label(batch.batch_id, row["item"], c["chunk"], "bob", {1: 3, 2: 2}.get(c["rank"], 0)))
    return labels


@pytest.fixture
def batches(tmp_path) -> list[Judged]:
    out = []
    for week in ("2026-W47", "2026-W48"):
        batch = build(week, week_candidates(week), CONFIG)
        manifest, key = read_batch(export.write(tmp_path / "batches", batch, batch.items))
        out.append(Judged(manifest, key, labels_for(batch)))
    return out


def report_cli(capsys, batches, *args):
    """`judgments report ARGS` with a loader over `batches`: (status, stdout, stderr)."""
    def load(config, batch, weeks):
        if batch is not None:
            return [b for b in batches if b.manifest["batch_id"] == batch]
        return batches[-weeks:]

    parser = argparse.ArgumentParser(prog="ragdrift")
    group = parser.add_subparsers().add_parser("judgments")
    add_report(group.add_subparsers(), load)
    parsed = parser.parse_args(["judgments", "report", *args])
    try:
        status = parsed.handler(parsed)
    except UsageError as exc:
        print(f"ragdrift: error: {exc}")
        status = 2
    out, err = capsys.readouterr()
    return status, out, err


def test_json_is_the_cores_figures_one_report_per_line(capsys, batches):
    status, out, _ = report_cli(capsys, batches, "--weeks", "2", "--format", "json", "--resamples", "100")
    assert status == 0
    lines = out.splitlines()
    assert len(lines) == 2
    expected = reports(batches, Options(resamples=100))
    assert [json.loads(line) for line in lines] == json.loads(json.dumps(expected))
    assert [json.loads(line)["week"] for line in lines] == ["2026-W47", "2026-W48"]


def test_the_table_shows_every_section_and_the_policy(capsys, batches):
    status, out, _ = report_cli(capsys, batches, "--resamples", "100")
    assert status == 0
    newest = reports(batches[-1:], Options(resamples=100))[0]
    precision = newest["views"][0]["metrics"]["precision"]  # traffic, all
    assert out.startswith(f"Judgment report {newest['batch_id']} (2026-W48)")
    assert f"{precision['estimate']:.3f} [{precision['low']:.3f}, {precision['high']:.3f}] n={precision['n']}" in out
    for text in ("relevance  ", "mean grade >= 2", "Counts", "Metrics", "Traffic precision by query_type, worst first",
                 "Agreement: linear-weighted kappa", "Judged tags", "Tags the agent's checks missed",
                 "Calibration", "judges only"):
        assert text in out, text
    assert "2026-W47" not in out  # the newest batch only


def test_markdown_and_one_batch_by_id(capsys, batches):
    first = batches[0].manifest["batch_id"]
    status, out, _ = report_cli(capsys, batches, "--batch", first, "--format", "md", "--resamples", "50",
                                "--relevance-threshold", "1", "--gain", "linear")
    assert status == 0
    assert out.startswith(f"### Judgment report {first} (2026-W47)")
    assert "| policy | value |" in out and "| gain | linear |" in out and "| relevance | mean grade >= 1 |" in out
    assert "app\\|lexical" in out  # a stratum's bar is escaped in a Markdown cell


def test_plots_are_pngs(capsys, batches, tmp_path):
    import matplotlib.image

    status, _, err = report_cli(capsys, batches, "--weeks", "2", "--plots", str(tmp_path / "plots"),
                                "--resamples", "50")
    assert status == 0
    for name in ("precision-weeks.png", "reliability.png"):
        path = tmp_path / "plots" / name
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"wrote {path}" in err
        height, width, _ = matplotlib.image.imread(path).shape
        assert height > 100 and width > 100


def test_errors_are_one_line(capsys, batches):
    status, out, _ = report_cli(capsys, batches, "--batch", "2026-W01-nothere")
    assert status == 2 and out == "ragdrift: error: no batch 2026-W01-nothere\n"
    status, out, _ = report_cli(capsys, [], "--format", "json")
    assert status == 2 and "no judgment batch yet" in out
    status, out, _ = report_cli(capsys, batches, "--weeks", "0")
    assert status == 2 and out == "ragdrift: error: --weeks must be at least 1, got 0\n"
    wrong = Judged(batches[0].manifest, batches[0].key, [Label("x", "x-0001", "x-0001-1", "ann", 2)])
    status, out, _ = report_cli(capsys, [wrong])
    assert status == 2 and "does not hold" in out and len(out.splitlines()) == 1


def test_plots_without_matplotlib_name_the_extra(capsys, batches, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the `plots` extra were not installed
    status, out, _ = report_cli(capsys, batches, "--plots", str(tmp_path / "plots"))
    assert status == 2 and out == "ragdrift: error: --plots needs matplotlib: pip install 'ragdrift-agent[plots]'\n"
    assert not (tmp_path / "plots").exists()
