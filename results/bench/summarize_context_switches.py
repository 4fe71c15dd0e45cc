#!/usr/bin/env python3
"""Summarise context_switches.sh output: per binary and thread count, the step times of the
rounds (ms), their median, and the context switches of each process; then each round's 1 -> 2
thread ratio per binary.

Usage: summarize_context_switches.py OUT.txt
"""
import collections
import json
import statistics as st
import sys

runs = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    p = line.split(" ", 7)
    record = json.loads(p[7])
    runs[(p[2], int(p[4]))][int(p[1])] = (record["step_ms"], int(p[6]))
for (binary, threads), by_round in sorted(runs.items()):
    ms = [v[0] for v in by_round.values()]
    print(f"{binary} {threads} thread(s): step {' '.join(f'{x:.3f}' for x in ms)} ms, median "
          f"{st.median(ms):.3f}; context switches {' '.join(str(v[1]) for v in by_round.values())}")
for binary in sorted({b for b, _ in runs}):
    one, two = runs[(binary, 1)], runs[(binary, 2)]
    ratios = [one[r][0] / two[r][0] for r in sorted(one) if r in two]
    print(f"{binary} 1 -> 2 threads per round: {' '.join(f'{x:.2f}' for x in ratios)}, median "
          f"{st.median(ratios):.2f}")
