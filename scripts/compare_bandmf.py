#!/usr/bin/env python3
"""Cross-check dpx's BandMF (noise.mechanism = "bandmf") against Google's jax_privacy.

Run by hand only; dpx never depends on Python. When jax_privacy cannot be imported, the script
installs it (with jax and dp_accounting) from PyPI into its own virtual environment (under
$XDG_CACHE_HOME/dpx, else ~/.cache/dpx) and re-runs itself there:

    python3 scripts/compare_bandmf.py --dpx target/release/dpx

For each plan (dataset size n, expected batch B, steps T, bands b, noise multiplier sigma) it
writes a small synthetic-data config, runs `dpx account --config ... --json`, and compares:

1. epsilon: dpx's (its plan records ceil(T/b) Poisson-subsampled Gaussian rounds at rate b*q)
   against dp_accounting on jax_privacy's `amplified_bandmf_event(sigma, T, num_bands=b,
   sampling_prob=b*q)`, under the same accountant (RDP, then PLD), add/remove-one neighbours.
2. the strategy: the prefix-sum loss L(c) = ||A C^-1||_F^2 * max column norm^2 of dpx's
   coefficients and of `optimize_banded_toeplitz(n=T, bands=b)`'s (both normalised to column
   norm 1), evaluated by one dense numpy computation for both. A ratio below 1 means dpx's
   strategy has the smaller expected squared error.

Prints one line per plan and accountant.
"""

import argparse
import json
import math
import os
import subprocess
import tempfile

from private_env import ensure  # noqa: E402

ensure(["jax_privacy", "dp_accounting"], "jax-privacy-env", ["jax-privacy"])

import dp_accounting  # noqa: E402
import numpy as np  # noqa: E402
from dp_accounting import rdp  # noqa: E402
from dp_accounting.pld import pld_privacy_accountant  # noqa: E402
from jax_privacy.experimental import accounting as jp_accounting  # noqa: E402
from jax_privacy.matrix_factorization import toeplitz  # noqa: E402

# name: (n, expected batch, steps, bands, sigma)
PLANS = {
    "mnist_like_b4": (60000, 512, 1172, 4, 1.2),
    "mnist_like_b16": (60000, 512, 1172, 16, 3.0),
    "cifar_like_b8": (50000, 1024, 1470, 8, 2.5),
    "small_b64": (20000, 200, 2000, 64, 8.0),
}

CONFIG = """
[experiment]
name = "compare_bandmf"
seeds = [0]

[data]
dataset = "gaussian_mixture"

[data.synthetic]
n_train = {n}
n_test = 100
n_features = 4
n_classes = 2
seed = 1

[model]
architecture = "logistic"

[train]
steps = {steps}
expected_batch_size = {batch}
learning_rate = 0.1

[clip]
clip_norm = 1.0

[noise]
mechanism = "bandmf"
bands = {bands}
noise_multiplier = {sigma}

[privacy]
delta = 1e-5
accountant = "{accountant}"
"""


def dpx_plan(binary, n, batch, steps, bands, sigma, accountant):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "plan.toml")
        with open(path, "w") as f:
            f.write(CONFIG.format(n=n, batch=batch, steps=steps, bands=bands, sigma=sigma,
                                  accountant=accountant))
        out = subprocess.run([binary, "account", "--config", path, "--json"],
                             check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def jax_epsilon(sigma, steps, bands, rate, accountant):
    event = jp_accounting.amplified_bandmf_event(
        noise_multiplier=sigma, iterations=steps, num_bands=bands, sampling_prob=rate)
    relation = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    if accountant == "rdp":
        acc = rdp.RdpAccountant(neighboring_relation=relation)
    else:
        acc = pld_privacy_accountant.PLDAccountant(neighboring_relation=relation)
    acc.compose(event)
    return acc.get_epsilon(1e-5)


def prefix_loss(coefficients, steps):
    """||A C^-1||_F^2 * max column norm^2 for the prefix-sum workload, densely."""
    c = np.zeros(steps)
    c[: len(coefficients)] = coefficients
    strategy = np.zeros((steps, steps))
    for k in range(min(len(coefficients), steps)):
        strategy += np.diag(np.full(steps - k, c[k]), -k)
    workload = np.tril(np.ones((steps, steps)))
    product = workload @ np.linalg.inv(strategy)
    return float(np.sum(product ** 2) * np.max(np.sum(strategy ** 2, axis=0)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dpx", required=True, help="the dpx binary")
    parser.add_argument("--strategy-steps", type=int, default=400,
                        help="T for the strategy comparison (dense, so keep it below ~2000)")
    args = parser.parse_args()
    for name, (n, batch, steps, bands, sigma) in PLANS.items():
        rate = bands * batch / n
        for accountant in ("rdp", "pld"):
            plan = dpx_plan(args.dpx, n, batch, steps, bands, sigma, accountant)
            b = plan["bandmf"]
            assert b["rounds"] == math.ceil(steps / bands), b
            assert abs(b["group_sample_rate"] - rate) < 1e-15, b
            ours = plan["epsilon"]
            theirs = jax_epsilon(sigma, steps, bands, rate, accountant)
            print(f"{name:16} {accountant}: dpx epsilon {ours:.10f}, jax_privacy+dp_accounting "
                  f"{theirs:.10f}, relative difference {(ours - theirs) / theirs:+.2e}")
        t = args.strategy_steps
        plan = dpx_plan(args.dpx, n, batch, t, bands, sigma, "rdp")
        ours = np.array(plan["bandmf"]["coefficients"])
        theirs = np.asarray(toeplitz.optimize_banded_toeplitz(n=t, bands=bands))
        theirs = theirs / np.linalg.norm(theirs)
        lo, lj = prefix_loss(ours, t), prefix_loss(theirs, t)
        print(f"{name:16} strategy (T = {t}, b = {bands}): prefix-sum loss dpx {lo:.6g}, "
              f"jax_privacy {lj:.6g}, ratio dpx/jax_privacy {lo / lj:.9f}")


if __name__ == "__main__":
    main()
