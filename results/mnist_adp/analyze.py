#!/usr/bin/env python3
"""Table of the ADP-SGD MNIST grid (results/mnist_adp/run.sh): ADP vs DP-SGD per point.

For every (arm, C_G, ε̄, epochs) with both schedules complete: mean ± std over seeds of the best
and the final test accuracy, the gap mean(best ADP) − mean(best DP) with its pooled standard
error sqrt(s_A²/n_A + s_D²/n_D), z = gap / SE, and the ε each run reports (under the arm's
accountant: the paper's bound for `paper`, RDP for `rdp`). docs/methods/adp_sgd.md §4.2's pass criterion:
at ε̄ = 0.8, C_G = 1, 40 epochs, z > 2 and gap(40) > gap(5), checked for both arms.

Usage: analyze.py [RUNS_DIR]   (default results/mnist_adp/runs). Python 3 standard library only.
"""

import csv
import math
import os
import statistics as st
import sys


def load(runs):
    out = {}
    for name in sorted(os.listdir(runs)):
        path = os.path.join(runs, name, "summary.csv")
        if not os.path.exists(path):
            continue
        # <arm>_<schedule>_c<C>_eb<ε̄>_ep<epochs>[_s<first>-<last>]: extra seeds pool into the point.
        arm, sched, c, eb, ep = name.split("_")[:5]
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        out.setdefault((arm, float(c[1:]), float(eb[2:]), int(ep[2:]), sched), []).extend(rows)
    return out


def ms(v):
    return st.fmean(v), (st.stdev(v) if len(v) > 1 else 0.0)


def main(runs):
    data = load(runs)
    gaps = {}
    print("| arm | C_G | ε̄ | epochs | seeds | ε DP / ADP | best DP | best ADP | gap (pp) | SE | z "
          "| final DP | final ADP |")
    print("|---" * 13 + "|")
    keys = sorted({k[:4] for k in data}, key=lambda k: (k[0], k[1], k[2], k[3]))
    for k in keys:
        dp, adp = data.get(k + ("constant",)), data.get(k + ("adp",))
        if not dp or not adp:
            continue
        bd = [100 * float(r["best_test_accuracy"]) for r in dp]
        ba = [100 * float(r["best_test_accuracy"]) for r in adp]
        fd = [100 * float(r["final_test_accuracy"]) for r in dp]
        fa = [100 * float(r["final_test_accuracy"]) for r in adp]
        (md, sd), (ma, sa) = ms(bd), ms(ba)
        gap = ma - md
        se = math.sqrt(sd**2 / len(bd) + sa**2 / len(ba))
        z = gap / se if se > 0 else math.inf
        gaps[k] = (gap, z)
        eps_d, eps_a = float(dp[0]["epsilon"]), float(adp[0]["epsilon"])
        (mfd, sfd), (mfa, sfa) = ms(fd), ms(fa)
        print(f"| {k[0]} | {k[1]:g} | {k[2]:g} | {k[3]} | {len(bd)}/{len(ba)} | {eps_d:.4g} / {eps_a:.4g} "
              f"| {md:.2f} ± {sd:.2f} | {ma:.2f} ± {sa:.2f} | {gap:+.2f} | {se:.2f} | {z:+.1f} "
              f"| {mfd:.2f} ± {sfd:.2f} | {mfa:.2f} ± {sfa:.2f} |")
    print()
    for arm in ("paper", "rdp"):
        g40, g5 = gaps.get((arm, 1.0, 0.8, 40)), gaps.get((arm, 1.0, 0.8, 5))
        if g40 and g5:
            ok = g40[1] > 2 and g40[0] > g5[0]
            print(f"pass criterion ({arm} arm, ε̄ = 0.8, C_G = 1): gap(40) = {g40[0]:+.2f} pp "
                  f"(z = {g40[1]:+.1f}), gap(5) = {g5[0]:+.2f} pp -> {'HELD' if ok else 'NOT MET'}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/mnist_adp/runs")
