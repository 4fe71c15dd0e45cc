#!/bin/bash
# After the Winograd forward (d61fedf): Opacus (PyTorch non-private, ghost clipping) then dpx,
# per workload, two rounds, core 1 pinned.
cd "$(dirname "$0")/../.."
# OPACUS_PYTHON: a Python with torch and opacus (docs/benchmarks.md); default python3.
OPACUS_PYTHON="${OPACUS_PYTHON:-python3}"
for round in 1 2; do
for w in logreg_mnist mlp_mnist cnn_mnist cnn_cifar10; do
  echo "# round $round $w $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  BENCH_MODES=nonprivate,opacus_ghost taskset -c 1 "$OPACUS_PYTHON" scripts/bench_opacus.py 1 $w | sed 's/^/opacus /'
  taskset -c 1 target/release/dpx bench --threads 1 --json --no-sgemm --workload $w | sed 's/^/dpx /'
done
done
