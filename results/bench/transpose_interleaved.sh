#!/bin/bash
# Interleaved rounds of binaries (the transpose and serial-parts changes of 2026-11-29, and later
# comparisons): per round, each binary in turn, one process per thread count (`--threads 1`
# with the sgemm reference first, then `--threads 2` alone).
# Usage: [WORKLOADS="logreg_mnist mlp_mnist"] transpose_interleaved.sh ROUNDS BINARY... > out.jsonl
rounds=$1; shift
workloads=()
for w in ${WORKLOADS:-logreg_mnist mlp_mnist}; do workloads+=(--workload "$w"); done
for r in $(seq 1 "$rounds"); do
  for b in "$@"; do
    echo "# round $r binary $(basename "$b") $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
    "$b" bench "${workloads[@]}" --mode dp --threads 1 --phases --json
    "$b" bench "${workloads[@]}" --mode dp --threads 2 --phases --json --no-sgemm
  done
done
