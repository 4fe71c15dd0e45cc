#!/usr/bin/env python3
"""Time Google's dp_accounting PLDAccountant on the cases dpx's PLD accountant is measured on.

Run by hand only; dpx never depends on Python. When dp_accounting cannot be imported, the script
installs it from PyPI into its own virtual environment (under $XDG_CACHE_HOME/dpx, else
~/.cache/dpx) and re-runs itself there:

    python3 scripts/compare_pld.py                     # all cases
    python3 scripts/compare_pld.py target              # one case by name
    python3 scripts/compare_pld.py --dpx target/release/dpx schedule200   # side by side

With `--dpx BINARY` the heterogeneous-schedule cases (schedule*) are also run through
`BINARY account --schedule ... --json` in the same process tree, one after the other, and both
times are printed (CPU time of the child for dpx).

Prints one line per case: name, epsilon (or delta), seconds (wall clock, construction +
composition + conversion, single process) and cpu_seconds (process CPU time, steadier on a
busy machine). Pin to one core for the issue's "one core" target (taskset -c 0 ...). The dpx side of the same cases:

    cargo bench --bench pld
    cargo test --release --test pld_reference -- --nocapture --ignored print_cases

Every case uses dp_accounting's defaults: add/remove neighbouring relation,
value_discretization_interval = 1e-4, connect-the-dots discretisation.
"""

import os
import resource
import subprocess
import sys
import tempfile
import time

from private_env import ensure  # noqa: E402

ensure(["dp_accounting"], "dp-accounting-env", ["dp-accounting"])

import dp_accounting  # noqa: E402
from dp_accounting.pld import pld_privacy_accountant  # noqa: E402

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


# Heterogeneous schedules (tight accounting of long, changing schedules): every sigma distinct,
# linear from lo to hi; q = 256/50000, delta = 1e-5. dp_accounting composes one step at a time
# (about 0.15-0.25 s per distinct step), so schedule40000 takes hours there: ask for it by name.
SCHEDULES = {
    "schedule200": (256 / 50000, 0.8, 1.6, 200, 1e-5),
    "schedule1000": (256 / 50000, 0.8, 2.8, 1000, 1e-5),
    "schedule40000": (256 / 50000, 0.8, 2.8, 40000, 1e-5),
}
BY_NAME_ONLY = {"schedule40000"}


def schedule_sigmas(lo, hi, n):
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def run_schedule(name, dpx):
    q, lo, hi, n, delta = SCHEDULES[name]
    sigmas = schedule_sigmas(lo, hi, n)
    start, cpu = time.perf_counter(), time.process_time()
    acc = pld_privacy_accountant.PLDAccountant()
    for s in sigmas:
        acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(s)))
    eps = acc.get_epsilon(delta)
    secs, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"{name:8s} dp_accounting q={q:.6g} sigma={lo}..{hi} steps={n} delta={delta:g} "
          f"epsilon={eps:.10f} seconds={secs:.3f} cpu_seconds={cpu:.3f}", flush=True)
    if dpx is None:
        return
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(repr(s) for s in sigmas) + "\n")
        path = f.name
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        out = subprocess.run(
            [dpx, "account", "--accountant", "pld", "--schedule", path, "--sample-rate", repr(q),
             "--delta", repr(delta), "--json"],
            check=True, capture_output=True, text=True,
        ).stdout
        secs = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        os.unlink(path)
    import json
    dpx_eps = json.loads(out)["epsilon"]
    dpx_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"{name:8s} dpx           epsilon={dpx_eps:.10f} seconds={secs:.3f} "
          f"cpu_seconds={dpx_cpu:.3f} (relative difference {dpx_eps / eps - 1:+.2e}; "
          f"cpu ratio {cpu / max(dpx_cpu, 1e-9):.1f}x)", flush=True)


def event(q, sigma, steps):
    inner = dp_accounting.GaussianDpEvent(sigma)
    if q < 1.0:
        inner = dp_accounting.PoissonSampledDpEvent(q, inner)
    return dp_accounting.SelfComposedDpEvent(inner, steps)


def main():
    args = sys.argv[1:]
    dpx = None
    if "--dpx" in args:
        i = args.index("--dpx")
        if i + 1 >= len(args):
            sys.exit("--dpx needs the path of a dpx binary")
        dpx = args[i + 1]
        del args[i:i + 2]
    wanted = set(args)
    for name in SCHEDULES:
        if (wanted and name in wanted) or (not wanted and name not in BY_NAME_ONLY):
            run_schedule(name, dpx)
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
