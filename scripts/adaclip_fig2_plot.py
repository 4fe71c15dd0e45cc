#!/usr/bin/env python3
"""Draw Figure 2 of Pichapati et al., "AdaCliP: Adaptive Clipping for Private SGD" (regression
error against the dimension d) from the summary that `cargo run --release --example adaclip_fig2
-- DIR` writes.

Reads DIR/fig2_summary.csv and draws, into the same directory (or --out), one panel per initial
point and error column:
  fig2_<theta0>_<column>.svg   error against d, log-log: DP-SGD, AdaCliP at each h2 with the
                               paper's s0 = sqrt(h1*h2) (thin), and the best AdaCliP arm per d
                               (selected on the same runs, so optimistic for AdaCliP), mean over
                               the seeds with a +-1 std bar
Standard library only.

  python3 scripts/adaclip_fig2_plot.py results/adaclip_synthetic
"""
import argparse
import csv
import math
import os
from collections import defaultdict

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
W, H, LEFT, RIGHT, TOP, BOTTOM = 640, 420, 70, 210, 30, 50


def read(path):
    rows = defaultdict(dict)
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            rows[(r["arm"], r["theta0"])][int(r["d"])] = r
    return rows


def panel(rows, theta0, column, out):
    series = []
    dims = sorted({d for (arm, t), by_d in rows.items() if t == theta0 for d in by_d})
    dp = rows[("dp_sgd", theta0)]
    series.append(("DP-SGD (C = 1)", COLORS[0], 2.5, [(d, dp[d]) for d in dims]))
    adaclip = sorted(a for (a, t) in rows if t == theta0 and a.startswith("adaclip_"))
    paper = [a for a in adaclip if a.endswith("s0_paper")]
    for k, arm in enumerate(sorted(paper, key=lambda a: float(a.split("_")[2]))):
        h2 = arm.split("_")[2]
        by_d = rows[(arm, theta0)]
        series.append((f"AdaCliP h2 = {h2}", COLORS[(k + 2) % len(COLORS)], 1.0,
                       [(d, by_d[d]) for d in dims]))
    best = []
    for d in dims:
        arm = min(adaclip, key=lambda a: float(rows[(a, theta0)][d][column + "_mean"]))
        best.append((d, rows[(arm, theta0)][d]))
    series.append(("AdaCliP, best h2/s0 per d", COLORS[1], 2.5, best))

    values = [float(r[column + "_mean"]) for _, _, _, pts in series for _, r in pts]
    values = [v for v in values if v > 0]
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    x0, x1 = math.log10(dims[0]), math.log10(dims[-1])

    def px(d):
        return LEFT + (math.log10(d) - x0) / (x1 - x0) * (W - LEFT - RIGHT)

    def py(v):
        v = max(v, 10.0 ** lo)
        return TOP + (hi - math.log10(v)) / (hi - lo) * (H - TOP - BOTTOM)

    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           'font-family="sans-serif" font-size="11">',
           f'<rect width="{W}" height="{H}" fill="white"/>']
    for e in range(lo, hi + 1):
        y = py(10.0 ** e)
        svg.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>')
        svg.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">1e{e}</text>')
    for d in dims:
        x = px(d)
        svg.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{H - BOTTOM}" stroke="#eee"/>')
        svg.append(f'<text x="{x:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{d}</text>')
    svg.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 10}" text-anchor="middle">'
               'dimension d</text>')
    label = {"final_error": "final error |theta_T - theta*|^2",
             "last_epoch_error": "error averaged over the last epoch"}[column]
    svg.append(f'<text x="{LEFT}" y="{TOP - 10}">{label}, theta0 = {theta0}</text>')
    for k, (name, color, width, pts) in enumerate(series):
        coords = [(px(d), py(float(r[column + "_mean"]))) for d, r in pts]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
        svg.append(f'<polyline points="{path}" fill="none" stroke="{color}" '
                   f'stroke-width="{width}"/>')
        if width > 2:
            for d, r in pts:
                m, s = float(r[column + "_mean"]), float(r[column + "_std"])
                x = px(d)
                svg.append(f'<line x1="{x:.1f}" y1="{py(m + s):.1f}" x2="{x:.1f}" '
                           f'y2="{py(max(m - s, 1e-300)):.1f}" stroke="{color}"/>')
        ly = TOP + 14 * k + 6
        svg.append(f'<line x1="{W - RIGHT + 10}" y1="{ly}" x2="{W - RIGHT + 30}" y2="{ly}" '
                   f'stroke="{color}" stroke-width="{width}"/>')
        svg.append(f'<text x="{W - RIGHT + 34}" y="{ly + 4}">{name}</text>')
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--out")
    args = ap.parse_args()
    out = args.out or args.dir
    rows = read(os.path.join(args.dir, "fig2_summary.csv"))
    for theta0 in ["zeros", "normal"]:
        for column in ["final_error", "last_epoch_error"]:
            path = os.path.join(out, f"fig2_{theta0}_{column}.svg")
            panel(rows, theta0, column, path)
            print("wrote", path)


if __name__ == "__main__":
    main()
