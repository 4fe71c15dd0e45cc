#!/bin/bash
# Side by side, core 1 pinned: Opacus (PyTorch non-private, ghost clipping), then dpx at this
# commit (/tmp/dpx_new), then dpx at 7013a11 (/tmp/dpx_base), per workload, two rounds.
cd /work/main
for round in 1 2; do
for w in logreg_mnist mlp_mnist cnn_mnist cnn_cifar10; do
  echo "# round $round $w $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  BENCH_MODES=nonprivate,opacus_ghost taskset -c 1 /work/venvs/opacus/bin/python ../shared/reference/bench_opacus.py 1 $w | sed 's/^/opacus /'
  taskset -c 1 /tmp/dpx_new bench --threads 1 --json --no-sgemm --workload $w | sed 's/^/dpx_new /'
  taskset -c 1 /tmp/dpx_base bench --threads 1 --json --no-sgemm --workload $w | sed 's/^/dpx_base /'
done
done
taskset -c 1 /tmp/dpx_new bench --threads 1 --json --workload logreg_mnist --mode dp | grep sgemm | sed 's/^/dpx_new /'
echo done
