#!/usr/bin/env python3
"""Summary tables of the AdaCliP Table 2 reproduction (standard library only).

Reads the sweep outputs under results/adaclip_mnist_nn/ (dpsgd, dpsgd_lr_high, adaclip,
adaclip_lr_high, adaclip_lr_1; a sweep directory that is missing or incomplete contributes the
seeds that finished)
and writes results/adaclip_mnist_nn/summary_table.csv and table.md: mean ± std final test
accuracy over seeds for every (ε, method, learning rate) point, and the best learning rate per
(ε, method), selected on the test accuracy as the paper does (it has no validation split), next
to the paper's Table 2.
"""

import csv
import glob
import os
import statistics
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BASE = os.path.join(ROOT, "results", "adaclip_mnist_nn")
ARMS = [
    ("Abadi (DP-SGD, per-layer C = 4)", ["dpsgd", "dpsgd_lr_high"]),
    ("AdaCliP", ["adaclip", "adaclip_lr_high", "adaclip_lr_1"]),
]
# Pichapati et al. 2019, Table 2 (accuracy %), total ε at δ = 1e-5.
PAPER = {
    0.2: (85.55, 87.18),
    0.5: (90.23, 91.26),
    1.0: (92.92, 93.71),
    2.0: (94.96, 95.56),
    4.0: (95.91, 96.31),
}


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def runs(sweep):
    """(ε, σ_pca, lr, seed, accuracy, σ) of every finished seed of one sweep directory."""
    d = os.path.join(BASE, sweep)
    if not os.path.exists(os.path.join(d, "points.csv")):
        return []
    points = {p["id"]: p for p in read_csv(os.path.join(d, "points.csv"))}
    out = []
    # A point's summary.csv (committed; its seeds/ are not) is written when the sweep ends or is
    # interrupted; while it runs, the finished seeds' files are read instead.
    for pid, p in sorted(points.items()):
        path = os.path.join(d, "points", pid, "summary.csv")
        if os.path.exists(path):
            rows = read_csv(path)
        else:
            rows = [
                r
                for f in sorted(glob.glob(os.path.join(d, "points", pid, "seeds", "*.summary.csv")))
                for r in read_csv(f)
            ]
        for r in rows:
            if r["status"] != "completed":
                continue
            out.append(
                (
                    float(p["privacy.epsilon"]),
                    float(p["data.pca_noise_multiplier"]),
                    float(p["train.learning_rate"]),
                    int(r["seed"]),
                    float(r["final_test_accuracy"]),
                    float(r["noise_multiplier"]),
                )
            )
    return out


def mean_std(xs):
    m = statistics.mean(xs)
    s = statistics.stdev(xs) if len(xs) > 1 else float("nan")
    return m, s


def main():
    groups = defaultdict(list)
    sigma = {}
    for method, sweeps in ARMS:
        for sweep in sweeps:
            for eps, spca, lr, seed, acc, sig in runs(sweep):
                groups[(eps, method, lr)].append(acc)
                sigma[(eps, method, lr)] = (spca, sig)
    rows = []
    for key in sorted(groups, key=lambda k: (k[0], k[1], k[2])):
        eps, method, lr = key
        m, s = mean_std(groups[key])
        rows.append((eps, method, lr, sigma[key][0], sigma[key][1], len(groups[key]), m, s))
    with open(os.path.join(BASE, "summary_table.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["epsilon", "method", "learning_rate", "pca_noise_multiplier", "noise_multiplier",
             "seeds", "mean_test_accuracy", "std_test_accuracy"]
        )
        for r in rows:
            w.writerow([r[0], r[1], r[2], r[3], f"{r[4]:.6f}", r[5], f"{r[6]:.4f}", f"{r[7]:.4f}"])
    lines = [
        "| ε (total) | σ_pca | σ (gradients) | method | lr | seeds | final test accuracy (%) |",
        "|---|---|---|---|---|---|---|",
    ]
    for eps, method, lr, spca, sig, n, m, s in rows:
        lines.append(
            f"| {eps:g} | {spca:g} | {sig:.4f} | {method} | {lr:g} | {n} | {100 * m:.2f} ± {100 * s:.2f} |"
        )
    lines += [
        "",
        "Best learning rate per method and ε (selected on the test set, as the paper does):",
        "",
        "| ε | paper Abadi | dpx Abadi (lr) | paper AdaCliP | dpx AdaCliP (lr) | paper Δ | dpx Δ |",
        "|---|---|---|---|---|---|---|",
    ]
    for eps in sorted({r[0] for r in rows}):
        best = {}
        for method, _ in ARMS:
            cands = [r for r in rows if r[0] == eps and r[1] == method]
            if cands:
                best[method] = max(cands, key=lambda r: r[6])
        if len(best) < 2:
            continue
        a, b = best[ARMS[0][0]], best[ARMS[1][0]]
        pa, pb = PAPER.get(eps, (float("nan"), float("nan")))
        lines.append(
            f"| {eps:g} | {pa:.2f} | {100 * a[6]:.2f} ± {100 * a[7]:.2f} ({a[2]:g}) | {pb:.2f} | "
            f"{100 * b[6]:.2f} ± {100 * b[7]:.2f} ({b[2]:g}) | {pb - pa:+.2f} | {100 * (b[6] - a[6]):+.2f} |"
        )
    with open(os.path.join(BASE, "table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
