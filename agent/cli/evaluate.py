"""`ragdrift evaluate QRELS RUN K`: an offline run scored against qrels, as the seed script or trec_eval would."""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Container, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from agent.cli.common import UsageError, finite, json_text

if TYPE_CHECKING:
    from agent.core.judgments.runs import Run


def add_parser(commands) -> None:
    evaluate = commands.add_parser(
        "evaluate", help="score an offline run against qrels: precision, recall, MRR, hit rate, nDCG at K",
        description="QRELS: JSON {query: {doc: grade}} or TREC qrels lines (qid iter docno rel). "
                    "RUN: JSON {query: [doc, ...]}, TREC run lines (qid Q0 docno rank score tag), "
                    "ordered by score as trec_eval does, or the ragdrift.run.v1 JSON run with facts.",
    )
    evaluate.add_argument("qrels", metavar="QRELS", help="the graded judgments")
    evaluate.add_argument("run", metavar="RUN", help="the ranked results")
    evaluate.add_argument("k", metavar="K", type=int, help="the cutoff")
    evaluate.add_argument("--policy", choices=("seed", "trec"), default="seed",
                          help="seed: the seed document's script (grade >= 2, precision over the returned count); "
                               "trec: trec_eval (grade >= 1, P@k over k, linear gain)")
    evaluate.add_argument("--relevance-threshold", type=finite, metavar="G", help="a grade at least G is relevant")
    evaluate.add_argument("--gain", choices=("exp", "linear"), help="nDCG gain: 2^g - 1 or g (default: the policy's)")
    evaluate.add_argument("--duplicates", choices=("reject", "keep"), default="reject",
                          help="a doc id repeated in one query's ranking: refuse the run (default) or count it again")
    evaluate.add_argument("--format", choices=("table", "json"), default="table")
    evaluate.set_defaults(handler=run_evaluate)


def run_evaluate(args: argparse.Namespace) -> int:
    from agent.core.judgments import METRICS, evaluate, policy_of
    from agent.core.judgments.formats import FormatError, parse_qrels

    if args.k < 1:
        raise UsageError(f"K must be at least 1, got {args.k}")
    try:
        qrels = parse_qrels(_read(args.qrels))
    except FormatError as exc:
        raise UsageError(f"{args.qrels}: {exc}") from None
    run = read_run(args.run, qrels, reject_duplicates=args.duplicates == "reject")[0].ranking
    policy = policy_of(args.policy, threshold=args.relevance_threshold, gain=args.gain, duplicates=args.duplicates)
    try:
        out = evaluate(qrels, run, args.k, policy)
    except ValueError as exc:  # no query to evaluate (none in both files, under the trec policy)
        raise UsageError(f"{args.qrels}, {args.run}: {exc}") from None
    if args.format == "json":
        print(json_text(out, indent=2))
        return 0
    print(f"policy {policy.name}: k {out['k']}, {out['queryCount']} queries, relevant at grade >= {policy.threshold:g}, "
          f"precision over the {policy.precision_over} count, gain {policy.gain}, duplicates {policy.duplicates}")
    width = max(len(name) for name in METRICS)
    for name in METRICS:
        print(f"{name:<{width}}  {out['macro'][name]:.4f}")
    return 0


def read_run(path: str, judged: Container[str], reject_duplicates: bool) -> tuple[Run, str]:
    """A run file read as it streams past (`agent.core.judgments.runs.read_run`: a TREC
    run keeps only the `judged` queries), and the sha256 of its text as `_read` reads it."""
    from agent.core.judgments.formats import FormatError
    from agent.core.judgments.runs import read_run as parse

    digest = hashlib.sha256()

    def lines(handle: Iterable[str]) -> Iterator[str]:
        for line in handle:
            digest.update(line.encode("utf-8"))
            yield line

    try:
        with open(path, encoding="utf-8-sig") as handle:  # a byte order mark is not part of the first query id
            run = parse(lines(handle), reject_duplicates, judged)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    except FormatError as exc:
        raise UsageError(f"{path}: {exc}") from None
    return run, digest.hexdigest()


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8-sig")  # a byte order mark is not part of the first query id
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
