#!/bin/bash
# Interleaved 1 -> 2 thread bench: ce1a72c (before) and 81f8293 (row-major W^T for dense forwards,
# parallel zeroing and widening of the f64 sums), two rounds each, training run paused.
# Usage: DPX_BIN_DIR=DIR [PAUSE_PID=PID] ./dense_two_cores_interleaved.sh > dense_two_cores_2026-11-26.jsonl
# DIR holds the release binaries built from each commit, named dpx-<commit>.
P=${PAUSE_PID:-}   # a training run to pause while measuring, if any
[ -n "$P" ] && kill -STOP $P
for round in 1 2; do
  for bin in ce1a72c 81f8293; do
    echo "## round $round, binary $bin, $(date -u +%H:%M:%S)"
    "$DPX_BIN_DIR/dpx-$bin" bench --json --workload logreg_mnist --workload mlp_mnist \
      --workload cnn_mnist --workload cnn_cifar10 2>&1
  done
done
[ -n "$P" ] && kill -CONT $P
