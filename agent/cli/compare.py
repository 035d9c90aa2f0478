"""`ragdrift compare QRELS RUN_A RUN_B K`: the release gate, a candidate run against a baseline over the same qrels;
with `--live`, two pipeline versions over the agent's stored traffic (agent/cli/compare_live.py).

Run A keeps the name "baseline run", the word of IR evaluation and of this command's help; it is not the
drift baseline (agent/core/drift/baseline.py), which the gate never reads."""

from __future__ import annotations

import argparse
import hashlib
import json

from agent.cli.common import UsageError, json_text, progress
from agent.cli.evaluate import _read, read_run


def add_parser(commands) -> None:
    compare = commands.add_parser(
        "compare", help="gate a retrieval change: a candidate run against a baseline, query by query",
        description="Paired differences with bootstrap intervals, slices, hard gates (unauthorized, stale, "
                    "evidence) and a verdict. Exit status 0 pass, 1 fail or not enough data, 2 bad input.",
    )
    compare.add_argument("qrels", metavar="QRELS", nargs="?", help="the graded judgments (as for evaluate)")
    compare.add_argument("run_a", metavar="RUN_A", nargs="?", help="the baseline run")
    compare.add_argument("run_b", metavar="RUN_B", nargs="?", help="the candidate run")
    compare.add_argument("k", metavar="K", nargs="?", type=int, help="the cutoff")
    compare.add_argument("--policy", choices=("seed", "trec"), default="seed", help="metric conventions, as for evaluate")
    compare.add_argument("--slices", metavar="FILE", help="JSON {query: {dimension: label}}")
    compare.add_argument("--evidence", metavar="FILE", help="JSON {query: [[doc, ...], ...]}: evidence groups")
    compare.add_argument("--gate", metavar="FILE", help="JSON thresholds (docs/judgments.md lists keys and defaults)")
    compare.add_argument("--format", choices=("table", "json", "md"), default="table")
    live = compare.add_argument_group("live", "compare two pipeline versions over the agent's stored traffic "
                                              "(docs/judgments.md, \"The live release gate\")")
    live.add_argument("--live", action="store_true", help="gate a canary or shadow version on stored traffic")
    live.add_argument("--pipeline", action="append", metavar="VERSION",
                      help="twice: the stable version, then the candidate")
    live.add_argument("--from", dest="first", metavar="YYYY-MM-DD", help="first UTC day of the window")
    live.add_argument("--to", dest="last", metavar="YYYY-MM-DD", help="last UTC day (default: the newest stored)")
    live.add_argument("--app", help="only this app (default: every app, each a slice)")
    live.add_argument("--config", metavar="FILE", help="the agent's YAML configuration (store and live_gate)")
    compare.set_defaults(handler=run_compare)


def run_compare(args: argparse.Namespace) -> int:
    from agent.cli.compare_render import render
    from agent.core.compare import COMPARED, PASSED, GateError, GateThresholds, Inputs, compare, parse_gate
    from agent.core.judgments import policy_of
    from agent.core.judgments.formats import FormatError, parse_qrels

    if args.live:
        from agent.cli.compare_live import run_live

        return run_live(args)
    if args.k is None:
        raise UsageError("compare needs QRELS RUN_A RUN_B K, or --live with --pipeline twice")
    if args.pipeline or args.first or args.last or args.app or args.config:
        raise UsageError("--pipeline, --from, --to, --app and --config go with --live")
    if args.k < 1:
        raise UsageError(f"K must be at least 1, got {args.k}")
    text = _read(args.qrels)
    try:
        qrels = parse_qrels(text)
    except FormatError as exc:
        raise UsageError(f"{args.qrels}: {exc}") from None
    versions = {"qrels": _version(args.qrels, hashlib.sha256(text.encode("utf-8")).hexdigest())}
    runs = {}
    for name, path in (("a", args.run_a), ("b", args.run_b)):
        runs[name], digest = read_run(path, qrels, reject_duplicates=True)
        versions[name] = {**_version(path, digest), "config": runs[name].config, "corpus": runs[name].corpus}
    gate = GateThresholds()
    if args.gate:
        try:
            gate = parse_gate(_read(args.gate), COMPARED)
        except GateError as exc:
            raise UsageError(f"{args.gate}: {exc}") from None
    inputs = Inputs(qrels=qrels, a=runs["a"], b=runs["b"], k=args.k, policy=policy_of(args.policy), gate=gate,
                    slices=_labels(args.slices) if args.slices else {}, evidence=_groups(args.evidence) if args.evidence else {}, versions=versions)
    with progress() as bar:
        report = compare(inputs, lambda: bar.update(1))
    print(json_text(report, indent=2) if args.format == "json" else render(report, markdown=args.format == "md"))
    return 0 if report["verdict"] == PASSED else 1


def _version(path: str, digest: str) -> dict:
    return {"file": path, "sha256": digest[:12]}


def _json(path: str):
    from agent.core.judgments.untrusted import loads

    try:
        return loads(_read(path).removeprefix("\ufeff"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: line {exc.lineno}: not JSON: {exc.msg}") from None
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from None


def _labels(path: str) -> dict[str, dict[str, str]]:
    from agent.core.judgments.untrusted import shown

    data = _json(path)
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a slices file maps each query to {{dimension: label}}")
    for query, labels in data.items():
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise UsageError(f"{path}: query {shown(query)}: expected {{dimension: label}} with text labels")
    return data


def _groups(path: str) -> dict[str, list[list[str]]]:
    from agent.core.judgments.untrusted import shown

    data = _json(path)
    if not isinstance(data, dict):
        raise UsageError(f"{path}: an evidence file maps each query to a list of groups (lists of doc ids)")
    for query, groups in data.items():
        if not isinstance(groups, list) or not all(
                isinstance(g, list) and g and all(isinstance(d, str) for d in g) for g in groups):
            raise UsageError(f"{path}: query {shown(query)}: expected a list of non-empty lists of doc ids")
    return data
