"""The report's PNG plots: traffic precision over weeks with its interval band,
and the calibration reliability diagram. They draw figures the report already
holds (agent/core/judgments/report.py) and decide nothing. matplotlib comes
with the `plots` extra, so it is imported only when a plot is drawn: the
agent's own path never needs it. A week and a batch id come from the batch's
files: each is drawn as escape.plain writes it, with mathtext off, so a `$`
in one is a dollar sign, never a formula that fails to parse."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agent.core.escape import plain

PRECISION_PNG = "precision-weeks.png"
RELIABILITY_PNG = "reliability.png"


def plot(found: Sequence[dict], directory: str | Path) -> list[Path]:
    """Both plots of the reports (oldest first) into `directory`; the reliability diagram is the newest report's."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    return [precision_over_weeks(found, out / PRECISION_PNG), reliability(found[-1], out / RELIABILITY_PNG)]


def precision_over_weeks(found: Sequence[dict], path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    weeks = [plain(str(r["week"])) for r in found]
    for stratum, label in (("all", "traffic (risk strata)"), ("uniform", "uniform stratum")):
        points = {i: p for i, r in enumerate(found) if (p := _precision(r, stratum)) is not None}
        xs = list(points)
        if not xs:
            continue
        line = ax.plot(xs, [points[i]["estimate"] for i in xs], marker="o", label=label)[0]
        ax.fill_between(xs, [points[i]["low"] for i in xs], [points[i]["high"] for i in xs],
                        color=line.get_color(), alpha=0.2)
    ax.set_xticks(range(len(weeks)), weeks, rotation=45, ha="right", parse_math=False)
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"precision ({found[-1]['policy']['relevance']})")
    ax.set_title("Judged traffic precision with its 95 % interval")
    ax.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def reliability(r: dict, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 5))
    bins = r["calibration"]
    if bins:
        if bins[0]["low"] >= 0 and bins[-1]["high"] <= 1:  # a probability-like score: calibrated on the diagonal
            ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="calibrated")
            ax.set_xlim(0, 1)
        ax.plot([b["centre"] for b in bins], [b["relevance"] for b in bins], marker="o", label="judged")
        for b in bins:
            ax.annotate(str(b["chunks"]), (b["centre"], b["relevance"]), textcoords="offset points", xytext=(0, 6),
                        ha="center", fontsize=8)
        ax.legend(loc="upper left")
    ax.set_xlabel("retrieval score (bin centre)")
    ax.set_ylabel("share of chunks judged relevant")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"Reliability, {plain(str(r['batch_id']))}", parse_math=False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, never a display
    import matplotlib.pyplot as plt

    return plt


def _precision(r: dict, stratum: str) -> dict | None:
    view = next((v for v in r["views"] if v["view"] == "traffic" and v["stratum"] == stratum), None)
    return None if view is None else view["metrics"]["precision"]
