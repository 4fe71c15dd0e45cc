#!/usr/bin/env python3
"""DC-SGD Table V (SGD momentum 0.9, lr tuned), MNIST row: the selection and confirmation tables.

    python3 results/dcsgd_mnist_full/momentum_table.py results/dcsgd_mnist_full

Reads <dir>/momentum_select_<m>[_edge]/summary.csv (seed 0, one row per learning rate) and
<dir>/momentum_confirm_<m>/summary.csv (the selected learning rate, fresh seeds) for the five
methods, and prints (1) seed 0's accuracy per learning rate and the selected one, (2) the
confirmation mean ± std beside the paper's Table V, with each method's difference to DP-SGD.
"""
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from sweep_rows import points, rows  # noqa: E402

METHODS = [
    ("dpsgd", "DP-SGD (C as selected with Adam)"),
    ("p", "DC-SGD-P (p = 0.9)"),
    ("e", "DC-SGD-E"),
    ("quantile", "Andrew et al. (quantile)"),
    ("decay", "Du et al. (decay)"),
]
EPS = (1.0, 2.0, 4.0)
# Wei et al., arXiv 2503.22988, Table V, row M (DP-SGD, P, E, Andrew, Du at ε = 1 | 2 | 4).
PAPER = {
    "dpsgd": (94.51, 95.86, 96.25),
    "p": (93.98, 94.86, 95.89),
    "e": (94.06, 94.34, 94.64),
    "quantile": (94.16, 95.53, 96.34),
    "decay": (95.23, 96.10, 96.56),
}


def sweep(folder):
    """(swept keys, row) for every completed job of the sweep in `folder`; none if absent."""
    if not (folder / "points.csv").exists():
        return
    keys = points(folder)
    for pid, row in rows(folder):
        yield keys[pid], row


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
    selected = {}
    print("Seed 0, final test accuracy (%) per learning rate; * = selected")
    print()
    lrs = set()
    sel = defaultdict(dict)
    for m, _ in METHODS:
        for sub in (f"momentum_select_{m}", f"momentum_select_{m}_edge"):
            for k, r in sweep(root / sub):
                lr = float(k["train.learning_rate"])
                lrs.add(lr)
                sel[m][(float(k["privacy.epsilon"]), lr)] = 100 * float(r["final_test_accuracy"])
    lrs = sorted(lrs)
    print("| method | ε | " + " | ".join(f"lr {lr:g}" for lr in lrs) + " |")
    print("|---|---|" + "---|" * len(lrs))
    for m, name in METHODS:
        for eps in EPS:
            cells = {lr: sel[m].get((eps, lr)) for lr in lrs}
            have = {lr: a for lr, a in cells.items() if a is not None}
            if not have:
                continue
            best = max(have, key=lambda lr: have[lr])
            selected[(m, eps)] = best
            out = []
            for lr in lrs:
                a = cells[lr]
                out.append("—" if a is None else (f"**{a:.2f}***" if lr == best else f"{a:.2f}"))
            print(f"| {name} | {eps:g} | " + " | ".join(out) + " |")
    print()
    print("Confirmation: the selected learning rate on fresh seeds, final test accuracy (%)")
    print()
    conf = defaultdict(list)
    for m, _ in METHODS:
        for k, r in sweep(root / f"momentum_confirm_{m}"):
            conf[(m, float(k["privacy.epsilon"]))].append(100 * float(r["final_test_accuracy"]))
    print("| method | " + " | ".join(f"ε = {e:g}: lr, dpx | paper" for e in EPS) + " | dpx − DP-SGD | paper − DP-SGD |")
    print("|---|" + "---|---|" * len(EPS) + "---|---|")
    for m, name in METHODS:
        out, dd, pd = [], [], []
        for i, eps in enumerate(EPS):
            v = conf.get((m, eps), [])
            lr = selected.get((m, eps))
            if v:
                sd = statistics.stdev(v) if len(v) > 1 else 0.0
                out.append(f"{lr:g}, {statistics.mean(v):.2f} ± {sd:.2f} ({len(v)})")
            else:
                out.append("—")
            out.append(f"{PAPER[m][i]:.2f}")
            base = conf.get(("dpsgd", eps), [])
            if m != "dpsgd" and v and base:
                dd.append(f"{statistics.mean(v) - statistics.mean(base):+.2f}")
                pd.append(f"{PAPER[m][i] - PAPER['dpsgd'][i]:+.2f}")
        print(f"| {name} | " + " | ".join(out) + f" | {' / '.join(dd)} | {' / '.join(pd)} |")


if __name__ == "__main__":
    main()
