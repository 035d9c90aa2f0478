"""The noise floor of the calibration error, and the estimate's error, by label count.

Labels are drawn from a known smooth relevance curve, so every fit is as well
calibrated as its sample allows: the cross-validated ECE it still measures is
noise, which the bound `judgment.calibration.max_ece` must clear at
`min_labels` (docs/judgments.md, "Calibration"). Also prints how far the
estimated precision of fresh traffic lies from the truth.
"""

from __future__ import annotations

import argparse

import numpy as np

from agent.core.judgments.calibration import fit


def relevance(score: np.ndarray) -> np.ndarray:
    return 0.1 + 0.8 * score**2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    traffic = rng.uniform(0, 1, 5000)
    truth = float(np.mean(relevance(traffic)))
    print("labels  CV ECE median  p90   |estimate - truth| median  p90")
    for n in (100, 200, 300, 500, 1000, 2000):
        eces: list[float] = []
        errors: list[float] = []
        for _ in range(args.repeats):
            scores = rng.uniform(0, 1, n)
            relevant = rng.uniform(size=n) < relevance(scores)
            c = fit("app", None, scores.tolist(), (3 * relevant).tolist())
            assert c.ece is not None, "fewer labels than folds"
            eces.append(c.ece)
            errors.append(abs(float(np.mean([c.probability(s) for s in traffic])) - truth))
        print(f"{n:>6}  {np.median(eces):13.3f}  {np.percentile(eces, 90):.3f}  "
              f"{np.median(errors):24.3f}  {np.percentile(errors, 90):.3f}")


if __name__ == "__main__":
    main()
