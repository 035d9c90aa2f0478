"""`ragdrift baseline freeze|list|show` and `ragdrift drift`: baselines from the stored daily counts, what one
holds, and drift against one.

A window for `ragdrift drift` is whole UTC days of the store's daily counts:
`--day` (default: the newest stored day) or `--from`/`--to` summed; every
version of each app, or with `--pipeline V` only the events of pipeline
version V (days counted split by version), against the app's baseline.
Stored day rows that do not read back are left out of a freeze and a window
and named in one line on stderr (in the error, when nothing is left).

A baseline's name is 1 to 255 letters, digits, `.`, `_` and `-`, starting with
a letter or a digit: it fits the store's column on every backend, and `@`
stays free to name a version (`NAME@VERSION`).

What the store holds (baseline names and versions, days, apps, features,
categories, statistics and their reasons) is printed through escape.plain: a stored text adds no line or control sequence.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from contextlib import contextmanager
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from agent.cli.common import UsageError, open_store
from agent.cli.run import settings_from
from agent.core.escape import plain

if TYPE_CHECKING:
    from agent.core.drift import FeatureReference

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
VERSION = re.compile(r"[0-9a-f]{16}")


def add_parser(commands) -> None:
    baseline = commands.add_parser("baseline", help="drift baselines: freeze one from stored days, list, show one")
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
    show = actions.add_parser("show", help="what a baseline holds: bins, counts, centres, thresholds, vocabulary")
    show.add_argument("baseline", metavar="NAME[@VERSION]", help="the baseline (its newest version, or that one)")
    show.add_argument("--config", metavar="FILE", help="the agent's YAML configuration (its store section)")
    show.add_argument("--format", choices=("table", "json"), default="table")
    show.set_defaults(handler=show_baseline)

    drift = commands.add_parser("drift", help="drift of stored days against a baseline, per app, feature and statistic")
    drift.add_argument("--config", metavar="FILE", help="the agent's YAML configuration (its store section)")
    drift.add_argument("--baseline", metavar="NAME", help="the baseline (its newest version; default: the newest stored)")
    drift.add_argument("--version", help="that version of the baseline")
    drift.add_argument("--day", metavar="YYYY-MM-DD", help="the UTC day to judge (default: the newest stored day)")
    drift.add_argument("--from", dest="first", metavar="YYYY-MM-DD", help="judge these days summed, from ...")
    drift.add_argument("--to", dest="last", metavar="YYYY-MM-DD", help="... to this day (inclusive)")
    drift.add_argument("--pipeline", metavar="VERSION",
                       help="only this pipeline version label (none, other, or a version), against its app's baseline")
    drift.add_argument("--format", choices=("table", "json"), default="table")
    drift.set_defaults(handler=drift_report)


@contextmanager
def _drift_store(settings, *, write: bool):
    """The drift tables of the agent's store, closed when the block ends."""
    from agent.io.features.drift import Drift
    from agent.io.store.drift import DriftStore

    with open_store(settings, Drift.tables, write=write) as store:
        yield DriftStore(store)


def _day(text: str, flag: str) -> str:
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected a date such as 2026-03-01") from None


def _name(text: str, flag: str) -> str:
    if not NAME.fullmatch(text):
        shown = text if len(text) <= 40 and text.isprintable() else f"of {len(text)} characters"
        raise UsageError(f"{flag} {shown!r}: a baseline name is 1 to 255 letters, digits, '.', '_' or '-', "
                         "starting with a letter or a digit")
    return text


def _version(text: str, flag: str) -> str:
    if not VERSION.fullmatch(text):
        raise UsageError(f"{flag}: a baseline version is 16 lowercase hex digits (see `ragdrift baseline list`)")
    return text


def _load(store, name: str | None, version: str | None):
    """The stored baseline, or a usage error saying it is missing or corrupt."""
    try:
        baseline = store.load_baseline(name, version)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if baseline is None:
        which = f" {name!r}" if name else ""
        which += f" version {version}" if version else ""
        raise UsageError(f"no baseline{which} stored: freeze one with `ragdrift baseline freeze`")
    return baseline


