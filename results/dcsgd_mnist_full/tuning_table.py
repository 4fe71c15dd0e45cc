#!/usr/bin/env python3
"""The MNIST row of the DC-SGD paper's Tables II and III (tuning cost charged) from dpx's sweeps.

Each `charged_<charge>_<method>` folder ran the method at the σ per run that charges the paper's
grid of G configurations at a total ε′ of 2, 4 or 8 (δ = 1e-5): `charge` = `rdp` (the G runs
compose; Table III) or `lt` (Liu-Talwar random stopping; Table II). DC-SGD-E tunes nothing
(G = 1), so one folder, `charged_e`, serves both tables. A run's row records its σ; this script
maps σ back to ε′ and prints, per table, final test accuracy (mean ± sample std over seeds) beside
the paper's (Wei et al., arXiv 2503.22988, Tables II and III, row M, Adam), and each method
minus DP-SGD. Standard library only.

  python3 results/dcsgd_mnist_full/tuning_table.py results/dcsgd_mnist_full
"""
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from sweep_rows import cell, rows  # noqa: E402

EPS = (2.0, 4.0, 8.0)
# σ per run at ε′ = 2, 4, 8 (`dpx account ... --tuning-runs G [--tuning-charge random-stopping]`,
# N = 60000, B = 256, 2344 steps, δ = 1e-5), as in the sweep files.
SIGMA = {
    ("rdp", "dpsgd"): (1.57417, 1.00927, 0.741706),
    ("lt", "dpsgd"): (2.8056, 1.8055, 1.26357),
    ("rdp", "p"): (1.50953, 0.978591, 0.726824),
    ("lt", "p"): (2.79578, 1.80223, 1.26258),
    ("rdp", "quantile"): (3.06531, 1.75088, 1.10668),
    ("lt", "quantile"): (2.91725, 1.86897, 1.30219),
    ("rdp", "decay"): (4.27418, 2.37694, 1.42496),
    ("lt", "decay"): (2.9655, 1.90377, 1.33164),
    (None, "e"): (0.855002, 0.676392, 0.549364),
}
# (method, label, G, Table II (LT) paper row, Table III (RDP) paper row), ε′ = 2 / 4 / 8
METHODS = [
    ("dpsgd", "DP-SGD (C selected)", 10, (92.39, 93.84, 95.29), (94.24, 95.08, 95.99)),
    ("p", "DC-SGD-P (p selected)", 9, (92.06, 93.75, 94.54), (94.18, 94.91, 95.78)),
    ("e", "DC-SGD-E (nothing tuned)", 1, (94.18, 94.70, 94.95), (94.18, 94.70, 94.95)),
    ("quantile", "Andrew et al. (quantile)", 45, (92.12, 93.54, 94.99), (92.37, 93.82, 94.67)),
    ("decay", "Du et al. (decay)", 90, (91.46, 93.65, 94.86), (91.11, 93.42, 94.06)),
]


def read(root, charge, method):
    folder = os.path.join(root, "charged_e" if method == "e" else f"charged_{charge}_{method}")
    if not os.path.isdir(folder):
        return None
    sigmas = SIGMA[(None, "e") if method == "e" else (charge, method)]
    acc = defaultdict(list)
    for _, r in rows(folder):
        s = float(r["noise_multiplier"])
        for e, target in zip(EPS, sigmas):
            if abs(s - target) <= 1e-6 * target:
                acc[e].append(100 * float(r["final_test_accuracy"]))
    return acc or None


def table(root, charge, title, paper_index):
    print(f"**{title}**\n")
    print("| method | G | σ per run (ε′ 2 / 4 / 8) | ε′ = 2: dpx | paper | ε′ = 4: dpx | paper | ε′ = 8: dpx | paper | dpx − DP-SGD | paper − DP-SGD |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    data = {m: read(root, charge, m) for m, *_ in METHODS}
    base = data.get("dpsgd") or {}
    for m, label, g, *papers in METHODS:
        acc = data[m]
        paper = papers[paper_index]
        sig = SIGMA[(None, "e") if m == "e" else (charge, m)]
        cols, d, pd = [], [], []
        for i, e in enumerate(EPS):
            xs = (acc or {}).get(e, [])
            cols += [cell(xs), f"{paper[i]:.2f}"]
            b = base.get(e, [])
            if xs and b and m != "dpsgd":
                d.append(f"{statistics.fmean(xs) - statistics.fmean(b):+.2f}")
                pd.append(f"{paper[i] - METHODS[0][3 + paper_index][i]:+.2f}")
        sig_text = " / ".join(f"{s:g}" for s in sig)
        print(f"| {label} | {g} | {sig_text} | " + " | ".join(cols) + f" | {' / '.join(d)} | {' / '.join(pd)} |")
    print()


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    table(root, "rdp", "Table III (grid charged by RDP composition of its G runs)", 1)
    table(root, "lt", "Table II (grid charged by Liu-Talwar random stopping)", 0)


if __name__ == "__main__":
    main()
