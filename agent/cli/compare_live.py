"""`ragdrift compare --live --pipeline STABLE --pipeline CANDIDATE`: the release gate over the agent's stored rows.

The window is whole UTC days: `--from`/`--to`, by default the last
`live_gate.window_days` days ending on the newest stored day (of `--app`
when given) not after today. A window longer than `live_gate.retention_days`,
or starting more than that many days before the newest stored day not after
today (where the store's retention counts from), is refused: the rows before
it are deleted. Thresholds come
from the configuration's `live_gate` section, as the agent's periodic
evaluation takes them. Judged items (precision at the cutoff, nDCG, MRR)
come from the newest judged batches the store records, those whose events
fall in the window; a batch whose files cannot be read is left out and named.
A version without events in the window is an error (exit 2) that names the
versions the window holds. Stored rows that do not read back are left out
and named in one line on stderr (in the error, when nothing is left).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import date, timedelta

from agent.cli.common import UsageError, json_text, open_store
from agent.cli.run import settings_from


def run_live(args: argparse.Namespace) -> int:
    from agent.cli.compare_render import render
    from agent.core.compare import PASSED
    from agent.core.compare.live_verdict import Stored, live_compare, versions_by_traffic
    from agent.io.features.live_gate import LiveGate
    from agent.io.settings.live_gate import thresholds
    from agent.io.store.live_gate import LiveGateStore, today

    if any(getattr(args, name) is not None for name in ("qrels", "run_a", "run_b", "k")):
        raise UsageError("--live compares stored traffic: give --pipeline twice, not QRELS RUN_A RUN_B K")
    if args.slices or args.evidence or args.gate or args.policy != "seed":
        raise UsageError("--slices, --evidence, --gate and --policy are for runs; --live takes live_gate from --config")
    if len(args.pipeline or ()) != 2 or args.pipeline[0] == args.pipeline[1]:
        raise UsageError("--live needs two different versions: --pipeline STABLE --pipeline CANDIDATE")
    stable, candidate = args.pipeline
    settings = settings_from(args.config)
    section = settings.live_gate
    group = settings.kafka.group_id
    first = _day(args.first, "--from") if args.first else None
    last = _day(args.last, "--to") if args.last else None
    if first and last and first > last:
        raise UsageError(f"--from {first} is after --to {last}")
    gate = thresholds(section)
    now = today(time.time()).isoformat()
    with open_store(settings, LiveGate.tables, write=False) as store:
        rows = LiveGateStore(store)
        if last is None:
            last = rows.last_day(group, args.app, until=now)
            if last is None:
                raise UsageError("no live gate rows stored yet (is live_gate.enabled on in the agent?)"
                                 + (f" for app {args.app!r}" if args.app else ""))
            if first is not None and first > last:
                raise UsageError(f"--from {first} is after the newest stored day {last}")
        if first is None:
            first = _before(last, section.window_days - 1)
        span = (date.fromisoformat(last) - date.fromisoformat(first)).days + 1
        if span > section.retention_days:
            raise UsageError(f"--from {first} to {last} is {span} days, longer than live_gate.retention_days "
                             f"{section.retention_days}: the query rows before that are deleted")
        newest = rows.last_day(group, until=now)  # the day the store's retention counts back from
        oldest = newest and _before(newest, section.retention_days)
        if oldest and first < oldest:
            raise UsageError(f"--from {first} is before {oldest}, live_gate.retention_days "
                             f"{section.retention_days} before the newest stored day: the rows before that "
                             "are deleted")
        days, queries = rows.stored(group, first, last, args.app, (stable, candidate), gate.max_queries)
    damaged = rows.damaged.summary()
    seen = versions_by_traffic(days)
    totals = dict(seen)
    for version in (stable, candidate):
        if not totals.get(version):
            held = ", ".join(f"{v} ({n} events)" for v, n in seen) or "none"
            raise UsageError(f"pipeline version {version!r} has no events from {first} to {last}"
                             f"{' in app ' + repr(args.app) if args.app else ''}; versions there: {held}"
                             + (f"; {damaged}" if damaged else ""))
    if damaged:
        print(f"ragdrift: warning: {damaged}", file=sys.stderr)
    judged, note = _judged(settings, first, last, args.app)
    window = {"from": first, "to": last, **({"app": args.app} if args.app else {})}
    report = live_compare(Stored(days, queries, judged), stable, candidate, gate, window, partial_from=now,
                          why={"chosen": "given", "reason": "--pipeline STABLE --pipeline CANDIDATE"})
    if note:
        report["versions"]["judged"] = {"note": note}
    print(json_text(report, indent=2) if args.format == "json" else render(report, markdown=args.format == "md"))
    return 0 if report["verdict"] == PASSED else 1


def _before(day: str, days: int) -> str:
    """The day `days` before `day`, or the first day a date can hold (`--to 0001-01-01`)."""
    when = date.fromisoformat(day)
    return (when - timedelta(days=min(days, when.toordinal() - 1))).isoformat()


def _day(text: str, flag: str) -> str:
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected a date such as 2026-03-01") from None


def _judged(settings, first: str, last: str, app: str | None) -> tuple[list, str | None]:
    """The judged items in the window, and a note naming the batches left out (also on stderr)."""
    from agent.io.background.live_gate import judged_in_window
    from agent.io.features.judgment import Judgment

    with open_store(settings, Judgment.tables, write=False) as store:
        found, skipped = judged_in_window(store, settings.kafka.group_id, first, last, app)
    if skipped:
        print(f"ragdrift: judged batches left out, their files unreadable: {', '.join(skipped)}", file=sys.stderr)
    return found, (f"batches left out: {', '.join(skipped)}" if skipped else None)