def _warn(damaged: str) -> None:
    """The day rows a read skipped, in one line on stderr before the result."""
    if damaged:
        print(f"ragdrift: warning: {damaged}", file=sys.stderr)


def freeze_baseline(args: argparse.Namespace) -> int:
    from agent.core.drift import freeze
    from agent.io.settings.drift import grids, threshold_settings

    settings = settings_from(args.config)
    _name(args.name, "--name")
    first, last = _day(args.first, "--from"), _day(args.last, "--to")
    if first > last:
        raise UsageError(f"--from {first} is after --to {last}")
    with _drift_store(settings, write=True) as store:
        days = store.stored_days(settings.kafka.group_id, first, last, args.app)
        damaged = store.damaged.summary()
        if not days:
            only = f" for app {args.app!r}" if args.app else ""
            raise UsageError(f"no drift counts stored from {first} to {last}{only}: nothing to freeze"
                             + (f"; {damaged}" if damaged else ""))
        _warn(damaged)
        d = settings.drift
        try:
            baseline = freeze(days, args.name, grids(d), n_bins=d.bins, max_categories=d.max_categories,
                              calibration=threshold_settings(d))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        created = store.save_baseline(baseline)
    state = "stored" if created else "already stored (the same days give the same version)"
    print(f"{baseline.name} {baseline.version}: {len(baseline.days)} days ({plain(baseline.days[0])} to "
          f"{plain(baseline.days[-1])}), apps {', '.join(map(plain, baseline.apps))}; {state}")
    refs: list[FeatureReference[Any]] = [r for a in baseline.apps.values() for r in a.numeric.values()]
    refs += [r for a in baseline.apps.values() for r in a.mixes.values()]
    default = sum(not any(t.calibrated for t in r.thresholds.values()) for r in refs)
    if default:
        print(f"ragdrift: warning: {default} of {len(refs)} features have fewer than {baseline.calibration.min_days} "
              "days with data: their thresholds are defaults, with no known false-alarm rate "
              f"(freeze at least {baseline.calibration.min_days} days with data for the configured rate)",
              file=sys.stderr)
    return 0


