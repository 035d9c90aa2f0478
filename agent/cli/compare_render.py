"""The comparison report as text: a plain table for a terminal, Markdown for a CI job's summary.

The report's texts come from input files (a run's config, query and doc ids,
slice dimensions and labels, pipeline versions): every text value is written
through the format's one escape (agent/core/escape.py), so none adds a line,
a control sequence or markup. The verdict line, the layout and the report's
own key names are the renderer's.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.core import escape

Escape = Callable[[str], str]


def render(report: dict, *, markdown: bool) -> str:
    text: Escape = escape.markdown if markdown else escape.plain
    item = "- " if markdown else "  "

    def title(heading: str) -> list[str]:
        return ["", f"#### {heading}" if markdown else f"{heading}:"]

    def pairs(found: dict) -> str:
        return ", ".join(f"{key} {_value(value, text)}" for key, value in found.items())  # the keys are the report's

    verdict = text(report["verdict"])
    lines = [f"**verdict: {verdict}**" if markdown else f"verdict: {verdict}"]
    lines += [f"{'- ' if markdown else '  - '}{text(reason)}" for reason in report["reasons"]]
    lines += [*title("thresholds"), item + pairs(report["thresholds"])]
    lines += title("versions") + [f"{item}{name}: {pairs(found)}" for name, found in report["versions"].items()]
    sets = report["queries"]
    lines += title(f"queries compared: {sets['compared']}") + [
        f"{item}{name}: " + (text(found) if isinstance(found, str) else f"{found['count']}" + (
            f" (e.g. {', '.join(map(text, found['sample']))})" if found["sample"] else ""))
        for name, found in sets.items() if name != "compared"]
    columns: tuple[str, ...] = ("metric", "n", "a", "b", "delta", "low", "high", "margin", "outcome")
    if "material" in report:  # the live gate: margins from the stable version's day-to-day variation
        lines += title("material (from the stable version's day-to-day variation)")
        lines += _table(("metric", "days", "day_sd", "threshold", "rule"), report["material"], text, markdown)
        columns = (*columns[:-1], "interval", "outcome")
    lines += title("metrics (delta = candidate - baseline, " + (
        "bootstrap interval paired or not as its column says)" if "material" in report else "paired bootstrap interval)"))
    lines += _table(columns, [{**row, "metric": row["metric"] + ("" if row["gated"] else " (not gated)")}
                              for row in report["metrics"]], text, markdown)
    if report["slices"]:
        lines += title("slices") + _table(("dimension", "label", *columns), report["slices"], text, markdown)
    lines += title("hard gates")
    lines += _table(("gate", "max", "baseline", "candidate", "new", "counted", "outcome"), report["hardGates"], text,
                    markdown)
    lines += [f"{item}{text(row['gate'])}: {pairs(example)}" for row in report["hardGates"]
              for example in row.get("examples", [])]
    if "worst" not in report:  # the live gate lists no single queries
        return "\n".join(lines)
    worst = report["worst"]
    for name in ("losses", "wins"):
        lines += title(f"largest {name} by {text(worst['metric'])}")
        lines += _table(("query", "a", "b", "delta", "labels"), worst[name], text, markdown) if worst[name] \
            else [f"{item}none"]
    latency = report["latency"]
    lines += [*title("latency"), item + ("not in the runs" if latency is None else f"{latency['n']} queries, " + ", ".join(
        f"{p} {latency[p]['a']:.1f} -> {latency[p]['b']:.1f} ms ({latency[p]['delta']:+.1f})" for p in ("p50", "p95")))]
    return "\n".join(lines)


def _table(columns: tuple[str, ...], rows: list[dict], text: Escape, markdown: bool) -> list[str]:
    cells = [[_cell(row.get(column), text) for column in columns] for row in rows]
    if markdown:  # a text's | is escaped with the rest of its punctuation: it ends no cell
        return ["", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)] + [
            "| " + " | ".join(row) + " |" for row in cells]
    widths = [max([len(column)] + [len(row[i]) for row in cells]) for i, column in enumerate(columns)]
    return ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
            for row in [list(columns), *cells]]


def _cell(value, text: Escape) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, dict):
        return ",".join(f"{text(key)}={text(label)}" for key, label in value.items()) or "-"
    return _written(value, text)


def _value(value, text: Escape) -> str:
    """A threshold's or version's value as the gate file or the run spells it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(_written(v, text) for v in value) or "none"
    return "-" if value is None else _written(value, text)


def _written(value, text: Escape) -> str:
    """A text through the format's escape; a number as Python writes it."""
    return text(value) if isinstance(value, str) else str(value)
