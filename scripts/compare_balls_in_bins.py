#!/usr/bin/env python3
"""Cross-check dpx's balls-in-bins accounting (train.sampler = "balls_in_bins") against Feldman
& Shenfeld's `random-allocation` package (RDP) and `PLD_accounting` package (PLD), and a Monte
Carlo estimate.

Run by hand only; dpx never depends on Python. When the package cannot be imported, the script
installs it from PyPI into its own virtual environment (under $XDG_CACHE_HOME/dpx, else
~/.cache/dpx) and re-runs itself there:

    python3 scripts/compare_balls_in_bins.py --dpx target/release/dpx
    python3 scripts/compare_balls_in_bins.py --dpx target/release/dpx --pld

Without --pld (the rdp accountant):

For each plan (noise multiplier sigma, steps per epoch t, epochs E, delta) it prints:

1. epsilon from dpx (`dpx account --sampling balls-in-bins` over the integer orders 2..64, the
   larger of both directions of the random-allocation RDP), and epsilon from the package's
   remove direction alone (`allocation_epsilon_direct_remove`: the same RDP, summed over the
   partitions of alpha, same orders and conversion). Where the remove direction is the larger at
   the optimal order the two must agree; dpx can only be higher.
2. at dpx's optimal order, the per-epoch RDP of the remove direction (the package) and of the
   add direction by Monte Carlo (E_Q[L^-(alpha-1)], L the mean likelihood ratio; about 1%
   error): a check that the remove direction is the one that decides there.

With --pld (the pld accountant; installs PLD_accounting 2.0 from PyPI into another environment):
epsilon from `dpx account --sampling balls-in-bins --accountant pld`, and the upper and lower
bounds of `PLD_accounting.gaussian_allocation_epsilon_range` (Feldman & Shenfeld, "Efficient
Privacy Loss Accounting for Subsampling and Random Allocation", ICML 2026, arXiv 2602.17284;
its default adaptive accuracy, several minutes per plan). dpx's epsilon must not be below the
package's lower bound (both are bounds on the same epoch's dominating pair).
"""

import argparse
import json
import math
import subprocess

import sys
import time

from private_env import ensure  # noqa: E402

if "--pld" in sys.argv:
    ensure(["PLD_accounting"], "pld-accounting-env", ["PLD_accounting==2.0"])
    from PLD_accounting import gaussian_allocation_epsilon_range  # noqa: E402
else:
    # The package imports pandas without declaring it.
    ensure(["random_allocation"], "random-allocation-env",
           ["random-allocation==1.0.5", "pandas"])
    from random_allocation.comparisons.structs import PrivacyParams, SchemeConfig  # noqa: E402
    from random_allocation.random_allocation_scheme.direct import (  # noqa: E402
        allocation_RDP_remove,
        allocation_epsilon_direct_remove,
    )

import numpy as np  # noqa: E402

PLANS = [
    # sigma, steps per epoch t, epochs, delta
    (1.0156, 49, 60, 1e-5),   # CIFAR-10, B = 1024, 60 epochs
    (2.45718, 118, 40, 1e-5), # MNIST, B = 512, 40 epochs, dpx's sigma for epsilon = 1
    (0.942142, 118, 40, 1e-5),# the same at epsilon = 4
    (1.02006, 43, 10, 1e-5),  # the quickstart's data, B = 256, 10 epochs
]
ORDERS = list(range(2, 65))


def dpx_epsilon(dpx, sigma, t, epochs, delta):
    # --dataset-size t, --batch-size 1 gives t steps per epoch.
    out = subprocess.run(
        [dpx, "account", "--json", "--sampling", "balls-in-bins", "--dataset-size", str(t),
         "--batch-size", "1", "--epochs", str(epochs), "--noise-multiplier", repr(sigma),
         "--delta", repr(delta), "--orders", ",".join(str(a) for a in ORDERS)],
        check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return j["epsilon"], j.get("order")


def dpx_pld_epsilon(dpx, sigma, t, epochs, delta):
    out = subprocess.run(
        [dpx, "account", "--json", "--sampling", "balls-in-bins", "--dataset-size", str(t),
         "--batch-size", "1", "--epochs", str(epochs), "--noise-multiplier", repr(sigma),
         "--delta", repr(delta), "--accountant", "pld"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)["epsilon"]


def compare_pld(dpx):
    for sigma, t, epochs, delta in PLANS:
        start = time.time()
        eps = dpx_pld_epsilon(dpx, sigma, t, epochs, delta)
        mid = time.time()
        upper, lower = gaussian_allocation_epsilon_range(
            delta=delta, sigma=sigma, num_steps=t, num_epochs=epochs)
        end = time.time()
        flag = "" if eps >= lower else "  BELOW THE PACKAGE'S LOWER BOUND"
        print(f"sigma {sigma} t {t} epochs {epochs}: dpx pld epsilon {eps:.6f} ({mid - start:.1f} s), "
              f"PLD_accounting upper {upper:.6f} lower {lower:.6f} ({end - mid:.0f} s){flag}",
              flush=True)


def mc_add(sigma, t, alpha, n=200_000, seed=0):
    rng = np.random.default_rng(seed)
    total, done = 0.0, 0
    while done < n:
        m = min(20_000, n - done)
        x = rng.standard_normal((m, t)) / sigma
        L = np.mean(np.exp(x - 1 / (2 * sigma**2)), axis=1)
        total += np.sum(L ** (-(alpha - 1)))
        done += m
    return math.log(total / n) / (alpha - 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dpx", default="target/release/dpx")
    ap.add_argument("--pld", action="store_true",
                    help="compare the pld accountant with PLD_accounting")
    args = ap.parse_args()
    if args.pld:
        compare_pld(args.dpx)
        return
    for sigma, t, epochs, delta in PLANS:
        eps, order = dpx_epsilon(args.dpx, sigma, t, epochs, delta)
        params = PrivacyParams(sigma=sigma, num_steps=t, num_selected=1, num_epochs=epochs,
                               delta=delta)
        config = SchemeConfig(allocation_direct_alpha_orders=ORDERS)
        eps_remove = allocation_epsilon_direct_remove(params, config)
        a = int(order)
        remove = allocation_RDP_remove(alpha=a, sigma=sigma, num_steps=t)
        add = mc_add(sigma, t, a)
        print(f"sigma {sigma} t {t} epochs {epochs}: dpx epsilon {eps:.6f} (order {a}), "
              f"package remove-direction epsilon {eps_remove:.6f}; at order {a} per epoch: "
              f"remove {remove:.6g}, add (Monte Carlo) {add:.6g}")


if __name__ == "__main__":
    main()
