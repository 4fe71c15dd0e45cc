#!/usr/bin/env python3
"""Summarise interleaved `dpx bench --json` rounds (transpose_interleaved.sh's output).

For each workload and binary: one- and two-thread step times (min / median over rounds), the
1 -> 2 thread ratio of each round, its median, the ratio of the two minima, and each round's
one-thread share of that round's sgemm rate; then the median of each phase.

Usage: summarize_rounds.py ROUNDS.jsonl
"""
import collections
import json
import statistics as st
import sys

rows, cur = [], None
for line in open(sys.argv[1]):
    if line.startswith("#"):
        p = line.split()
        cur = (int(p[2]), p[4])  # "# round R binary NAME ..."
        continue
    d = json.loads(line)
    d["round"], d["bin"] = cur
    rows.append(d)
sgemm = {(d["round"], d["bin"]): d["gflops"] for d in rows if d.get("mode") == "sgemm"}
binaries = list(dict.fromkeys(d["bin"] for d in rows))
workloads = list(dict.fromkeys(d["workload"] for d in rows if d.get("mode") == "dp"))
rounds = sorted({d["round"] for d in rows})


def pick(r, b, w, t):
    hit = [d for d in rows if (d["round"], d["bin"], d.get("workload"), d["threads"]) == (r, b, w, t)]
    return hit[0] if hit else None


for w in workloads:
    for b in binaries:
        pairs = [(pick(r, b, w, 1), pick(r, b, w, 2), r) for r in rounds]
        pairs = [(a, c, r) for a, c, r in pairs if a and c]
        if not pairs:
            continue
        t1 = [a["step_ms"] for a, _, _ in pairs]
        t2 = [c["step_ms"] for _, c, _ in pairs]
        ratio = [x / y for x, y in zip(t1, t2)]
        share = [100 * a["gflops"] / sgemm[(r, b)] for a, _, r in pairs if (r, b) in sgemm]
        print(
            f"{w} {b}: 1 thread {min(t1):.3f}/{st.median(t1):.3f} ms, 2 threads "
            f"{min(t2):.3f}/{st.median(t2):.3f} ms (min/median); 1->2 per round "
            f"{' '.join(f'{x:.2f}' for x in ratio)}, median {st.median(ratio):.2f}, of the minima "
            f"{min(t1) / min(t2):.2f}; share of sgemm {' '.join(f'{x:.0f}' for x in share)}%"
        )
        if pairs[0][0].get("phases_ms"):
            for k in pairs[0][0]["phases_ms"]:
                m1 = st.median(a["phases_ms"][k] for a, _, _ in pairs)
                m2 = st.median(c["phases_ms"][k] for _, c, _ in pairs)
                print(f"    {k}: {m1:.3f} -> {m2:.3f} ms (medians)")
print("sgemm GFLOP/s per round:", " ".join(f"{r}/{b} {v:.1f}" for (r, b), v in sorted(sgemm.items())))
