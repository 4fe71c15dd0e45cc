#!/bin/bash
# Side by side, core 1 pinned: Opacus (PyTorch non-private, ghost clipping), then dpx at this
# commit (DPX_NEW), then dpx at 7013a11 (DPX_BASE), per workload, two rounds. Run from anywhere.
cd "$(dirname "$0")/../.."
# OPACUS_PYTHON: a Python with torch and opacus (docs/benchmarks.md); default python3.
OPACUS_PYTHON="${OPACUS_PYTHON:-python3}"
DPX_NEW="${DPX_NEW:-target/release/dpx}"
DPX_BASE="${DPX_BASE:?set DPX_BASE to a dpx binary built at 7013a11}"
for round in 1 2; do
for w in logreg_mnist mlp_mnist cnn_mnist cnn_cifar10; do
  echo "# round $round $w $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  BENCH_MODES=nonprivate,opacus_ghost taskset -c 1 "$OPACUS_PYTHON" scripts/bench_opacus.py 1 $w | sed 's/^/opacus /'
  taskset -c 1 "$DPX_NEW" bench --threads 1 --json --no-sgemm --workload $w | sed 's/^/dpx_new /'
  taskset -c 1 "$DPX_BASE" bench --threads 1 --json --no-sgemm --workload $w | sed 's/^/dpx_base /'
done
done
taskset -c 1 "$DPX_NEW" bench --threads 1 --json --workload logreg_mnist --mode dp | grep sgemm | sed 's/^/dpx_new /'
echo done
