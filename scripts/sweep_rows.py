"""Rows of a `dpx sweep` output directory, for the results/ table scripts. Standard library only.

A finished sweep has <dir>/summary.csv (one row per job, with `point_id`); while it runs, each
finished job has its own <dir>/points/<id>/seeds/<seed>.summary.csv (not committed). `rows` reads
whichever exists, so a table can be drawn from a sweep in progress.
"""
import csv
import glob
import os
import statistics
from collections import defaultdict


def rows(folder):
    """Yield (point_id, row) for every completed job of the sweep in `folder`."""
    whole = os.path.join(folder, "summary.csv")
    if os.path.exists(whole):
        paths = [whole]
    else:
        paths = sorted(glob.glob(os.path.join(folder, "points", "*", "seeds", "*.summary.csv")))
    for path in paths:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["status"] != "completed":
                    continue
                pid = r.get("point_id") or os.path.basename(os.path.dirname(os.path.dirname(path)))
                yield pid, r


def points(folder):
    """The sweep's points.csv as {point_id: {swept key: value}}."""
    with open(os.path.join(folder, "points.csv"), newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def cell(xs):
    """A table cell for accuracies `xs` (%): "mean ± sample std (n)", or the one value."""
    if not xs:
        return "—"
    if len(xs) == 1:
        return f"{xs[0]:.2f} (1 seed)"
    return f"{statistics.fmean(xs):.2f} ± {statistics.stdev(xs):.2f} ({len(xs)})"


def by_arm_and_epsilon(folder, default_arm):
    """{(arm, ε): final accuracies in %} and {(arm, ε): σ} of the sweep in `folder` (empty when it
    has no points.csv); the arm is the point's `noise.bands` where the sweep varies it, else
    `default_arm`."""
    cells, sigma = defaultdict(list), {}
    for key, row in _arm_and_epsilon_rows(folder, default_arm):
        cells[key].append(100 * float(row["final_test_accuracy"]))
        sigma[key] = float(row["noise_multiplier"])
    return cells, sigma


def by_arm_epsilon_and_seed(folder, default_arm):
    """{(arm, ε): {seed: final accuracy in %}} of the sweep in `folder`, arms as in
    `by_arm_and_epsilon`: for differences between arms on the same seed."""
    out = defaultdict(dict)
    for key, row in _arm_and_epsilon_rows(folder, default_arm):
        out[key][row["seed"]] = 100 * float(row["final_test_accuracy"])
    return out


def _arm_and_epsilon_rows(folder, default_arm):
    """Yield ((arm, ε), row) for every completed job of the sweep in `folder` (nothing when it has
    no points.csv)."""
    if not os.path.exists(os.path.join(folder, "points.csv")):
        return
    keys = points(folder)
    for pid, row in rows(folder):
        k = keys[pid]
        arm = int(k["noise.bands"]) if k.get("noise.bands") else default_arm
        yield (arm, float(k["privacy.epsilon"])), row
