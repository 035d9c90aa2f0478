# The metrics script of the seed document (section 5), verbatim: the oracle of `ragdrift evaluate --policy seed`.
from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path


def dcg(grades: list[int]) -> float:
    return sum((2**grade - 1) / math.log2(rank + 2) for rank, grade in enumerate(grades))

def per_query(qrels: dict[str, int], ranked: list[str], k: int) -> dict[str, float]:
    top = ranked[:k]
    relevant = {doc_id for doc_id, grade in qrels.items() if grade >= 2}
    hits = [doc_id for doc_id in top if doc_id in relevant]
    first = next((rank for rank, doc_id in enumerate(top, 1) if doc_id in relevant), None)
    grades = [qrels.get(doc_id, 0) for doc_id in top]
    ideal = sorted(qrels.values(), reverse=True)[:k]
    ideal_dcg = dcg(ideal)
    return {
        "precision": len(hits) / len(top) if top else 0.0,
        "recall": len(set(hits)) / len(relevant) if relevant else 1.0,
        "reciprocalRank": 1 / first if first else 0.0,
        "hitRate": 1.0 if hits else 0.0,
        "nDCG": dcg(grades) / ideal_dcg if ideal_dcg else 1.0,
    }

def evaluate(all_qrels: dict[str, dict[str, int]], run: dict[str, list[str]], k: int) -> dict[str, object]:
    rows = {qid: per_query(qrels, run.get(qid, []), k) for qid, qrels in all_qrels.items()}
    metric_names = ("precision", "recall", "reciprocalRank", "hitRate", "nDCG")
    macro = {name: round(statistics.fmean(row[name] for row in rows.values()), 4) for name in metric_names}
    return {"k": k, "queryCount": len(rows), "macro": macro, "perQuery": rows}

if __name__ == "__main__":
    if len(sys.argv) != 4 or int(sys.argv[3]) < 1:
        raise SystemExit("usage: python retrieval_metrics.py QRELS.json RUN.json K")
    qrels = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    run = json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))
    print(json.dumps(evaluate(qrels, run, int(sys.argv[3])), indent=2))

