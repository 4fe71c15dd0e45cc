#!/bin/bash
# Interleaved per workload, two rounds: Opacus (PyTorch non-private, ghost clipping), dpx after the
# performance work (DPX_NEW) and before it (DPX_BASE, 10 steps). Run from anywhere.
cd "$(dirname "$0")/../.."
# OPACUS_PYTHON: a Python with torch and opacus (docs/benchmarks.md); default python3.
OPACUS_PYTHON="${OPACUS_PYTHON:-python3}"
DPX_NEW="${DPX_NEW:-target/release/dpx}"
DPX_BASE="${DPX_BASE:?set DPX_BASE to a dpx binary built at the base commit}"
for round in 1 2; do
for w in logreg_mnist mlp_mnist cnn_mnist cnn_cifar10; do
  echo "# round $round $w $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  BENCH_MODES=nonprivate,opacus_ghost "$OPACUS_PYTHON" scripts/bench_opacus.py 1 $w | sed 's/^/opacus /'
  "$DPX_NEW" bench --threads 1 --json --no-sgemm --workload $w | sed 's/^/dpx_new /'
  "$DPX_BASE" bench --threads 1 --json --no-sgemm --workload $w --steps 10 | sed 's/^/dpx_before /'
done
done
echo done
