"""The report's traffic intervals cover the truth at their nominal rate: 300 simulated
weeks on each of three traffic shapes (`pytest -s` prints the table).

Each week: traffic drawn with risk signals; each admitted chunk relevant with a
known probability that the signals lower (risky events are worse); the real
sampler and batch; judges who grade exactly what the model drew; the real
report, whose figures the gauges export as they are. The truth of a view is
the mean precision over every event of its traffic with something admitted,
from the model's draws for all of them; the report sees only the batch's
labels. The interval is of that week's value, so the truth is drawn anew each
week. Budgets are 10 a risk stratum and 20 for the uniform one, the traffic
cut to match (the share sampled as in today's generator, at less cost). Shapes:

- today: today's generator, 270 events a week over two apps and three query
  types;
- rare: 600 events, 2 % of them high-risk (unauthorized, thumbs down and a
  correction: w = 10) and nearly never relevant, so the weights are skewed
  and the rare events are sampled almost surely;
- small: today's traffic plus a stratum that gets 5 to 28 events a week,
  against its budget of 10: sampled largely, or whole.

Every shape's 95 % intervals must hold the truth in at least 94 % of weeks,
for all traffic (the risk strata together), for the uniform stratum, and
over every risk stratum's own interval (per stratum and week).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

from agent.core.batch import BatchConfig, build
from agent.core.judgments.labels import Label
from agent.core.judgments.report import ALL, Options, report
from agent.core.sampling import DEFAULT_WEIGHTS, UNIFORM, Budgets, Candidate, ResultRef, Sampler, strata_for, uniform

WEEK = "2026-W10"
WEEKS = 300
LEVEL, NOMINAL = 0.95, 0.94
APPS, TYPES = ("hr", "it"), ("lexical", "semantic", "multi_hop")
SIGNALS = {"low_top1": 0.15, "stale": 0.05, "thumbs_down": 0.05, "small_gap": 0.2, "zero_result": 0.03}
RARE = ("unauthorized", "thumbs_down", "correction")  # w = 1 + 4 + 3 + 2
PENALTY = {"low_top1": 0.35, "stale": 0.25, "thumbs_down": 0.3, "small_gap": 0.1, "unauthorized": 0.6}  # off the chance
BUDGETS = Budgets(k=10, uniform_k=20)
SMALL = ("legal", "lexical")


@dataclass(frozen=True)
class Shape:
    name: str
    events: int
    rare: float = 0.0  # share of events with the RARE signals
    small: tuple[int, int] | None = None  # events a week in the SMALL stratum: uniform in this range


SHAPES = (Shape("today", 270), Shape("rare", 600, rare=0.02), Shape("small", 270, small=(5, 28)))


def relevance_chance(app: str, query_type: str, signals: tuple[str, ...]) -> float:
    base = {"lexical": 0.8, "semantic": 0.65, "multi_hop": 0.5}[query_type] - (0.1 if app == "it" else 0.0)
    return max(0.05, base - sum(PENALTY.get(s, 0.0) for s in signals))


def week_of_traffic(shape: Shape, rnd: random.Random, salt: str):
    """Every event's candidates and the grade the model drew for each admitted chunk."""
    candidates, grades = [], {}
    small = rnd.randint(*shape.small) if shape.small else 0
    for n in range(shape.events + small):
        event_id = f"{salt}-e{n:04d}"
        app, query_type = SMALL if n >= shape.events else (rnd.choice(APPS), rnd.choice(TYPES))
        signals = tuple(s for s, p in SIGNALS.items() if rnd.random() < p)
        if rnd.random() < shape.rare:
            signals = tuple(dict.fromkeys((*signals, *RARE)))
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


def truths(candidates, grades) -> dict[str, float]:
    """Per stratum, and for all traffic (ALL: every risk stratum), the mean precision over every
    event with something admitted."""
    precision: dict[str, list[float]] = {}
    for c in candidates:
        if c.results:
            value = sum(grades[r.chunk_id] >= 2 for r in c.results) / len(c.results)
            precision.setdefault(c.stratum, []).append(value)
            if c.stratum != UNIFORM:
                precision.setdefault(ALL, []).append(value)
    return {stratum: statistics.fmean(values) for stratum, values in precision.items()}


