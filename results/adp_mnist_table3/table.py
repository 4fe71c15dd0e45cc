#!/usr/bin/env python3
"""ADP-SGD's Table 3 (AdaGrad-norm learning rates) on MNIST from dpx's two sweeps (this folder).

Reads <dir>/adp and <dir>/dpsgd (each a `dpx sweep` output: summary.csv, or while it runs its jobs'
own summaries) and prints, per (C_G, ε̄), the best-over-run and the final test accuracy of each arm
as mean ± sample std (max) over seeds, ADP − DP-SGD, and the paper's best-accuracy cells (Wu et
al., arXiv 2110.07435, Table 3: CIFAR-10, T = 11,700, mean ± std (max) of 5). Standard library only.

  python3 results/adp_mnist_table3/table.py results/adp_mnist_table3
"""
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from sweep_rows import points, rows  # noqa: E402

# Paper, Table 3, best accuracy: (C_G, ε̄) -> (ADP mean, DP mean).
PAPER = {
    (1.0, 0.8): (56.68, 56.24), (1.0, 1.6): (62.09, 62.02), (1.0, 3.2): (64.51, 64.33), (1.0, 6.4): (67.75, 67.42),
    (2.5, 0.8): (56.27, 55.65), (2.5, 1.6): (62.38, 62.23), (2.5, 3.2): (64.29, 64.26), (2.5, 6.4): (67.55, 66.23),
}


def read(folder):
    # The cell: the clip norm (swept) and ε̄ = the nominal ε / 16 of the paper's bound.
    keys = {pid: float(p["clip.clip_norm"]) for pid, p in points(folder).items()}
    out = defaultdict(lambda: ([], []))
    for pid, r in rows(folder):
        key = (keys[pid], round(float(r["epsilon"]) / 16, 2))
        out[key][0].append(100 * float(r["best_test_accuracy"]))
        out[key][1].append(100 * float(r["final_test_accuracy"]))
    return out


def fmt(xs):
    if not xs:
        return "—"
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.fmean(xs):.2f} ± {sd:.2f} ({max(xs):.2f})"


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    adp, dp = read(os.path.join(root, "adp")), read(os.path.join(root, "dpsgd"))
    print("| C_G | ε̄ | seeds | ADP best | DP-SGD best | ADP − DP (best) | paper ADP − DP (best) | ADP final | DP-SGD final | ADP − DP (final) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(set(adp) | set(dp)):
        a, d = adp.get(key, ([], [])), dp.get(key, ([], []))
        gap = lambda i: (f"{statistics.fmean(a[i]) - statistics.fmean(d[i]):+.2f}" if a[i] and d[i] else "—")
        p = PAPER.get(key)
        pg = f"{p[0] - p[1]:+.2f}" if p else "—"
        print(f"| {key[0]:g} | {key[1]:g} | {len(a[0])} / {len(d[0])} | {fmt(a[0])} | {fmt(d[0])} | {gap(0)} | {pg} | {fmt(a[1])} | {fmt(d[1])} | {gap(1)} |")


if __name__ == "__main__":
    main()
