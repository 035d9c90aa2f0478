"""The comparison report as text: a plain table for a terminal, Markdown for a CI job's summary."""

from __future__ import annotations


def render(report: dict, *, markdown: bool) -> str:
    item = "- " if markdown else "  "

    def title(text: str) -> list[str]:
        return ["", f"#### {text}" if markdown else f"{text}:"]

    lines = [f"**verdict: {report['verdict']}**" if markdown else f"verdict: {report['verdict']}"]
    lines += [f"{'- ' if markdown else '  - '}{reason}" for reason in report["reasons"]]
    lines += [*title("thresholds"), item + ", ".join(f"{key} {_plain(value)}" for key, value in report["thresholds"].items())]
    lines += title("versions") + [f"{item}{name}: " + ", ".join(f"{key} {_plain(value)}" for key, value in found.items())
                                  for name, found in report["versions"].items()]
    sets = report["queries"]
    lines += title(f"queries compared: {sets['compared']}") + [
        f"{item}{name}: " + (found if isinstance(found, str) else f"{found['count']}" + (
            f" (e.g. {', '.join(found['sample'])})" if found["sample"] else ""))
        for name, found in sets.items() if name != "compared"]
    columns: tuple[str, ...] = ("metric", "n", "a", "b", "delta", "low", "high", "margin", "outcome")
    if "material" in report:  # the live gate: margins from the stable version's day-to-day variation
        lines += title("material (from the stable version's day-to-day variation)")
        lines += _table(("metric", "days", "day_sd", "threshold", "rule"), report["material"], markdown)
        columns = (*columns[:-1], "interval", "outcome")
    lines += title("metrics (delta = candidate - baseline, " + (
        "bootstrap interval paired or not as its column says)" if "material" in report else "paired bootstrap interval)"))
    lines += _table(columns, [{**row, "metric": row["metric"] + ("" if row["gated"] else " (not gated)")}
                              for row in report["metrics"]], markdown)
    if report["slices"]:
        lines += title("slices") + _table(("dimension", "label", *columns), report["slices"], markdown)
    lines += title("hard gates")
    lines += _table(("gate", "max", "baseline", "candidate", "new", "counted", "outcome"), report["hardGates"], markdown)
    lines += [f"{item}{row['gate']}: " + ", ".join(f"{key} {value}" for key, value in example.items())
              for row in report["hardGates"] for example in row.get("examples", [])]
    if "worst" not in report:  # the live gate lists no single queries
        return "\n".join(lines)
    worst = report["worst"]
    for name in ("losses", "wins"):
        lines += title(f"largest {name} by {worst['metric']}")
        lines += _table(("query", "a", "b", "delta", "labels"), worst[name], markdown) if worst[name] else [f"{item}none"]
    latency = report["latency"]
    lines += [*title("latency"), item + ("not in the runs" if latency is None else f"{latency['n']} queries, " + ", ".join(
        f"{p} {latency[p]['a']:.1f} -> {latency[p]['b']:.1f} ms ({latency[p]['delta']:+.1f})" for p in ("p50", "p95")))]
    return "\n".join(lines)


def _table(columns: tuple[str, ...], rows: list[dict], markdown: bool) -> list[str]:
    cells = [[_cell(row.get(column)) for column in columns] for row in rows]
    if markdown:
        return ["", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)] + [
            "| " + " | ".join(text.replace("|", "\\|") for text in row) + " |" for row in cells]  # a label's | ends no cell
    widths = [max([len(column)] + [len(row[i]) for row in cells]) for i, column in enumerate(columns)]
    return ["  " + "  ".join(text.ljust(width) for text, width in zip(row, widths)).rstrip()
            for row in [list(columns), *cells]]


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, dict):
        return ",".join(f"{key}={label}" for key, label in value.items()) or "-"
    return str(value)


def _plain(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()  # as the gate file spells it
    if isinstance(value, list):
        return ",".join(map(str, value)) or "none"
    return "-" if value is None else str(value)
