"""The report's traffic estimate covers the truth: 100 simulated weeks (`pytest -s` prints the coverage).

Each week: traffic drawn with risk signals; each admitted chunk relevant with a
known probability that the signals lower (risky events are worse); the real
sampler and batch; judges who grade exactly what the model drew. The true
traffic precision is the mean precision over every event with something
admitted, computed from the model's draws for all of them; the report sees
only the batch's labels. The 95 % interval must hold it in at least 90 weeks.
"""

from __future__ import annotations

import random

from agent.core.batch import BatchConfig, build
from agent.core.judgments.labels import Label
from agent.core.judgments.report import Options, report
from agent.core.sampling import DEFAULT_WEIGHTS, UNIFORM, Budgets, Candidate, ResultRef, Sampler, strata_for, uniform

WEEK = "2026-W10"
WEEKS, EVENTS = 100, 400
APPS, TYPES = ("hr", "it"), ("lexical", "semantic", "multi_hop")
SIGNALS = {"low_top1": 0.15, "stale": 0.05, "thumbs_down": 0.05, "small_gap": 0.2, "zero_result": 0.03}
PENALTY = {"low_top1": 0.35, "stale": 0.25, "thumbs_down": 0.3, "small_gap": 0.1}  # off the chance of relevance
BUDGETS = Budgets(k=15, uniform_k=30)


def relevance_chance(app: str, query_type: str, signals: tuple[str, ...]) -> float:
    base = {"lexical": 0.8, "semantic": 0.65, "multi_hop": 0.5}[query_type] - (0.1 if app == "it" else 0.0)
    return max(0.05, base - sum(PENALTY.get(s, 0.0) for s in signals))


def week_of_traffic(rnd: random.Random, salt: str):
    """Every event's candidates and the grade the model drew for each admitted chunk."""
    candidates, grades = [], {}
    for n in range(EVENTS):
        event_id, app, query_type = f"{salt}-e{n:04d}", rnd.choice(APPS), rnd.choice(TYPES)
        signals = tuple(s for s, p in SIGNALS.items() if rnd.random() < p)
        admitted = 0 if "zero_result" in signals else rnd.randint(1, 5)
        p = relevance_chance(app, query_type, signals)
        results = tuple(ResultRef(f"{event_id}-c{r}", "p", "wiki", r, 1.0 - r / 10) for r in range(1, admitted + 1))
        for chunk_id in (ref.chunk_id for ref in results):
            grades[chunk_id] = rnd.choice((2, 3)) if rnd.random() < p else rnd.choice((0, 1))
        w = 1.0 + sum(DEFAULT_WEIGHTS[s] for s in signals)
        u = uniform(event_id, WEEK, salt)
        for stratum, weight in strata_for(app, query_type, w):
            candidates.append(Candidate(
                event_id=event_id, ts=0.0, week=WEEK, stratum=stratum, app=app, query_id=f"q-{event_id}",
                query_type=query_type, language="en", cutoff_k=5, pipeline_version="v1", results=results,
                w=weight, u=u, priority=weight / u, signals=signals,
            ))  # fmt: skip
    return candidates, grades


def truth(candidates, grades) -> float:
    """Mean precision over every event with something admitted (its risk-stratum candidate)."""
    shown = [c for c in candidates if c.stratum != UNIFORM and c.results]
    return sum(sum(grades[r.chunk_id] >= 2 for r in c.results) / len(c.results) for c in shown) / len(shown)


def sampled(candidates) -> list[Candidate]:
    """What the agent keeps: the real sampler, all of the week's rows."""
    sampler = Sampler(BUDGETS)
    for c in candidates:
        sampler.offer(c)
    return [c for stratum in sampler.strata(WEEK) for c in sampler.kept(WEEK, stratum)]


def labels_of(batch, grades) -> list[Label]:
    """Judges grade what the model drew; a double-judged item gets the same grade twice."""
    return [Label(batch.batch_id, row["item"], c["chunk"], f"j{j}", grades[c["chunk_id"]])
            for row in batch.key if row["item"] is not None
            for c in row["chunks"] for j in range(row["judges"])]


def test_the_traffic_interval_covers_the_true_precision_in_90_of_100_weeks():
    rnd = random.Random(2026)
    config = BatchConfig(budgets={UNIFORM: BUDGETS.uniform_k}, default_budget=BUDGETS.k, double_judged_share=0.1)
    covered = {"traffic": 0, "uniform": 0}
    errors = []
    for week in range(WEEKS):
        salt = f"week{week}"
        candidates, grades = week_of_traffic(rnd, salt)
        true = truth(candidates, grades)
        batch = build(WEEK, sampled(candidates), BatchConfig(**{**config.__dict__, "salt": salt}))
        out = report(batch.manifest, batch.key, labels_of(batch, grades), Options(resamples=400, seed=week))
        for stratum, name in (("all", "traffic"), (UNIFORM, "uniform")):
            view = next(v for v in out["views"] if v["view"] == "traffic" and v["stratum"] == stratum)
            precision = view["metrics"]["precision"]
            covered[name] += precision["low"] <= true <= precision["high"]
            if name == "traffic":
                errors.append(precision["estimate"] - true)
    bias = sum(errors) / len(errors)
    print(f"\ntraffic precision 95% interval coverage over {WEEKS} weeks: risk strata {covered['traffic']}/{WEEKS}, "
          f"uniform stratum {covered['uniform']}/{WEEKS}; mean error {bias:+.4f}")
    assert covered["traffic"] >= 90
    assert covered["uniform"] >= 90
