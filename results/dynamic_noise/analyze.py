#!/usr/bin/env python3
"""Compare noise schedules of a dynamic-noise sweep by final training loss (docs/methods/dynamic_noise.md §3-4).

Reads one or more `dpx sweep` directories (points.csv + summary.csv; the summary needs the
`final_train_set_loss` column of `train.eval_train_set = true`). A *setting* is every swept key
except the schedule's own (T = train.steps, k = noise.decay, γ = noise.gamma) and keys that only
restate the setting (batch = N, optimizer). Within a setting the methods are:

  uniform       noise.decay = 0 (or noise.schedule constant), best T
  exp           noise.decay > 0, best (k, T)
  infl_mom      noise.schedule influence_momentum, best (γ, T)
  dyn           noise.schedule influence_quadratic (the paper's dyn on the squared loss), best T
  exp_fit       noise.schedule influence_quadratic_exp (the paper's exp: fitted to dyn), best T
  dyn_rt        noise.schedule influence_retrained (the paper's dyn on q_t estimated by
                retraining, its §3), best T
  exp_rt        noise.schedule influence_retrained_exp (the exponential fitted to dyn_rt), best T

As in the paper, T (and k, γ) are chosen by the final training loss. To keep that choice from
flattering the method with more knobs, the choice is made on the even seeds and the comparison
reported on the odd seeds ("held-out"); the "in-sample" columns choose and report on all seeds,
as the paper does. rel = (mean loss of the method − mean loss of uniform) / mean loss of uniform;
its SE comes from the per-seed paired differences (the same seed gives the same noise draws in
every point: common random numbers). z = difference / SE.

With --reference DIR (a sweep of the same settings and T without privacy, the same seeds), a
second table gives the change of the *excess* loss over noiseless GD (the noise's share of the
final loss, what the influence q_t models): (excess_method − excess_uniform)/excess_uniform at
the held-out choice of T, paired per seed.

Usage: analyze.py SWEEP_DIR [SWEEP_DIR ...] [--reference DIR] [--points FILE] > table.md
(--points writes the mean over seeds of every point to FILE).
Python 3 standard library only.
"""

import csv
import math
import statistics
import sys
from collections import defaultdict

METHOD_KEYS = {"train.steps", "noise.decay", "noise.gamma", "noise.schedule"}
METHODS = ("uniform", "exp", "infl_mom", "dyn", "exp_fit", "dyn_rt", "exp_rt")
IGNORED_KEYS = {"train.expected_batch_size", "train.optimizer", "train.momentum"}


