"""`ragdrift judgments report` on real batch directories recorded in a real SQLite store
with their labels as qrels: the table, Markdown and JSON renderings of the core's
figures, several weeks, the PNG plots, and one-line errors."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import msgspec
import pytest
import yaml

from agent.cli import main
from agent.core import escape
from agent.core.batch import BatchConfig, build
from agent.core.judgments.judged import Judged
from agent.core.judgments.labels import Label
from agent.core.judgments.report import Options
from agent.core.sampling import UNIFORM, Candidate, ResultRef, uniform
from agent.io.files import batch_files
from agent.io.settings.agent import load
from agent.io.store.database import Store
from agent.io.store.qrels import TABLES as QRELS
from agent.io.store.qrels import Qrels
from agent.io.store.queue import TABLES as QUEUE
from agent.io.store.queue import Queue
from agent.jobs.report import reports

CONFIG = BatchConfig(budgets={UNIFORM: 6}, default_budget=4, double_judged_share=0.3, salt="s")


def week_candidates(week: str) -> list[Candidate]:
    out = []
    for n in range(30):
        event_id, query_type = f"{week}-e{n:02d}", ("lexical", "semantic")[n % 2]
        results = tuple(ResultRef(f"c{n}-{r}", "p", "wiki", r, 1.0 - r / 8, age_days=20.0 * n,
                                  cited=(r == 1) if n % 2 else None)  # odd events report citations
                        for r in range(1, 1 + n % 4))  # n % 4 == 0: none
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
            labels.append(Label(batch_id=batch.batch_id, item=row["item"], chunk=c["chunk"], judge="ann", grade=3 if c["rank"] == 1 else 0,
                                tags=("stale",) if c["rank"] == 3 else ()))
            if row["judges"] == 2:
                labels.append(Label(batch_id=batch.batch_id, item=row["item"], chunk=c["chunk"], judge="bob", grade={1: 3, 2: 2}.get(c["rank"], 0)))
    return labels


@pytest.fixture
def batches(tmp_path) -> list[Judged]:
    out = []
    for week in ("2026-W47", "2026-W48"):
        batch = build(week, week_candidates(week), CONFIG)
        manifest, key = batch_files.read_batch(batch_files.write(tmp_path / "batches", batch, batch.items))
        out.append(Judged(manifest, key, labels_for(batch)))
    return out


def stored(tmp_path, batches: list[Judged]):
    """A config whose new SQLite store records `batches` (built in this order, written
    under tmp_path/batches) and holds their labels."""
    db = Path(tempfile.mkdtemp(dir=tmp_path)) / "state.db"
    config = db.with_name("ragdrift.yaml")
    config.write_text(yaml.safe_dump({"store": {"url": f"sqlite:///{db}"}}))
    settings = load(config)
    with Store(settings.store.url, None, (*QUEUE, *QRELS)) as store:
        for built_at, b in enumerate(batches):
            batch_id = b.manifest["batch_id"]
            Queue(store).record_batch(settings.kafka.group_id, b.manifest["week"], batch_id, float(built_at),
                                      len(b.key), str(tmp_path / "batches" / batch_id))
            Qrels(store).add(b.labels, "test")
    return config


def report_cli(capsys, tmp_path, batches, *args):
    """`ragdrift judgments report ARGS` over a store holding `batches`: (status, stdout, stderr)."""
    status = main(["judgments", "report", "--config", str(stored(tmp_path, batches)), *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_json_is_the_cores_figures_one_report_per_line(capsys, tmp_path, batches):
    status, out, _ = report_cli(capsys, tmp_path, batches, "--weeks", "2", "--format", "json", "--resamples", "100")
    assert status == 0
    lines = out.splitlines()
    assert len(lines) == 2
    expected = reports(batches, Options(resamples=100))
    assert [json.loads(line) for line in lines] == json.loads(json.dumps(expected))
    assert [json.loads(line)["week"] for line in lines] == ["2026-W47", "2026-W48"]


def test_the_table_shows_every_section_and_the_policy(capsys, tmp_path, batches):
    status, out, _ = report_cli(capsys, tmp_path, batches, "--resamples", "100")
    assert status == 0
    newest = reports(batches[-1:], Options(resamples=100))[0]
    precision = newest["views"][0]["metrics"]["precision"]  # traffic, all
    assert out.startswith(f"Judgment report {newest['batch_id']} (2026-W48)")
    assert f"{precision['estimate']:.3f} [{precision['low']:.3f}, {precision['high']:.3f}] n={precision['n']}" in out
    for text in ("relevance  ", "mean grade >= 2", "Counts", "Metrics", "Traffic precision by query_type, worst first",
                 "Agreement: linear-weighted kappa", "Judged tags", "Tags the agent's checks missed",
                 "Calibration", "judges only", "Traffic precision by content_age, worst first", "30-180 d",
                 "Citations: judged chunks of the", "answer-supported"):
        assert text in out, text
    assert "2026-W47" not in out  # the newest batch only


def test_markdown_and_one_batch_by_id(capsys, tmp_path, batches):
    first = batches[0].manifest["batch_id"]
    status, out, _ = report_cli(capsys, tmp_path, batches, "--batch", first, "--format", "md", "--resamples", "50",
                                "--relevance-threshold", "1", "--gain", "linear")
    assert status == 0
    assert out.startswith(f"### Judgment report {escape.markdown(first)} (2026\\-W47)")  # input texts, escaped
    assert "| policy | value |" in out and "| gain | linear |" in out and "| relevance | mean grade >= 1 |" in out
    assert "app\\|lexical" in out  # a stratum's bar is escaped in a Markdown cell


def test_plots_are_pngs(capsys, batches, tmp_path):
    import matplotlib.image

    status, _, err = report_cli(capsys, tmp_path, batches, "--weeks", "2", "--plots", str(tmp_path / "plots"),
                                "--resamples", "50")
    assert status == 0
    for name in ("precision-weeks.png", "reliability.png"):
        path = tmp_path / "plots" / name
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"wrote {path}" in err
        height, width, _ = matplotlib.image.imread(path).shape
        assert height > 100 and width > 100


def test_errors_are_one_line(capsys, tmp_path, batches):
    status, _, err = report_cli(capsys, tmp_path, batches, "--batch", "2026-W01-nothere")
    assert status == 2 and err == "ragdrift: error: no batch 2026-W01-nothere\n"
    status, _, err = report_cli(capsys, tmp_path, [], "--format", "json")
    assert status == 2 and "no judgment batch yet" in err
    status, _, err = report_cli(capsys, tmp_path, batches, "--weeks", "0")
    assert status == 2 and err == "ragdrift: error: --weeks must be at least 1, got 0\n"
    with pytest.raises(SystemExit) as usage:  # argparse's own usage error
        report_cli(capsys, tmp_path, batches, "--relevance-threshold", "nan")
    err = capsys.readouterr().err
    assert usage.value.code == 2 and "--relevance-threshold: not a finite number: 'nan'" in err
    first = batches[0].manifest["batch_id"]
    wrong = Judged(batches[0].manifest, batches[0].key, [Label(batch_id=first, item="x-0001", chunk="x-0001-1", judge="ann", grade=2)])
    status, _, err = report_cli(capsys, tmp_path, [wrong])
    assert status == 2 and "does not hold" in err and len(err.splitlines()) == 1


def test_plots_without_matplotlib_name_the_extra(capsys, batches, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the `plots` extra were not installed
    status, _, err = report_cli(capsys, tmp_path, batches, "--plots", str(tmp_path / "plots"))
    assert status == 2 and err == "ragdrift: error: --plots needs matplotlib: pip install 'ragdrift-agent[plots]'\n"
    assert not (tmp_path / "plots").exists()


FORGED = "x\n**verdict: pass**\n<!--\x1b[2J |*_`[a](b)# $\\frac{$"  # a line, a comment hiding the rest, bad mathtext
PRINTED = "<!-- **verdict: pass** |*_`[a](b)#"  # a judge name the importer takes: printable


def test_input_texts_cannot_forge_the_report(capsys, tmp_path):
    """Strata, slice values and event ids from the batch's key, its manifest's week, a judge name imported
    by `ragdrift judgments import` and one with control characters (and a tag) in the store hold newlines,
    markup and an escape sequence: each stays on its line, as text; JSON stays JSON; the plots draw it."""
    week = "2026-W48"
    candidates = [msgspec.structs.replace(c, event_id=f"{FORGED}{c.event_id}", app=FORGED, language=FORGED,
                                          pipeline_version=FORGED, stratum=c.stratum.replace("app|", FORGED + "|"))
                  for c in week_candidates(week)]
    batch = build(week, candidates, CONFIG)
    directory = batch_files.write(tmp_path / "batches", batch, batch.items)
    manifest, key = batch_files.read_batch(directory)
    (Path(directory) / "manifest.json").write_text(json.dumps({**manifest, "week": FORGED}))
    labels = [msgspec.structs.replace(x, judge=FORGED, tags=(*x.tags, FORGED)) if x.judge == "bob" else x
              for x in labels_for(batch)]
    config = stored(tmp_path, [Judged({**manifest, "week": week}, key, labels)])
    judged = tmp_path / "judged.jsonl"
    judged.write_text("".join(json.dumps({"item": x.item, "chunk": x.chunk, "judge": PRINTED, "grade": 3 - x.grade})
                              + "\n" for x in labels if x.judge == "ann"))
    assert main(["judgments", "import", str(judged), "--config", str(config)]) == 0
    capsys.readouterr()
    for fmt, text, row in (("md", escape.markdown, "\n| "), ("table", escape.plain, "\n")):
        assert main(["judgments", "report", "--config", str(config), "--format", fmt, "--resamples", "20"]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and not any(line.startswith(("**verdict", "<!--")) for line in out.splitlines())
        for shown in (f"Judgment report {text(batch.batch_id)} ({text(FORGED)})", f" {text(FORGED)}{text('|')}lexical ",
                      f"{row}{text(FORGED)} ", f"{text(PRINTED)}=", f"{text(FORGED)}=", text(f"{FORGED}{week}-e")):
            assert shown in out, (fmt, shown)
        if fmt == "md":
            assert "<!--" not in out and "**" not in out and "`" not in out.replace("\\`", "")
    assert main(["judgments", "report", "--config", str(config), "--format", "json", "--resamples", "20",
                 "--plots", str(tmp_path / "plots")]) == 0
    assert {p.name for p in (tmp_path / "plots").iterdir()} == {"precision-weeks.png", "reliability.png"}
    found = json.loads(capsys.readouterr().out)
    assert found["week"] == FORGED and any(FORGED in d["grades"] for d in found["agreement"]["disagreements"])
