#!/usr/bin/env python3
"""The MNIST mechanism table under PLD (this folder's README) from the sweeps' summary.csv files.

    python3 results/mnist_mechanisms_pld_40ep/table.py results/mnist_mechanisms_pld_40ep

Reads <dir>/poisson_bandmf/summary.csv and <dir>/balls_in_bins/summary.csv, and the RDP runs of
results/mnist_bandmf_40ep and results/mnist_balls_in_bins_40ep beside them for comparison. Prints
final test accuracy mean ± sample std over seeds, with σ, per (arm, ε); the BandMF "noise" column
is the strategy's error ratio (printed by `dpx account --config ... --json`, field
bandmf.error_ratio, for 40 epochs: 0.13011 at 8 bands, 0.03746 at 32) times (σ_b / σ_1)².
"""
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from sweep_rows import by_arm_and_epsilon  # noqa: E402

ERROR_RATIO = {1: 1.0, 8: 0.13010544968122517, 32: 0.03745870254125334}


def load(folder, default_arm):
    return by_arm_and_epsilon(str(folder), default_arm)


def fmt(vals):
    if not vals:
        return "—"
    m = statistics.mean(vals)
    s = statistics.stdev(vals) if len(vals) > 1 else 0.0
    return f"{m:.2f} ± {s:.2f}% ({len(vals)})"


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
    cells, sigma = load(root / "poisson_bandmf", 1)
    c2, s2 = load(root / "balls_in_bins", "bib")
    cells.update(c2)
    sigma.update(s2)
    repo = root.parent
    rdp, rdp_sigma = {}, {}
    for sub, arm in (("mnist_bandmf_40ep", 1), ("mnist_balls_in_bins_40ep", "bib")):
        if (repo / sub / "points.csv").exists():
            c, s = load(repo / sub, arm)
            rdp.update(c)
            rdp_sigma.update(s)
    arms = [(1, "DP-SGD (Poisson)"), ("bib", "balls-in-bins"), (8, "BandMF, 8 bands"), (32, "BandMF, 32 bands")]
    print("| ε | " + " | ".join(name for _, name in arms) + " |")
    print("|---" * (len(arms) + 1) + "|")
    for eps in (1.0, 2.0, 4.0, 8.0):
        row = [f"{eps:g}"]
        for arm, _ in arms:
            sig = sigma.get((arm, eps))
            cell = fmt(cells.get((arm, eps), []))
            extra = f"σ {sig:.4g}" if sig else ""
            if isinstance(arm, int) and arm > 1 and sig and sigma.get((1, eps)):
                extra += f"; noise {ERROR_RATIO[arm] * (sig / sigma[(1, eps)]) ** 2:.2f}"
            row.append(f"{cell} ({extra})" if extra else cell)
        print("| " + " | ".join(row) + " |")
    print()
    print("Against the same arms calibrated by RDP (final accuracy; σ RDP → PLD):")
    print()
    print("| ε | " + " | ".join(name for _, name in arms) + " |")
    print("|---" * (len(arms) + 1) + "|")
    for eps in (1.0, 2.0, 4.0, 8.0):
        row = [f"{eps:g}"]
        for arm, _ in arms:
            a, b = rdp.get((arm, eps)), cells.get((arm, eps))
            if not a or not b:
                row.append("—")
                continue
            d = statistics.mean(b) - statistics.mean(a)
            row.append(
                f"{statistics.mean(a):.2f} → {statistics.mean(b):.2f} ({d:+.2f}); "
                f"σ {rdp_sigma[(arm, eps)]:.4g} → {sigma[(arm, eps)]:.4g}"
            )
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
