#!/usr/bin/env python3
"""The quadratic model's prediction of how much `dyn` and `exp` lower the noise's excess loss.

Lemma 4.1 (Hong, Wang, Zhou): at a fixed R = Σ_t σ_t^{-2}, the expected excess loss of GD on a
quadratic is ∝ Σ_t q_t σ_t² / R-normalised, minimised by σ_t² ∝ 1/√q_t (`dyn`). So q_t ∝ σ_t^{-4}
can be read back from a planned `dyn` schedule, and the cost of any schedule against uniform's,
T Σ q_t, follows: (Σ √q_t)² / (T Σ q_t) − 1 for `dyn`, Σ q_t σ_t² · Σ σ_t^{-2} / (T Σ q_t) − 1 for
another schedule (here `exp`). Assumes no clipping.

Usage: predicted_gain.py DYN_METRICS_CSV EXP_METRICS_CSV
  (metrics.csv of one-seed runs with train.eval_every_steps = 1, so every step's noise_multiplier
  is written; the row of step s carries the σ of its last step.) Python 3 standard library only.
"""

import csv
import sys


def sigmas(path):
    rows = [r for r in csv.DictReader(open(path, newline="")) if int(r["step"]) >= 1]
    return [float(r["noise_multiplier"]) for r in sorted(rows, key=lambda r: int(r["step"]))]


def main(dyn_path, exp_path):
    dyn, exp = sigmas(dyn_path), sigmas(exp_path)
    q = [s ** -4 for s in dyn]
    uniform = len(q) * sum(q)
    cost = lambda sig: sum(qi * s * s for qi, s in zip(q, sig)) * sum(s ** -2 for s in sig)
    print(f"dyn: {100 * (cost(dyn) / uniform - 1):+.2f}% (closed form "
          f"{100 * (sum(v ** 0.5 for v in q) ** 2 / uniform - 1):+.2f}%), "
          f"exp: {100 * (cost(exp) / uniform - 1):+.2f}%")


if __name__ == "__main__":
    main(*sys.argv[1:3])
