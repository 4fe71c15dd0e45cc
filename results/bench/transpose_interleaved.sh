#!/bin/bash
# Interleaved rounds of binaries (the transpose and serial-parts changes of 2026-11-29): per
# round, each binary in turn, one process per
# thread count (`--threads 1` with the sgemm reference first, then `--threads 2` alone).
# Usage: transpose_interleaved.sh ROUNDS BINARY_BEFORE BINARY_AFTER > out.jsonl
rounds=$1; shift
for r in $(seq 1 "$rounds"); do
  for b in "$@"; do
    echo "# round $r binary $(basename "$b") $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
    "$b" bench --workload logreg_mnist --workload mlp_mnist --mode dp --threads 1 --phases --json
    "$b" bench --workload logreg_mnist --workload mlp_mnist --mode dp --threads 2 --phases --json --no-sgemm
  done
done
