#!/usr/bin/env python3
"""Time Google's dp_accounting PLDAccountant on the cases dpx's PLD accountant is measured on.

Run by hand only; dpx never depends on Python. Install dp_accounting outside the repository:

    python3 -m venv "$HOME/dpacc-env" && "$HOME/dpacc-env/bin/pip" install dp-accounting
    "$HOME/dpacc-env/bin/python" scripts/compare_pld.py            # all cases
    "$HOME/dpacc-env/bin/python" scripts/compare_pld.py target     # one case by name

Prints one line per case: name, epsilon (or delta), seconds (wall clock, construction +
composition + conversion, single process) and cpu_seconds (process CPU time, steadier on a
busy machine). Pin to one core for the issue's "one core" target (taskset -c 0 ...). The dpx side of the same cases:

    cargo bench --bench pld
    cargo test --release --test pld_reference -- --nocapture --ignored print_cases

Every case uses dp_accounting's defaults: add/remove neighbouring relation,
value_discretization_interval = 1e-4, connect-the-dots discretisation.
"""

import sys
import time

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant

# name: (sample_rate, noise_multiplier, steps, delta); sources in tests/pld_reference.rs
CASES = {
    # issue 2 performance target (delta 1e-5 = 1/(2 N) for N = 50,000 is our choice)
    "target": (256 / 50000, 1.0, 39200, 1e-5),
    # docs/reference_vectors.md row 7 (TF Privacy compute_dp_sgd_privacy_test, PLD 2.4612381)
    "row7": (0.01, 0.7, 120, 1e-5),
    # row 8 (PLD 1.199)
    "row8": (64 / 10000, 1.0, 782, 1e-6),
    # row 9 (jax_privacy docstring, PLD 3.77)
    "row9": (0.1, 3.0, 512, 1e-6),
    # row 10 (PLD 2.2955)
    "row10": (240 / 60000, 1.1, 15000, 1e-5),
    # row 13 (PLD 2.3818)
    "row13": (256 / 60000, 1.1, 14063, 1e-5),
    # row 14 (PLD 0.8646 / 5.6397)
    "row14a": (256 / 60000, 1.3, 3516, 1e-5),
    "row14b": (256 / 60000, 0.7, 10547, 1e-5),
}

DELTA_CASES = {
    # row 18: q = 1, sigma = sqrt(3), 3 compositions, delta(eps = 1) = 0.126936
    "row18": (1.0, 3 ** 0.5, 3, 1.0),
    # row 19: q = 0.2, sigma = 0.5, 3 compositions, delta(eps = 1) = 0.15594
    "row19": (0.2, 0.5, 3, 1.0),
}


# Cases beyond the reference table, pinned in tests/pld_reference.rs (dp_accounting is the source).
def _extra_cases():
    sampled = dp_accounting.PoissonSampledDpEvent
    composed = dp_accounting.SelfComposedDpEvent
    replace = dp_accounting.NeighboringRelation.REPLACE_ONE
    add_remove = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    return {
        "laplace_sampled": (add_remove, composed(sampled(0.1, dp_accounting.LaplaceDpEvent(1.0)), 50), 1e-6),
        "laplace_full": (add_remove, composed(dp_accounting.LaplaceDpEvent(2.0), 10), 1e-6),
        "tiny_q": (add_remove, composed(sampled(1e-5, dp_accounting.GaussianDpEvent(0.5)), 1000), 1e-9),
        "replace_one": (replace, composed(sampled(0.05, dp_accounting.GaussianDpEvent(1.0)), 100), 1e-5),
    }


def event(q, sigma, steps):
    inner = dp_accounting.GaussianDpEvent(sigma)
    if q < 1.0:
        inner = dp_accounting.PoissonSampledDpEvent(q, inner)
    return dp_accounting.SelfComposedDpEvent(inner, steps)


def main():
    wanted = set(sys.argv[1:])
    for name, (q, sigma, steps, delta) in CASES.items():
        if wanted and name not in wanted:
            continue
        start, cpu = time.perf_counter(), time.process_time()
        acc = pld_privacy_accountant.PLDAccountant()
        acc.compose(event(q, sigma, steps))
        eps = acc.get_epsilon(delta)
        secs, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(f"{name:8s} q={q:.6g} sigma={sigma:.6g} steps={steps} delta={delta:g} "
              f"epsilon={eps:.10f} seconds={secs:.3f} cpu_seconds={cpu:.3f}", flush=True)
    for name, (q, sigma, steps, eps) in DELTA_CASES.items():
        if wanted and name not in wanted:
            continue
        start, cpu = time.perf_counter(), time.process_time()
        acc = pld_privacy_accountant.PLDAccountant()
        acc.compose(event(q, sigma, steps))
        delta = acc.get_delta(eps)
        secs, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(f"{name:8s} q={q:.6g} sigma={sigma:.6g} steps={steps} epsilon={eps:g} "
              f"delta={delta:.10f} seconds={secs:.3f} cpu_seconds={cpu:.3f}", flush=True)
    for name, (relation, ev, delta) in _extra_cases().items():
        if wanted and name not in wanted:
            continue
        start, cpu = time.perf_counter(), time.process_time()
        acc = pld_privacy_accountant.PLDAccountant(neighboring_relation=relation)
        acc.compose(ev)
        eps = acc.get_epsilon(delta)
        secs, cpu = time.perf_counter() - start, time.process_time() - cpu
        print(f"{name:8s} delta={delta:g} epsilon={eps:.10f} seconds={secs:.3f} "
              f"cpu_seconds={cpu:.3f}", flush=True)


if __name__ == "__main__":
    main()
