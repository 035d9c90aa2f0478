"""The judgment report of one or more batches: read, computed, rendered as a table, Markdown or JSON.

The figures come from the core (agent/core/judgments/report.py); this module
reads a batch's manifest and key from its directory and lays the figures out.
The table and Markdown renderings share one layout: a list of sections, each
a title, a header and rows of text. Every text that comes from the batch's
files, its labels or the store (batch ids, weeks, strata, slice values, item,
chunk and event ids, judge names) is written through the format's escape
(agent/core/escape.py), so none adds a line, a control sequence or markup.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from agent.core import escape
from agent.core.judgments.judged import Judged
from agent.core.judgments.report import REPORT_METRICS, Options, report

TITLES = {"precision": "precision", "recall": "recall", "reciprocalRank": "MRR", "hitRate": "hit rate",
          "nDCG": "nDCG", "groupComplete": "group complete", "groupRecall": "recall (groups)",
          "answerSupported": "answer-supported"}


def reports(batches: Sequence[Judged], options: Options = Options()) -> list[dict]:
    return [report(b.manifest, b.key, b.labels, options) for b in batches]


def render(found: Sequence[dict], fmt: str) -> str:
    """The reports in `fmt`: JSON has one report per line."""
    if fmt == "json":
        return "".join(json.dumps(r, sort_keys=True) + "\n" for r in found)
    lay, text = (markdown, escape.markdown) if fmt == "md" else (table, escape.plain)
    return "\n".join(lay(title, header, rows) for r in found for title, header, rows in sections(r, text))


def sections(r: dict, text: Callable[[str], str]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every part of one report; `text` escapes what comes from the inputs."""

    def given(value: object) -> str:
        return text(str(value))

    c, a, policy = r["counts"], r["agreement"], r["policy"]
    out = [
        (f"Judgment report {given(r['batch_id'])} ({given(r['week'])})", ["policy", "value"],
         [[name, str(value)] for name, value in policy.items()]),
        ("Counts", ["count", "value"], [[name, str(value)] for name, value in c.items()]),
        ("Metrics (estimate, 95 % interval, items)", ["view", "stratum", "items", *(TITLES[m] for m in REPORT_METRICS)],
         [[v["view"], given(v["stratum"]), str(v["items"]), *(figure(v["metrics"][m]) for m in REPORT_METRICS)]
          for v in r["views"]]),
    ]
    for name, rows in r["slices"].items():
        out.append((f"Traffic precision by {name}, worst first", [name, "items", "precision"],
                    [[given(row["value"]), str(row["items"]), figure(row["precision"])] for row in rows]))
    cited = r["citations"]
    out.append((f"Citations: judged chunks of the {cited['items']} items that report them",
                ["chunks", "relevant", "irrelevant", "share relevant"],
                [[name, str(cited[name]["relevant"]), str(cited[name]["irrelevant"]), share(**cited[name])]
                 for name in ("cited", "uncited")]))
    kappa = "n/a" if a["kappa"] is None else f"{a['kappa']:.3f}"
    exact = "n/a" if a["exact"] is None else f"{a['exact']:.3f}"
    out.append((f"Agreement: {a['weights']}-weighted kappa {kappa}, exact {exact} over {a['pairs']} pairs; "
                "disagreements", ["item", "chunk", "grades", "across the threshold"],
                [[given(d["item"]), given(d["chunk"]), " ".join(f"{given(j)}={g}" for j, g in d["grades"].items()),
                  "yes" if d["crosses_threshold"] else "no"] for d in a["disagreements"]]))
    out.append(("Judged tags", ["tag", "chunks", "items", "missed by the agent"],
                [[tag, str(t["chunks"]), str(t["items"]), "judges only" if t["missed_by_agent"] is None
                  else str(t["missed_by_agent"])] for tag, t in r["tags"]["found"].items()]))
    out.append(("Tags the agent's checks missed", ["item", "chunk", "event", "tag"],
                [[given(m["item"]), given(m["chunk"]), given(m["event_id"]), m["tag"]] for m in r["tags"]["missed"]]))
    out.append(("Calibration: share relevant per score bin", ["score bin", "chunks", "relevant"],
                [[f"{b['low']:.2f}-{b['high']:.2f}", str(b["chunks"]), f"{b['relevance']:.3f}"]
                 for b in r["calibration"]]))
    return out


def figure(f: dict | None) -> str:
    """An estimate with its interval and item count; '-' when no item defines it."""
    if f is None:
        return "-"
    return f"{f['estimate']:.3f} [{f['low']:.3f}, {f['high']:.3f}] n={f['n']}"


def share(relevant: int, irrelevant: int) -> str:
    """The share relevant; '-' without chunks."""
    return f"{relevant / (relevant + irrelevant):.3f}" if relevant + irrelevant else "-"


def table(title: str, header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows] or ["(none)"]
    return "\n".join(lines) + "\n"


def markdown(title: str, header: list[str], rows: list[list[str]]) -> str:
    if not rows:
        return f"### {title}\n\n(none)\n"
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]  # a text's | was escaped with its other punctuation
    return "\n".join(lines) + "\n"
