"""`ragdrift baseline freeze|list` and `ragdrift drift`: baselines from the stored daily counts, and drift against one.

A window for `ragdrift drift` is whole UTC days of the store's daily counts:
`--day` (default: the newest stored day) or `--from`/`--to` summed.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date, datetime, timezone

from agent.cli.common import UsageError, open_store
from agent.cli.run import settings_from


def add_parser(commands) -> None:
    baseline = commands.add_parser("baseline", help="drift baselines: freeze one from stored days, list them")
    actions = baseline.add_subparsers(dest="action", required=True, metavar="ACTION")
    freeze = actions.add_parser("freeze", help="sum the stored daily counts of a range of days into a baseline")
    freeze.add_argument("--config", metavar="FILE", help="the agent's YAML configuration (its store and drift sections)")
    freeze.add_argument("--name", required=True, help="the baseline's name")
    freeze.add_argument("--from", dest="first", required=True, metavar="YYYY-MM-DD", help="first UTC day")
    freeze.add_argument("--to", dest="last", required=True, metavar="YYYY-MM-DD", help="last UTC day (inclusive)")
    freeze.add_argument("--app", help="only this app (default: every app with data)")
    freeze.set_defaults(handler=freeze_baseline)
    listing = actions.add_parser("list", help="stored baselines, oldest first")
    listing.add_argument("--config", metavar="FILE", help="the agent's YAML configuration (its store section)")
    listing.add_argument("--format", choices=("table", "json"), default="table")
    listing.set_defaults(handler=list_baselines)

    drift = commands.add_parser("drift", help="drift of stored days against a baseline, per app, feature and statistic")
    drift.add_argument("--config", metavar="FILE", help="the agent's YAML configuration (its store section)")
    drift.add_argument("--baseline", metavar="NAME", help="the baseline (its newest version; default: the newest stored)")
    drift.add_argument("--version", help="that version of the baseline")
    drift.add_argument("--day", metavar="YYYY-MM-DD", help="the UTC day to judge (default: the newest stored day)")
    drift.add_argument("--from", dest="first", metavar="YYYY-MM-DD", help="judge these days summed, from ...")
    drift.add_argument("--to", dest="last", metavar="YYYY-MM-DD", help="... to this day (inclusive)")
    drift.add_argument("--format", choices=("table", "json"), default="table")
    drift.set_defaults(handler=drift_report)


def _drift_store(settings):
    from agent.io.drift_store import TABLES, DriftStore

    return DriftStore(open_store(settings, TABLES))


def _day(text: str, flag: str) -> str:
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected a date such as 2026-03-01") from None


def freeze_baseline(args: argparse.Namespace) -> int:
    from agent.core.drift import freeze
    from agent.io.drift_settings import calibration, grids

    settings = settings_from(args.config)
    first, last = _day(args.first, "--from"), _day(args.last, "--to")
    if first > last:
        raise UsageError(f"--from {first} is after --to {last}")
    store = _drift_store(settings)
    try:
        days = store.stored_days(settings.kafka.group_id, first, last, args.app)
        if not days:
            only = f" for app {args.app!r}" if args.app else ""
            raise UsageError(f"no drift counts stored from {first} to {last}{only}: nothing to freeze")
        d = settings.drift
        try:
            baseline = freeze(days, args.name, grids(d), n_bins=d.bins, max_categories=d.max_categories,
                              calibration=calibration(d))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        created = store.save_baseline(baseline)
    finally:
        store.store.close()
    state = "stored" if created else "already stored (the same days give the same version)"
    print(f"{baseline.name} {baseline.version}: {len(baseline.days)} days ({baseline.days[0]} to {baseline.days[-1]}), "
          f"apps {', '.join(baseline.apps)}; {state}")
    return 0


def list_baselines(args: argparse.Namespace) -> int:
    settings = settings_from(args.config)
    store = _drift_store(settings)
    try:
        found = store.list_baselines()
    finally:
        store.store.close()
    if args.format == "json":
        for b in found:
            sys.stdout.write(json.dumps({"name": b.name, "version": b.version, "created_at": b.created_at,
                                         "days": list(b.days), "apps": list(b.apps)}, sort_keys=True) + "\n")
        return 0
    print(f"{'name':<20} {'version':<16} {'created':<20} {'days':<23} apps")
    for b in found:
        when = datetime.fromtimestamp(b.created_at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        print(f"{b.name:<20} {b.version:<16} {when:<20} {b.days[0] + '..' + b.days[-1]:<23} {', '.join(b.apps)}")
    return 0


def drift_report(args: argparse.Namespace) -> int:
    from agent.core.drift import evaluate
    from agent.core.drift.days import window

    settings = settings_from(args.config)
    if args.day and (args.first or args.last):
        raise UsageError("give --day or --from/--to, not both")
    store = _drift_store(settings)
    try:
        group = settings.kafka.group_id
        if args.first or args.last:
            first = _day(args.first, "--from") if args.first else None
            last = _day(args.last, "--to") if args.last else None
        else:
            first = last = _day(args.day, "--day") if args.day else store.last_day(group)
            if first is None:
                raise UsageError("no drift counts stored yet")
        try:
            baseline = store.load_baseline(args.baseline, args.version)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if baseline is None:
            which = f" {args.baseline!r}" if args.baseline else ""
            raise UsageError(f"no baseline{which} stored: freeze one with `ragdrift baseline freeze`")
        days = store.stored_days(group, first, last)
    finally:
        store.store.close()
    if not days:
        raise UsageError(f"no drift counts stored from {first or 'the first day'} to {last or 'the last day'}")
    findings = evaluate(baseline, window(days))
    span = f"{min(days)}..{max(days)}" if len(days) > 1 else min(days)
    if args.format == "json":
        for f in findings:
            sys.stdout.write(json.dumps({"baseline": baseline.name, "version": baseline.version, "window": span,
                                         "app": f.app, "feature": f.feature, "stat": f.stat, "value": f.value,
                                         "threshold": f.threshold, "alarm": f.alarm, "n": f.n,
                                         "calibrated": f.calibrated}, sort_keys=True) + "\n")
        return 0
    print(f"window {span} against baseline {baseline.name} {baseline.version}")
    print(f"{'app':<16} {'feature':<20} {'stat':<12} {'value':>10} {'threshold':>10} {'alarm':<5} {'n':>8}  calibrated")
    for f in findings:
        print(f"{f.app:<16} {f.feature:<20} {f.stat:<12} {f.value:>10.4g} {f.threshold:>10.4g} "
              f"{'ALARM' if f.alarm else '-':<5} {f.n:>8}  {'yes' if f.calibrated else 'no'}")
    return 0
