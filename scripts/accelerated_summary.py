#!/usr/bin/env python3
"""Summarise a dpx sweep of the accelerated methods (configs/sweeps/accelerated_*.toml).

Reads <sweep>/points.csv, <sweep>/summary.csv and every point's metrics.csv; writes into the
directory given by --out (default: the sweep directory):
  accelerated_summary.csv  one row per (batch, c, method, T): seeds, steps run (T'), mean / std /
                           min / max of the final excess risk F(x_T') - F*, mean epsilon spent
  accelerated_tables.md    per (batch, c): methods x T tables of the mean final excess risk
  curves_<batch>_c<c>.svg  mean excess risk (over seeds) against the step, log scale, one panel
                           per (batch, c), one line per (method, T)
Standard library only.

  python3 scripts/accelerated_summary.py results/sweeps/accelerated_full --out results/accelerated
"""
import argparse
import csv
import math
import os
import statistics
from collections import defaultdict

METHOD_ORDER = ["GD", "HB", "NAG", "MASG", "NAG-opt", "MASG-opt"]
SHORT = {"gd": "GD", "heavy_ball": "HB", "heavy_ball_ema": "HB", "nesterov": "NAG", "masg": "MASG"}


def label(method, dividing):
    return SHORT[method] + ("-opt" if dividing == "true" else "")


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sweep")
    ap.add_argument("--out")
    ap.add_argument("--batch-default", default="100000")
    args = ap.parse_args()
    out = args.out or args.sweep
    os.makedirs(out, exist_ok=True)
    points = {p["id"]: p for p in read_csv(os.path.join(args.sweep, "points.csv"))}
    rows = read_csv(os.path.join(args.sweep, "summary.csv"))
    cells = defaultdict(list)
    for r in rows:
        p = points[r["point_id"]]
        key = (
            p.get("train.batch_size", args.batch_default),
            float(p["accelerated.step_constant"]),
            label(p["accelerated.method"], p["accelerated.noise_dividing"]),
            int(p["train.steps"]),
        )
        cells[key].append((r, p["id"]))
    name = os.path.basename(os.path.normpath(args.sweep))
    summary = []
    for key in sorted(cells, key=lambda k: (k[0], k[1], METHOD_ORDER.index(k[2]), k[3])):
        rs = [r for r, _ in cells[key]]
        risk = [float(r["final_excess_risk"]) for r in rs]
        summary.append({
            "batch_size": key[0], "step_constant": key[1], "method": key[2], "steps": key[3],
            "steps_run": rs[0]["steps"], "seeds": len(rs),
            "excess_risk_mean": statistics.fmean(risk),
            "excess_risk_std": statistics.stdev(risk) if len(risk) > 1 else 0.0,
            "excess_risk_min": min(risk), "excess_risk_max": max(risk),
            "epsilon_mean": statistics.fmean(float(r["epsilon"]) for r in rs),
            "diverged": sum(r["status"] != "completed" for r in rs),
        })
    with open(os.path.join(out, f"{name}_summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summary[0].keys()))
        w.writeheader()
        for s in summary:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in s.items()})
    # Tables.
    by = defaultdict(dict)
    for s in summary:
        by[(s["batch_size"], s["step_constant"])][(s["method"], s["steps"])] = s
    lines = [f"# {name}: mean final excess risk F(x_T) - F* over seeds (T' for the -opt rows)\n"]
    for (m, c), cell in sorted(by.items()):
        ts = sorted({t for (_, t) in cell})
        lines.append(f"\n## m = {m}, c = {c}\n")
        lines.append("| method | " + " | ".join(f"T = {t}" for t in ts) + " |")
        lines.append("|---|" + "---|" * len(ts))
        for meth in METHOD_ORDER:
            if not any((meth, t) in cell for t in ts):
                continue
            vals = []
            for t in ts:
                s = cell.get((meth, t))
                if s is None:
                    vals.append("")
                    continue
                v = f"{s['excess_risk_mean']:.3g} ± {s['excess_risk_std']:.2g}"
                if meth.endswith("-opt"):
                    v += f" (T'={s['steps_run']})"
                vals.append(v)
            lines.append(f"| {meth} | " + " | ".join(vals) + " |")
    with open(os.path.join(out, f"{name}_tables.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    # Curves: mean excess risk per evaluation step over seeds.
    curves = defaultdict(dict)
    for key, items in cells.items():
        pid = items[0][1]
        acc = defaultdict(list)
        for r in read_csv(os.path.join(args.sweep, "points", pid, "metrics.csv")):
            acc[int(r["step"])].append(float(r["excess_risk"]))
        curves[(key[0], key[1])][(key[2], key[3])] = sorted(
            (t, statistics.fmean(v)) for t, v in acc.items())
    for (m, c), series in curves.items():
        svg(os.path.join(out, f"{name}_curves_m{m}_c{c}.svg"), f"{name}: m = {m}, c = {c}", series)


COLORS = {"GD": "#1f77b4", "HB": "#ff7f0e", "NAG": "#2ca02c", "MASG": "#d62728",
          "NAG-opt": "#9467bd", "MASG-opt": "#8c564b"}
DASH = {50: "1,3", 100: "4,2", 200: "8,3", 400: "12,3,2,3", 1000: ""}


def svg(path, title, series):
    W, H, L, R, T, B = 900, 560, 70, 170, 40, 50
    tmax = max(t for s in series.values() for t, _ in s)
    ys = [v for s in series.values() for _, v in s if v > 0]
    lo, hi = math.floor(math.log10(max(min(ys), 1e-6))), math.ceil(math.log10(max(ys)))
    X = lambda t: L + (W - L - R) * t / tmax
    Y = lambda v: T + (H - T - B) * (hi - math.log10(max(v, 10 ** lo))) / (hi - lo)
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{W/2}" y="20" text-anchor="middle" font-size="14">{title}</text>']
    for k in range(lo, hi + 1):
        o.append(f'<line x1="{L}" x2="{W-R}" y1="{Y(10**k):.1f}" y2="{Y(10**k):.1f}" stroke="#ddd"/>')
        o.append(f'<text x="{L-5}" y="{Y(10**k)+4:.1f}" text-anchor="end">1e{k}</text>')
    for t in range(0, tmax + 1, max(1, tmax // 5)):
        o.append(f'<text x="{X(t):.1f}" y="{H-B+18}" text-anchor="middle">{t}</text>')
    o.append(f'<text x="{(L+W-R)/2}" y="{H-10}" text-anchor="middle">step t</text>')
    o.append(f'<text x="15" y="{H/2}" transform="rotate(-90 15 {H/2})" text-anchor="middle">mean F(x_t) - F*</text>')
    o.append(f'<rect x="{L}" y="{T}" width="{W-L-R}" height="{H-T-B}" fill="none" stroke="black"/>')
    ly = T
    for (meth, steps) in sorted(series, key=lambda k: (METHOD_ORDER.index(k[0]), k[1])):
        pts = " ".join(f"{X(t):.1f},{Y(v):.1f}" for t, v in series[(meth, steps)])
        o.append(f'<polyline fill="none" stroke="{COLORS[meth]}" stroke-width="1.5" stroke-dasharray="{DASH.get(steps, "")}" points="{pts}"/>')
    for meth in METHOD_ORDER:
        if any(k[0] == meth for k in series):
            o.append(f'<line x1="{W-R+10}" x2="{W-R+35}" y1="{ly+10}" y2="{ly+10}" stroke="{COLORS[meth]}" stroke-width="2"/>')
            o.append(f'<text x="{W-R+40}" y="{ly+14}">{meth}</text>')
            ly += 18
    ly += 10
    for steps, d in DASH.items():
        o.append(f'<line x1="{W-R+10}" x2="{W-R+35}" y1="{ly+10}" y2="{ly+10}" stroke="black" stroke-dasharray="{d}"/>')
        o.append(f'<text x="{W-R+40}" y="{ly+14}">T = {steps}</text>')
        ly += 18
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
