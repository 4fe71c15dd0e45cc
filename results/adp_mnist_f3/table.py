#!/usr/bin/env python3
"""ADP-SGD paper, Appendix F.3 (DP-SGD on MNIST, η_t = 1/√(2 + c·t)) from dpx's sweep.

Reads <dir>/summary.csv (or, while the sweep runs, its jobs' own summaries) and prints, per noise
multiplier σ and decay constant c, the final and best test accuracy (mean ± sample std over
seeds), the ε the run spent (RDP, δ = 1e-5), and each c > 0 minus c = 0 (the constant 1/√2) on
the final accuracy with its standard error. Standard library only.

  python3 results/adp_mnist_f3/table.py results/adp_mnist_f3
"""
import math
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from sweep_rows import points, rows  # noqa: E402


def point_keys(folder):
    return {
        pid: (float(p["noise.noise_multiplier"]), float(p["train.lr_schedule.c"]))
        for pid, p in points(folder).items()
    }


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    keys = point_keys(root)
    runs = defaultdict(list)
    for pid, r in rows(root):
        runs[keys[pid]].append((100 * float(r["final_test_accuracy"]), 100 * float(r["best_test_accuracy"]), float(r["epsilon"])))
    print("| σ | c | seeds | ε (RDP) | final test acc. | best test acc. | final − (c = 0) ± SE |")
    print("|---|---|---|---|---|---|---|")
    for (sigma, c) in sorted(runs):
        rs = runs[(sigma, c)]
        fin = [r[0] for r in rs]
        best = [r[1] for r in rs]
        sd = lambda xs: statistics.stdev(xs) if len(xs) > 1 else 0.0
        base = [r[0] for r in runs.get((sigma, 0.0), [])]
        if c > 0 and len(base) > 1 and len(fin) > 1:
            se = math.sqrt(sd(fin) ** 2 / len(fin) + sd(base) ** 2 / len(base))
            gap = f"{statistics.fmean(fin) - statistics.fmean(base):+.2f} ± {se:.2f}"
        else:
            gap = ""
        print(f"| {sigma:g} | {c:g} | {len(rs)} | {rs[0][2]:.3f} | {statistics.fmean(fin):.2f} ± {sd(fin):.2f} | {statistics.fmean(best):.2f} ± {sd(best):.2f} | {gap} |")


if __name__ == "__main__":
    main()
