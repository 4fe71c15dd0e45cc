#!/usr/bin/env python3
"""The CIFAR-10 mechanism table on the ScatterNet CNN recipe under PLD (this folder's README), from
the sweeps' summaries (whole or, while a sweep runs, per seed).

    python3 results/cifar_scatter_cnn_mechanisms_pld/table.py results/cifar_scatter_cnn_mechanisms_pld

Reads <dir>/bandmf (DP-SGD = 1 band, and BandMF with 4 bands), <dir>/balls_in_bins (7 batches per
epoch, 420 steps) and <dir>/balls_in_bins_equal_steps (6 batches per epoch for 61 epochs, 366
steps), and the linear recipe's table at equal tight ε (results/cifar_scatter_linear_mechanisms_pld)
beside it. Also prints each arm's difference from DP-SGD on the same seed.
Prints final test accuracy mean ± sample std over seeds, with σ, per (arm, ε); the BandMF "noise"
column is the strategy's error ratio for 367 steps of momentum 0.9 (0.2528, printed by
`dpx account --config configs/cifar_scatter_cnn_bandmf.toml --json`, field bandmf.error_ratio)
times (σ_4 / σ_1)².
"""
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from sweep_rows import by_arm_and_epsilon, by_arm_epsilon_and_seed, cell  # noqa: E402

ERROR_RATIO = {1: 1.0, 4: 0.2528}
ARMS = [(1, "DP-SGD (Poisson)"), (4, "BandMF, 4 bands"), ("bib", "balls-in-bins")]
EQUAL_STEPS = ("bib366", "balls-in-bins, 366 steps")


def load(folder, default_arm):
    return by_arm_and_epsilon(str(folder), default_arm)


def table(cells, sigma, arms=ARMS):
    print("| ε | " + " | ".join(name for _, name in arms) + " |")
    print("|---" * (len(arms) + 1) + "|")
    for eps in (1.0, 2.0, 4.0, 8.0):
        out = [f"{eps:g}"]
        for arm, _ in arms:
            sig = sigma.get((arm, eps))
            extra = f"σ {sig:.4g}" if sig else ""
            if arm == 4 and sig and sigma.get((1, eps)):
                extra += f"; noise {ERROR_RATIO[4] * (sig / sigma[(1, eps)]) ** 2:.2f}"
            text = cell(cells.get((arm, eps), []))
            out.append(f"{text} ({extra})" if extra else text)
        print("| " + " | ".join(out) + " |")


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)
    cells, sigma = load(root / "bandmf", 1)
    c2, s2 = load(root / "balls_in_bins", "bib")
    cells.update(c2)
    sigma.update(s2)
    c4, s4 = load(root / "balls_in_bins_equal_steps", EQUAL_STEPS[0])
    cells.update(c4)
    sigma.update(s4)
    arms = ARMS + [EQUAL_STEPS] if c4 else ARMS
    print("ScatterNet + CNN (this folder):")
    print()
    table(cells, sigma, arms)
    print()
    seeds = {}
    for sub, arm in (("bandmf", 1), ("balls_in_bins", "bib"), ("balls_in_bins_equal_steps", EQUAL_STEPS[0])):
        seeds.update(by_arm_epsilon_and_seed(str(root / sub), arm))
    print("Difference from DP-SGD on the same seed (in seed order; points):")
    print()
    print("| ε | " + " | ".join(name for _, name in arms[1:]) + " |")
    print("|---" * len(arms) + "|")
    for eps in (1.0, 2.0, 4.0, 8.0):
        base = seeds.get((1, eps), {})
        out = [f"{eps:g}"]
        for arm, _ in arms[1:]:
            mine = seeds.get((arm, eps), {})
            d = [mine[k] - base[k] for k in sorted(mine, key=int) if k in base]
            text = ", ".join(f"{x:+.2f}" for x in d)
            out.append(f"{text} (mean {statistics.mean(d):+.2f})" if d else "—")
        print("| " + " | ".join(out) + " |")
    linear = root.parent / "cifar_scatter_linear_mechanisms_pld"
    lc, ls = load(linear / "bandmf", 1)
    c3, s3 = load(linear / "balls_in_bins", "bib")
    lc.update(c3)
    ls.update(s3)
    if lc:
        print()
        print("ScatterNet + linear, the same arms at equal tight ε (cifar_scatter_linear_mechanisms_pld):")
        print()
        table(lc, ls)
        print()
        print("CNN minus linear, mean final accuracy (points):")
        print()
        print("| ε | " + " | ".join(name for _, name in ARMS) + " |")
        print("|---" * (len(ARMS) + 1) + "|")
        for eps in (1.0, 2.0, 4.0, 8.0):
            out = [f"{eps:g}"]
            for arm, _ in ARMS:
                a, b = cells.get((arm, eps)), lc.get((arm, eps))
                out.append(f"{statistics.mean(a) - statistics.mean(b):+.2f}" if a and b else "—")
            print("| " + " | ".join(out) + " |")


if __name__ == "__main__":
    main()
