#!/bin/bash
# End-to-end step rate of e2e_logreg_mnist.toml against `dpx bench`'s DP step, interleaved
# rounds, one process per binary and thread count; each run's training seconds (summary.csv),
# its context switches, and the md5 of its metrics.csv (the same bytes on every binary that
# keeps the bits, and on every thread count).
# Usage: e2e_logreg.sh ROUNDS DATA_DIR BINARY... > out.txt
rounds=$1; data=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
for r in $(seq 1 "$rounds"); do
  for b in "$@"; do
    for t in 1 2; do
      rm -rf "$work/out"
      perf stat -e context-switches -x, -o "$work/ctx" "$b" run "$here/e2e_logreg_mnist.toml" \
        --out "$work/out" --threads "$t" --data-dir "$data" > /dev/null 2>&1
      seconds=$(tail -1 "$work/out/summary.csv" | awk -F, '{print $NF}')
      steps=$(tail -1 "$work/out/summary.csv" | awk -F, '{print $3}')
      bench=$("$b" bench --workload logreg_mnist --mode dp --threads "$t" --no-sgemm --json \
        --steps 10000 | sed 's/.*"step_ms":\([0-9.]*\).*/\1/')
      echo "round $r $(basename "$b") threads $t steps $steps train_seconds $seconds" \
        "ms_per_step $(python3 -c "print(round($seconds / $steps * 1e3, 4))")" \
        "context_switches $(grep context "$work/ctx" | cut -d, -f1)" \
        "bench_step_ms $bench metrics_md5 $(md5sum < "$work/out/metrics.csv" | cut -c1-12)"
    done
  done
done
rm -rf "$work"
