#!/bin/bash
cd /work/wt/perf
for round in 1 2; do
for w in logreg_mnist mlp_mnist cnn_mnist cnn_cifar10; do
  echo "# round $round $w $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  BENCH_MODES=nonprivate,opacus_ghost /work/venvs/opacus/bin/python ../shared/reference/bench_opacus.py 1 $w | sed 's/^/opacus /'
  /tmp/dpx_final bench --threads 1 --json --no-sgemm --workload $w | sed 's/^/dpx_new /'
  /tmp/dpx_base bench --threads 1 --json --no-sgemm --workload $w --steps 10 | sed 's/^/dpx_before /'
done
done
echo done
