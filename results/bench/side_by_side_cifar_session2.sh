#!/bin/bash
# cnn_cifar10 alone, three rounds: Opacus ghost clipping, then dpx DP (this build), core 1 pinned.
cd "$(dirname "$0")/../.."
# OPACUS_PYTHON: a Python with torch and opacus (docs/benchmarks.md); default python3.
OPACUS_PYTHON="${OPACUS_PYTHON:-python3}"
for round in 1 2 3; do
  echo "# round $round $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  BENCH_MODES=opacus_ghost taskset -c 1 "$OPACUS_PYTHON" scripts/bench_opacus.py 1 cnn_cifar10
  taskset -c 1 target/release/dpx bench --threads 1 --json --no-sgemm --workload cnn_cifar10 --mode dp
done
