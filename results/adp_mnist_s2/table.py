#!/usr/bin/env python3
"""ADP-SGD under the paper's schedule S2 on MNIST logistic regression, from dpx's two sweeps.

Reads <dir>/adp and <dir>/dpsgd (`dpx sweep` outputs: points.csv and summary.csv, or while a sweep
runs its jobs' own summaries) and prints, per (C_G, ε̄, epochs), the best-over-run and the final
test accuracy of each arm (mean ± sample std over seeds) and ADP − DP-SGD with its standard error.
Standard library only.

  python3 results/adp_mnist_s2/table.py results/adp_mnist_s2
  python3 results/adp_mnist_s2/table.py results/adp_mnist_s2 pld   # <dir>/pld_adp, <dir>/pld_dpsgd

With `pld` the two arms are the equal-tight-ε sweeps and the ε column is the PLD target ε (the
paper-bound ε̄ = ε/16 otherwise).
"""
import math
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from sweep_rows import points, rows  # noqa: E402


def read(folder, divisor=16.0):
    keys = {
        pid: (float(p["clip.clip_norm"]), float(p["privacy.epsilon"]) / divisor, int(p["train.epochs"]))
        for pid, p in points(folder).items()
    }
    out = defaultdict(lambda: ([], []))
    for pid, r in rows(folder):
        out[keys[pid]][0].append(100 * float(r["best_test_accuracy"]))
        out[keys[pid]][1].append(100 * float(r["final_test_accuracy"]))
    return out


def ms(xs):
    return f"{statistics.fmean(xs):.2f} ± {statistics.stdev(xs):.2f}" if len(xs) > 1 else (f"{xs[0]:.2f}" if xs else "—")


def gap(a, b):
    if len(a) < 2 or len(b) < 2:
        return "—"
    se = math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
    return f"{statistics.fmean(a) - statistics.fmean(b):+.2f} ± {se:.2f}"


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    tight = len(sys.argv) > 2 and sys.argv[2] == "pld"
    prefix, divisor, label = ("pld_", 1.0, "ε (PLD)") if tight else ("", 16.0, "ε̄")
    adp = read(os.path.join(root, prefix + "adp"), divisor)
    dp = read(os.path.join(root, prefix + "dpsgd"), divisor)
    print(f"| C_G | {label} | epochs | ADP best | DP-SGD best | ADP − DP (best) | ADP final | DP-SGD final | ADP − DP (final) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key in sorted(set(adp) | set(dp)):
        a, d = adp.get(key, ([], [])), dp.get(key, ([], []))
        print(f"| {key[0]:g} | {key[1]:g} | {key[2]} | {ms(a[0])} | {ms(d[0])} | {gap(a[0], d[0])} | {ms(a[1])} | {ms(d[1])} | {gap(a[1], d[1])} |")


if __name__ == "__main__":
    main()