def list_baselines(args: argparse.Namespace) -> int:
    settings = settings_from(args.config)
    with _drift_store(settings, write=False) as store:
        found, bad = store.list_baselines()
    if args.format == "json":
        for b in found:
            sys.stdout.write(json.dumps({"name": b.name, "version": b.version, "created_at": b.created_at,
                                         "days": list(b.days), "apps": list(b.apps)}, sort_keys=True) + "\n")
    else:
        print(f"{'name':<20} {'version':<16} {'created':<20} {'days':<23} apps")
        for b in found:
            when = datetime.fromtimestamp(b.created_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            days = plain(b.days[0] + ".." + b.days[-1])
            print(f"{plain(b.name):<20} {plain(b.version):<16} {when:<20} {days:<23} {', '.join(map(plain, b.apps))}")
    if bad:
        sys.stdout.flush()
        print(f"ragdrift: error: {bad} stored baseline{'s' if bad > 1 else ''} could not be read (corrupt), skipped",
              file=sys.stderr)
        return 1
    return 0


def show_baseline(args: argparse.Namespace) -> int:
    from agent.core.drift.contents import describe

    name, _, version = args.baseline.partition("@")
    name = _name(name, "NAME")
    version = _version(version, "VERSION") if version else None
    settings = settings_from(args.config)
    with _drift_store(settings, write=False) as store:
        baseline = _load(store, name, version)
    shown = describe(baseline)
    if args.format == "json":
        sys.stdout.write(json.dumps(shown, sort_keys=True) + "\n")
        return 0
    days, q = shown["days"], shown["queries"]
    print(f"baseline {plain(baseline.name)} {plain(baseline.version)}: {days['count']} days, "
          f"{plain(days['first'])} to {plain(days['last'])}; "
          f"{baseline.n_bins} bins, at most {baseline.max_categories} categories; "
          f"false-alarm rate {baseline.calibration.rate:.4g} per window")
    if q is not None:
        v = q["vocabulary"]
        print(f"vocabulary: about {v['terms']} terms in {v['bits']} bits ({v['hashes']} hashes), "
              f"false-positive rate {v['false_positive_rate']:.3g}; {q['clusters']} query clusters")
    for app, held in shown["apps"].items():
        for kind in ("numeric", "mixes"):
            for feature, r in held[kind].items():
                print(f"{plain(app)} {plain(feature)}:")
                if kind == "numeric":
                    print(f"  grid {r['grid']['digest']}; edges {_numbers(r['edges'])}")
                    print(f"  centres {_numbers(r['centres'])}")
                else:
                    print(f"  categories {', '.join(map(plain, r['categories']))}")
                print(f"  counts {' '.join(map(str, r['counts']))}")
                for stat, t in r["thresholds"].items():
                    rate = t["expected_false_alarm_rate"]
                    at = " ".join(f"{n}:{v:.4g}" for n, v in zip(t["sizes"], t["values"]))
                    expected = "unknown" if rate is None else f"{rate:.4g} per window"
                    print(f"  {plain(stat):<12} {at}  (expected false alarms {expected}; {plain(t['reason'])})")
    return 0


def _numbers(values) -> str:
    return " ".join(f"{v:.6g}" for v in values)


def drift_report(args: argparse.Namespace) -> int:
    from agent.core.drift import evaluate, grid_mismatches
    from agent.core.drift.contents import finding_record
    from agent.core.drift.days import by_version, window
    from agent.io.settings.checks import short_text

    settings = settings_from(args.config)
    if args.day and (args.first or args.last):
        raise UsageError("give --day or --from/--to, not both")
    pipeline = args.pipeline
    if pipeline is not None and not short_text(pipeline):
        raise UsageError("--pipeline: expected a pipeline version label (1-128 characters, no control characters)")
    name = None if args.baseline is None else _name(args.baseline, "--baseline")
    version = None if args.version is None else _version(args.version, "--version")
    with _drift_store(settings, write=False) as store:
        group = settings.kafka.group_id
        if args.first or args.last:
            first = _day(args.first, "--from") if args.first else None
            last = _day(args.last, "--to") if args.last else None
        else:
            first = last = _day(args.day, "--day") if args.day else store.last_day(group)
            if first is None:
                raise UsageError("no drift counts stored yet")
        baseline = _load(store, name, version)
        days = store.stored_days(group, first, last, split=pipeline is not None)
        damaged = store.damaged.summary()
    between = f"from {first or 'the first day'} to {last or 'the last day'}"
    if not days:
        raise UsageError(f"no drift counts stored {between}" + (f"; {damaged}" if damaged else ""))
    _warn(damaged)
    counts = window(days) if pipeline is None else by_version(window(days, split=True)).get(pipeline, {})
    if not counts:
        raise UsageError(f"no drift counts of pipeline version {pipeline!r} stored {between}: days are counted per "
                         "version only while windows.by_pipeline_version is on")
    mismatched = grid_mismatches(baseline, counts)
    if mismatched:
        more = f" (and {len(mismatched) - 1} more)" if len(mismatched) > 1 else ""
        raise UsageError(f"not compared: {mismatched[0]}{more}; judge days counted on the baseline's grids, "
                         "or freeze a baseline from days counted on the current ones")
    findings = evaluate(baseline, counts)
    span = f"{min(days)}..{max(days)}" if len(days) > 1 else min(days)
    if args.format == "json":
        for f in findings:
            record = {"baseline": baseline.name, "version": baseline.version, "window": span,
                      **({} if pipeline is None else {"pipeline_version": pipeline}), **finding_record(baseline, f)}
            sys.stdout.write(json.dumps(record, sort_keys=True) + "\n")
        return 0
    of = "" if pipeline is None else f" of pipeline version {pipeline}"
    print(f"window {plain(span)}{of} against baseline {plain(baseline.name)} {plain(baseline.version)}")
    print(f"{'app':<16} {'feature':<20} {'stat':<12} {'value':>10} {'threshold':>10} {'alarm':<5} {'n':>8}  calibrated")
    for f in findings:
        print(f"{plain(f.app):<16} {plain(f.feature):<20} {plain(f.stat):<12} {f.value:>10.4g} {f.threshold:>10.4g} "
              f"{'ALARM' if f.alarm else '-':<5} {f.n:>8}  {'yes' if f.calibrated else 'no'}")
    return 0
