#!/usr/bin/env python3
"""The MNIST row of the DC-SGD paper's Tables IV and VIII from dpx's sweeps (this folder).

Reads <sweep>/summary.csv (or, while a sweep runs, its jobs' own summaries) of each confirmation
sweep present (selected DP-SGD C, DC-SGD-P p, the
Andrew et al. quantile and Du et al. decay baselines, DC-SGD-E and AutoClip, all on the fresh
seeds 1-5) and prints one Markdown table: final test accuracy, mean ± sample std over seeds, per
method and ε, beside the paper's (Wei et al., arXiv 2503.22988, Tables IV and VIII, CNN-MNIST,
Adam, no tuning charge, mean of 5 runs), and each method minus DP-SGD. Standard library only.

  python3 results/dcsgd_mnist_full/table.py results/dcsgd_mnist_full
"""
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from sweep_rows import cell, rows  # noqa: E402

# (folder, label, paper's accuracy at ε = 1, 2, 4)
METHODS = [
    ("confirm_dpsgd", "DP-SGD (C selected)", (94.78, 95.62, 95.95)),
    ("confirm_p", "DC-SGD-P (p selected)", (94.72, 95.08, 95.60)),
    ("e", "DC-SGD-E", (94.04, 94.19, 94.65)),
    ("confirm_quantile", "Andrew et al. (quantile, selected)", (94.69, 95.45, 96.16)),
    ("confirm_decay", "Du et al. (decay, selected)", (94.72, 95.63, 95.94)),
    ("auto", "AutoClip (AUTO-S)", (96.54, 96.83, 97.21)),
]
EPS = (1.0, 2.0, 4.0)


def read(folder):
    """Final accuracies by ε of the sweep in `folder` (None when it has not started)."""
    if not os.path.isdir(folder):
        return None
    acc = defaultdict(list)
    for _, r in rows(folder):
        acc[round(float(r["epsilon"]), 3)].append(100 * float(r["final_test_accuracy"]))
    return acc or None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    data = {m: read(os.path.join(root, m)) for m, _, _ in METHODS}
    base = data.get("confirm_dpsgd") or {}
    print("| method | ε = 1: dpx | paper | ε = 2: dpx | paper | ε = 4: dpx | paper | dpx − DP-SGD (ε 1 / 2 / 4) | paper − DP-SGD |")
    print("|---|---|---|---|---|---|---|---|---|")
    for m, label, paper in METHODS:
        acc = data[m]
        if acc is None:
            continue
        cols, deltas, pdeltas = [], [], []
        for i, e in enumerate(EPS):
            xs = acc.get(round(e, 3), [])
            cols += [cell(xs), f"{paper[i]:.2f}"]
            b = base.get(round(e, 3), [])
            if xs and b and m != "confirm_dpsgd":
                deltas.append(f"{statistics.fmean(xs) - statistics.fmean(b):+.2f}")
                pdeltas.append(f"{paper[i] - METHODS[0][2][i]:+.2f}")
            else:
                deltas.append("")
                pdeltas.append("")
        d = " / ".join(deltas) if any(deltas) else ""
        p = " / ".join(pdeltas) if any(pdeltas) else ""
        print(f"| {label} | " + " | ".join(cols) + f" | {d} | {p} |")


if __name__ == "__main__":
    main()
