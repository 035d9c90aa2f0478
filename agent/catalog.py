"""Where each feature lives: one entry per feature, naming every module of it and its docs.

The layers stay folders (`agent/core/`, `agent/io/`, `agent/jobs/`, `agent/cli/`): the core's purity and
the direction of imports are checked per folder, and a reader of one layer sees every rule of its kind
together. A feature's modules are therefore spread over the layers by kind; this catalog gathers them in
one place per feature. docs/architecture.md's feature table, and its table of the per-event context's
fields, are written from here (`python -m agent.catalog --write`), and tests/test_architecture.py checks
that the tables, the modules and the features the agent builds agree with it. A module belongs to one
feature at most; what is in no entry is shared.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.core.feature import PartitionFeature


@dataclass(frozen=True, kw_only=True)
class Entry:
    name: str  # the feature's name: its outbox holder, its checkpoint section, `state.feature(name)`
    what: str  # one line
    modules: tuple[str, ...]  # paths under agent/, by layer: core, io, jobs, cli
    docs: tuple[str, ...]
    words: tuple[str, ...] = ()  # identifier fragments only it uses: the agent loop never names them


CATALOG = (
    Entry(
        name="windows",
        what="the metric families: every event into its window bucket, through every family; always on",
        modules=(
            "core/metrics.py", "core/families.py", "core/windows.py", "core/tally.py", "core/view.py",
            "core/snapshot.py", "core/summary.py", "core/zero_results.py", "core/scores.py", "core/freshness.py",
            "core/access.py", "core/sources.py", "core/filters.py", "core/query_mix.py", "core/latency.py",
            "core/rerank.py", "core/feedback.py", "core/citations.py", "io/prometheus/collectors.py",
        ),
        docs=("docs/metrics.md",),
    ),
    Entry(
        name="judgment",
        what="the judgment queue: risk-weighted priority sampling per stratum, the security review queue, "
             "the weekly batch",
        modules=(
            "core/judgment.py", "core/sampling/candidate.py", "core/sampling/estimate.py",
            "core/sampling/priority.py", "core/sampling/risk.py", "core/sampling/sampler.py", "core/batch.py",
            "core/security.py", "io/features/judgment.py", "io/background/judgment.py", "io/store/queue.py",
            "io/settings/judgment.py", "io/store/qrels.py", "io/files/batch_files.py", "io/http/resolver.py", "jobs/batch.py",
            "cli/queues.py",
        ),
        docs=("docs/judgments.md",),
        words=("judg", "sampl", "incident", "weekly"),
    ),
    Entry(
        name="drift",
        what="daily drift counts per app, baselines frozen from them, and the drift statistics against them",
        modules=(
            "core/drift/baseline.py", "core/drift/bins.py", "core/drift/contents.py", "core/drift/days.py",
            "core/drift/features.py", "core/drift/queries.py", "core/drift/stats.py", "core/drift/thresholds.py",
            "io/features/drift.py", "io/background/drift.py", "io/store/drift.py", "io/settings/drift.py",
            "cli/baseline.py",
        ),
        docs=("docs/drift.md",),
        words=("drift", "baseline", "vocabular"),
    ),
    Entry(
        name="calibration",
        what="score calibrations fitted from judged batches, and the estimated precision of live traffic",
        modules=(
            "core/calibrated.py", "core/judgments/calibration.py", "io/features/calibration.py",
            "io/background/calibration.py", "io/store/calibrations.py", "jobs/calibrate.py",
        ),
        docs=("docs/judgments.md",),
        words=("calibrat",),
    ),
    Entry(
        name="live_gate",
        what="the live release gate: per day, app and pipeline version, counts of live traffic and a verdict",
        modules=(
            "core/compare/live.py", "core/compare/live_verdict.py", "io/features/live_gate.py",
            "io/background/live_gate.py", "io/store/live_gate.py", "io/settings/live_gate.py",
            "cli/compare_live.py",
        ),
        docs=("docs/judgments.md",),
        words=("live_gate", "LiveGate", "canary", "verdict"),
    ),
)

ROOT = Path(__file__).resolve().parent.parent
WRITE = "python -m agent.catalog --write"


def features_table() -> str:
    """Each feature and its modules."""
    rows = ["| feature | what | modules (under `agent/`) | docs |", "| --- | --- | --- | --- |"]
    for entry in CATALOG:
        modules = ", ".join(f"`{m}`" for m in entry.modules)
        rows.append(f"| `{entry.name}` | {entry.what} | {modules} | {', '.join(entry.docs)} |")
    return "\n".join(rows)


def partition_features() -> tuple[type[PartitionFeature[Any]], ...]:
    """The core half of every feature that has one, in the order a state holds them."""
    from agent.core.compare.live import VersionCounts
    from agent.core.drift.days import DriftDays
    from agent.core.judgment import JudgmentIntake
    from agent.core.metrics import MetricFamilies

    return (MetricFamilies, JudgmentIntake, DriftDays, VersionCounts)


def context_table() -> str:
    """Each field of the per-event `Context`, who fills it and who reads it (agent/core/feature.py)."""
    from agent.core.feature import FROM_EVENT, SUPPLIED, Context

    features = partition_features()
    rows = ["| field | filled by | read by |", "| --- | --- | --- |"]
    for field in Context.__slots__:
        if field in FROM_EVENT:
            filler = "the state, from the event"
        elif field in SUPPLIED:
            filler = f"`{SUPPLIED[field]}`, held in force between events"
        else:
            filler = ", ".join(f"`{f.name}`" for f in features if field in f.writes)
        readers = ", ".join(f"`{f.name}`" for f in features if field in f.reads) or "-"
        rows.append(f"| `{field}` | {filler} | {readers} |")
    return "\n".join(rows)


TABLES = {"features": features_table, "context": context_table}


def written(text: str) -> str:
    """`text` (docs/architecture.md) with each generated table between its markers written afresh."""
    for name, render in TABLES.items():
        start, end = f"<!-- {name}: start -->", f"<!-- {name}: end ({WRITE}) -->"
        before, found, rest = text.partition(start)
        _, closed, after = rest.partition(end)
        if not (found and closed):
            raise ValueError(f"docs/architecture.md has no {name} markers")
        text = f"{before}{start}\n{render()}\n{end}{after}"
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description="Print the feature and context tables, or write them into "
                                     "docs/architecture.md.")
    parser.add_argument("--write", action="store_true", help="rewrite the tables in docs/architecture.md")
    args = parser.parse_args()
    if not args.write:
        print("\n\n".join(render() for render in TABLES.values()))
        return 0
    doc = ROOT / "docs" / "architecture.md"
    doc.write_text(written(doc.read_text()))
    print(f"{doc}: tables written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
