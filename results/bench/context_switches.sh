#!/bin/bash
# Interleaved rounds of `dpx bench` on one workload, one process per binary and thread count,
# each under `perf stat -e context-switches` (a count of the times a thread went to sleep).
# Usage: context_switches.sh ROUNDS WORKLOAD STEPS BINARY... > out.txt
rounds=$1; workload=$2; steps=$3; shift 3
for r in $(seq 1 "$rounds"); do
  for b in "$@"; do
    for t in 1 2; do
      line=$(perf stat -e context-switches -x, -o /tmp/ctx.$$ "$b" bench --workload "$workload" \
        --mode dp --threads "$t" --no-sgemm --steps "$steps" --json)
      echo "round $r $(basename "$b") threads $t context_switches $(grep context /tmp/ctx.$$ | cut -d, -f1) $line"
    done
  done
done
rm -f /tmp/ctx.$$
