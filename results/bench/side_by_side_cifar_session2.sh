#!/bin/bash
# cnn_cifar10 alone, three rounds: Opacus ghost clipping, then dpx DP (this build), core 1 pinned.
cd "$(dirname "$0")/../.."
for round in 1 2 3; do
  echo "# round $round $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  BENCH_MODES=opacus_ghost taskset -c 1 /work/venvs/opacus/bin/python ../shared/reference/bench_opacus.py 1 cnn_cifar10
  taskset -c 1 target/release/dpx bench --threads 1 --json --no-sgemm --workload cnn_cifar10 --mode dp
done