def sampled(candidates) -> list[Candidate]:
    """What the agent keeps: the real sampler, all of the week's rows."""
    sampler = Sampler(BUDGETS)
    for c in candidates:
        sampler.offer(c)
    return [c for stratum in sampler.strata(WEEK) for c in sampler.kept(WEEK, stratum)]


def labels_of(batch, grades) -> list[Label]:
    """Judges grade what the model drew; a double-judged item gets the same grade twice."""
    return [Label(batch_id=batch.batch_id, item=row["item"], chunk=c["chunk"], judge=f"j{j}", grade=grades[c["chunk_id"]])
            for row in batch.key if row["item"] is not None
            for c in row["chunks"] for j in range(row["judges"])]


@dataclass
class Tally:
    """Per view (ALL, UNIFORM, or every risk stratum pooled): weeks covered, widths, errors."""

    covered: int = 0
    weeks: int = 0
    widths: list[float] | None = None
    errors: list[float] | None = None

    def add(self, figure: dict, true: float) -> None:
        self.covered += figure["low"] <= true <= figure["high"]
        self.weeks += 1
        self.widths = [*(self.widths or []), figure["high"] - figure["low"]]
        self.errors = [*(self.errors or []), figure["estimate"] - true]

    @property
    def coverage(self) -> float:
        return self.covered / self.weeks

    def implied_sd(self) -> float:
        """The standard error the widths imply, as if normal: the root mean square of width / (2 z)."""
        z = statistics.NormalDist().inv_cdf((1 + LEVEL) / 2)
        return math.sqrt(statistics.fmean((w / (2 * z)) ** 2 for w in self.widths))


def simulate(shape: Shape, weeks: int = WEEKS) -> dict[str, Tally]:
    rnd = random.Random(f"coverage-{shape.name}")
    config = BatchConfig(budgets={UNIFORM: BUDGETS.uniform_k}, default_budget=BUDGETS.k, double_judged_share=0.1)
    tallies = {ALL: Tally(), UNIFORM: Tally(), "strata": Tally()}
    for week in range(weeks):
        salt = f"{shape.name}{week}"
        candidates, grades = week_of_traffic(shape, rnd, salt)
        true = truths(candidates, grades)
        batch = build(WEEK, sampled(candidates), BatchConfig(**{**config.__dict__, "salt": salt}))
        # The challenge views' bootstrap plays no part in a traffic figure: a token count of resamples.
        out = report(batch.manifest, batch.key, labels_of(batch, grades), Options(level=LEVEL, resamples=10))
        for view in out["views"]:
            precision = view["metrics"]["precision"]
            if view["view"] == "traffic" and precision is not None:
                tallies[view["stratum"] if view["stratum"] in (ALL, UNIFORM) else "strata"].add(
                    precision, true[view["stratum"]])
    return tallies


def test_the_traffic_intervals_cover_the_true_precision_on_three_shapes():
    rows = {shape.name: simulate(shape) for shape in SHAPES}
    print(f"\n95% traffic precision intervals against the true precision, {WEEKS} weeks a shape")
    print(f"{'shape':6} {'weeks':>5} {'all':>6} {'uniform':>7} {'strata':>7} {'width':>6} {'error sd':>8} "
          f"{'implied':>7} {'bias':>7}")
    for name, tallies in rows.items():
        traffic = tallies[ALL]
        print(f"{name:6} {traffic.weeks:>5} {traffic.coverage:>6.3f} {tallies[UNIFORM].coverage:>7.3f} "
              f"{tallies['strata'].coverage:>7.3f} {statistics.fmean(traffic.widths):>6.3f} "
              f"{statistics.pstdev(traffic.errors):>8.4f} {traffic.implied_sd():>7.4f} "
              f"{statistics.fmean(traffic.errors):>+7.4f}")
    print("all: the risk strata together; strata: every risk stratum's own interval, per stratum and week;"
          " width, error sd (estimate - truth), implied sd (width / 3.92) and bias: all traffic")
    for name, tallies in rows.items():
        for view, tally in tallies.items():
            assert tally.weeks >= WEEKS, (name, view)
            assert tally.coverage >= NOMINAL, (name, view, tally.coverage)