def load(sweep_dir):
    with open(f"{sweep_dir}/points.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    keys = {r["id"]: {k: v for k, v in r.items() if k not in ("index", "id", "name")} for r in rows}
    out = []
    with open(f"{sweep_dir}/summary.csv", newline="") as f:
        for r in csv.DictReader(f):
            kv = keys[r["point_id"]]
            if r["status"] != "completed" or r["final_train_set_loss"] == "":
                loss = math.inf  # a diverged seed counts as infinitely bad
            else:
                loss = float(r["final_train_set_loss"])
            out.append((kv, int(r["seed"]), loss, float(r["final_test_accuracy"])))
    return out


def method_of(kv):
    schedule = kv.get("noise.schedule")
    if schedule == "influence_quadratic":
        return ("dyn", "")
    if schedule == "influence_quadratic_exp":
        return ("exp_fit", "")
    if schedule == "influence_retrained":
        return ("dyn_rt", "")
    if schedule == "influence_retrained_exp":
        return ("exp_rt", "")
    if schedule == "constant":
        return ("uniform", "")
    if "noise.gamma" in kv:
        return ("infl_mom", f"γ={kv['noise.gamma']}")
    k = float(kv.get("noise.decay", "0"))
    return ("uniform", "") if k == 0 else ("exp", f"k={kv['noise.decay']}")


def setting_of(kv):
    return tuple(sorted((k, v) for k, v in kv.items() if k not in METHOD_KEYS | IGNORED_KEYS))


def main(argv):
    points_out = None
    if "--points" in argv:
        i = argv.index("--points")
        points_out = argv[i + 1]
        argv = argv[:i] + argv[i + 2 :]
    reference = None
    if "--reference" in argv:
        i = argv.index("--reference")
        reference = argv[i + 1]
        argv = argv[:i] + argv[i + 2 :]
    # (setting, method) -> {(param, T): {seed: loss}}
    table = defaultdict(lambda: defaultdict(dict))
    acc = defaultdict(dict)
    for d in argv:
        for kv, seed, loss, test_acc in load(d):
            m, p = method_of(kv)
            key = (p, int(kv["train.steps"]))
            table[(setting_of(kv), m)][key][seed] = loss
            acc[(setting_of(kv), m, key)][seed] = test_acc
    settings = sorted({s for s, _ in table}, key=lambda s: [(k, float(v)) for k, v in s])
    if points_out:
        with open(points_out, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            names = [k for k, _ in settings[0]]
            w.writerow(names + ["method", "param", "steps", "seeds", "final_train_set_loss_mean",
                                "final_train_set_loss_std", "final_test_accuracy_mean"])
            for s in settings:
                for m in METHODS:
                    for (p, t), seeds in sorted(table.get((s, m), {}).items()):
                        v = list(seeds.values())
                        a = list(acc[(s, m, (p, t))].values())
                        w.writerow([v_ for _, v_ in s] + [m, p, t, len(v), f"{statistics.fmean(v):.6g}",
                                    f"{statistics.stdev(v) if len(v) > 1 else 0:.3g}",
                                    f"{statistics.fmean(a):.4f}"])

    def best(cands, seeds):
        return min(cands.items(), key=lambda kv: statistics.fmean(kv[1][s] for s in seeds))

    def compare(u, m, seeds):
        lu = [u[s] for s in seeds]
        d = [m[s] - u[s] for s in seeds]
        mu = statistics.fmean(lu)
        se = statistics.stdev(d) / math.sqrt(len(d))
        rel = statistics.fmean(d) / mu
        z = statistics.fmean(d) / se if se > 0 else math.inf
        return mu, rel, se / mu, z

    header = ("| setting | method | chosen (held-out) | uniform T | loss uniform | rel. held-out "
              "(± SE) | z | chosen (in-sample) | rel. in-sample (± SE) | z |")
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    def split(uni):
        """All seeds every uniform point has, the even ones (selection) and the odd (report)."""
        all_seeds = sorted(set.intersection(*(set(v) for v in uni.values())))
        return (all_seeds, [x for x in all_seeds if x % 2 == 0],
                [x for x in all_seeds if x % 2 == 1])

    def name_of(s):
        return ", ".join(f"{k.split('.')[-1]}={v}" for k, v in s)

    for s in settings:
        uni = table.get((s, "uniform"))
        if not uni:
            continue
        all_seeds, sel, rep = split(uni)
        u_sel = best(uni, sel)
        u_all = best(uni, all_seeds)
        name = name_of(s)
        for m in METHODS[1:]:
            cands = table.get((s, m))
            if not cands:
                continue
            m_sel = best(cands, sel)
            m_all = best(cands, all_seeds)
            mu, rel, se, z = compare(u_sel[1], m_sel[1], rep)
            _, rel_a, se_a, z_a = compare(u_all[1], m_all[1], all_seeds)
            p, t = m_sel[0]
            pa, ta = m_all[0]
            print(f"| {name} | {m} | {p}, T={t} | {u_sel[0][1]} | {mu:.5g} | {100 * rel:+.2f}% "
                  f"± {100 * se:.2f} | {z:+.1f} | {pa}, T={ta} | {100 * rel_a:+.2f}% ± {100 * se_a:.2f} "
                  f"| {z_a:+.1f} |")


    if reference is None:
        return
    # Noiseless loss per (setting, T, seed).
    clean = {}
    for kv, seed, loss, _ in load(reference):
        kv = {k: v for k, v in kv.items() if k != "privacy.enabled"}
        clean[(setting_of(kv), int(kv["train.steps"]), seed)] = loss
    print()
    print("| setting | method | T (held-out) | excess uniform | excess method | rel. excess (± SE) | z |")
    print("|---|---|---|---|---|---|---|")
    for s in settings:
        uni = table.get((s, "uniform"))
        if not uni:
            continue
        _, sel, rep = split(uni)
        (_, tu), u = best(uni, sel)
        name = name_of(s)
        for m in METHODS[1:]:
            cands = table.get((s, m))
            if not cands:
                continue
            (_, tm), c = best(cands, sel)
            eu = [u[x] - clean[(s, tu, x)] for x in rep]
            em = [c[x] - clean[(s, tm, x)] for x in rep]
            d = [b - a for a, b in zip(eu, em)]
            mu = statistics.fmean(eu)
            se = statistics.stdev(d) / math.sqrt(len(d))
            print(f"| {name} | {m} | {tm} | {mu:.4g} | {statistics.fmean(em):.4g} | "
                  f"{100 * statistics.fmean(d) / mu:+.1f}% ± {100 * se / mu:.1f} | "
                  f"{statistics.fmean(d) / se:+.1f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
