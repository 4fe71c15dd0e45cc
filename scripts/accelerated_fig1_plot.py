#!/usr/bin/env python3
"""Draw Figure 1 of Kuru et al. (DP heavy ball / Nesterov / multi-stage) from dpx's CSVs.

Reads the two CSVs that `cargo run --example accelerated_fig1 -- DIR` writes and draws, into the
same directory (or --out):
  fig1_rate_vs_momentum.svg        the paper's left panel: the rate rho against the momentum beta
                                   for each step size alpha*L, three readings of it (heavy ball's
                                   exact quadratic rate, eq. (26) as printed, and the rate
                                   Prop. 3.4's LMI certifies)
  fig1_bound_c<c_w>_a<alpha>.svg   the right panels: at each horizon T (its own run, noise
                                   variance sigma_T^2 = (T c_w)^2), Thm. 3.5's bound with the
                                   paper's C_t = t and rho of eq. (26), the same bound with the
                                   valid C_t = ||M^T|| / rho^T, Prop. 3.4's bound, and the exact
                                   E[F(x_T)] - F*, one colour per momentum rule, log scale
Standard library only.

  python3 scripts/accelerated_fig1_plot.py results/accelerated
"""
import argparse
import csv
import math
import os
from collections import defaultdict

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
# (column, legend, dash pattern) of the bound panels.
BOUNDS = [
    ("bound_paper_ct_t_eq26", "Thm 3.5, C_t = t, rho (26)", "6,3"),
    ("bound_valid_ct", "Thm 3.5, valid C_t", "2,2"),
    ("bound_prop34", "Prop 3.4 (LMI)", "10,3,2,3"),
    ("exact_excess", "exact E[F(x_T)] - F*", ""),
]
RULES = ["0", "0.3", "0.7", "optimal_eq26", "optimal_heavy_ball"]


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class Panel:
    """One SVG chart: linear x, linear or log10 y, a legend on the right."""

    W, H, L, R, T, B = 900, 560, 80, 250, 40, 50

    def __init__(self, title, x_label, y_label, x_range, y_range, log_y):
        self.title, self.x_label, self.y_label = title, x_label, y_label
        self.x0, self.x1 = x_range
        self.log_y = log_y
        self.y0, self.y1 = (math.log10(y_range[0]), math.log10(y_range[1])) if log_y else y_range
        self.body = []
        self.legend = []

    def x(self, v):
        return self.L + (self.W - self.L - self.R) * (v - self.x0) / (self.x1 - self.x0)

    def y(self, v):
        if self.log_y:
            v = math.log10(max(v, 10 ** self.y0))
        v = min(max(v, self.y0), self.y1)
        return self.T + (self.H - self.T - self.B) * (self.y1 - v) / (self.y1 - self.y0)

    def line(self, pts, color, dash):
        pts = [(a, b) for a, b in pts if b is not None and math.isfinite(b)]
        if not pts:
            return
        path = " ".join(f"{self.x(a):.1f},{self.y(b):.1f}" for a, b in pts)
        self.body.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" '
                         f'stroke-dasharray="{dash}" points="{path}"/>')

    def key(self, text, color, dash):
        self.legend.append((text, color, dash))

    def svg(self):
        W, H, L, R, T, B = self.W, self.H, self.L, self.R, self.T, self.B
        o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
             'font-family="sans-serif" font-size="12">',
             f'<rect width="{W}" height="{H}" fill="white"/>',
             f'<text x="{(L + W - R) / 2}" y="22" text-anchor="middle" font-size="14">{self.title}</text>']
        if self.log_y:
            ticks = [(10.0 ** k, f"1e{k}") for k in range(math.ceil(self.y0), math.floor(self.y1) + 1)]
        else:
            ticks = [(self.y0 + (self.y1 - self.y0) * k / 5, None) for k in range(6)]
        for v, text in ticks:
            yy = self.y(v)
            o.append(f'<line x1="{L}" x2="{W - R}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#ddd"/>')
            o.append(f'<text x="{L - 5}" y="{yy + 4:.1f}" text-anchor="end">{text or f"{v:.2f}"}</text>')
        for k in range(6):
            v = self.x0 + (self.x1 - self.x0) * k / 5
            o.append(f'<text x="{self.x(v):.1f}" y="{H - B + 18}" text-anchor="middle">{v:g}</text>')
        o.append(f'<text x="{(L + W - R) / 2}" y="{H - 10}" text-anchor="middle">{self.x_label}</text>')
        o.append(f'<text x="18" y="{H / 2}" transform="rotate(-90 18 {H / 2})" '
                 f'text-anchor="middle">{self.y_label}</text>')
        o.append(f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" stroke="black"/>')
        o.extend(self.body)
        ly = T
        for text, color, dash in self.legend:
            o.append(f'<line x1="{W - R + 10}" x2="{W - R + 40}" y1="{ly + 10}" y2="{ly + 10}" '
                     f'stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>')
            o.append(f'<text x="{W - R + 46}" y="{ly + 14}">{text}</text>')
            ly += 18
        o.append("</svg>")
        return "\n".join(o) + "\n"


def num(s):
    return float(s) if s not in ("", None) else None


def rate_panel(rows):
    p = Panel("Fig. 1 (left): rate against momentum, mu = 0.5, L = 1", "momentum beta",
              "rate rho", (0.0, 1.0), (0.0, 1.0), log_y=False)
    alphas = sorted({r["alpha"] for r in rows}, key=float)
    for i, a in enumerate(alphas):
        rs = [r for r in rows if r["alpha"] == a]
        for col, dash, what in (("rho_heavy_ball", "", "heavy ball (quadratic)"),
                                ("rho_eq26_as_printed", "6,3", "eq. (26) as printed"),
                                ("rho_lmi", "2,2", "Prop. 3.4 LMI (certified)")):
            p.line([(float(r["beta"]), num(r[col])) for r in rs], COLORS[i], dash)
        p.key(f"alpha L = {a}", COLORS[i], "")
    for col, dash, what in (("", "", "heavy ball (quadratic)"), ("", "6,3", "eq. (26) as printed"),
                            ("", "2,2", "Prop. 3.4 LMI (certified)")):
        p.key(what, "black", dash)
    return p


def bound_panels(rows):
    groups = defaultdict(list)
    for r in rows:
        groups[(r["c_w"], r["alpha"])].append(r)
    for (cw, a), rs in sorted(groups.items(), key=lambda kv: (float(kv[0][0]), float(kv[0][1]))):
        vals = [num(r[c]) for r in rs for c, _, _ in BOUNDS]
        vals = [v for v in vals if v is not None and v > 0 and math.isfinite(v)]
        lo = 10 ** math.floor(math.log10(min(vals)))
        hi = 10 ** math.ceil(math.log10(max(vals)))
        tmax = max(int(r["steps"]) for r in rs)
        p = Panel(f"Fig. 1 (right): c_w = {cw}, alpha L = {a}, bound read at t = T",
                  "horizon T (one run per T)", "F(x_T) - F* (bound or exact)", (0, tmax), (lo, hi),
                  log_y=True)
        for i, rule in enumerate(RULES):
            sub = sorted((r for r in rs if r["momentum_rule"] == rule), key=lambda r: int(r["steps"]))
            if not sub:
                continue
            for col, _, dash in BOUNDS:
                p.line([(int(r["steps"]), num(r[col])) for r in sub], COLORS[i], dash)
            p.key(f"beta: {rule} ({float(sub[0]['beta']):.3f})", COLORS[i], "")
        for _, text, dash in BOUNDS:
            p.key(text, "black", dash)
        yield cw, a, p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", help="directory holding fig1_rate_vs_momentum.csv and fig1_bound_vs_steps.csv")
    ap.add_argument("--out")
    args = ap.parse_args()
    out = args.out or args.dir
    os.makedirs(out, exist_ok=True)
    rates = read_csv(os.path.join(args.dir, "fig1_rate_vs_momentum.csv"))
    with open(os.path.join(out, "fig1_rate_vs_momentum.svg"), "w") as f:
        f.write(rate_panel(rates).svg())
    bounds = read_csv(os.path.join(args.dir, "fig1_bound_vs_steps.csv"))
    for cw, a, p in bound_panels(bounds):
        with open(os.path.join(out, f"fig1_bound_c{cw}_a{a}.svg"), "w") as f:
            f.write(p.svg())


if __name__ == "__main__":
    main()
