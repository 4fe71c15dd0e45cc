#!/bin/bash
# Interleaved 1 -> 2 thread bench: 407d80b (before shards) and 2fce5f4 (shards), two rounds each, experiment paused.
# Usage: DPX_BIN_DIR=DIR [PAUSE_PID=PID] ./two_cores_interleaved.sh > two_cores_2026-11-26.jsonl
# DIR holds the release binaries built from each commit, named dpx-<commit>.
P=${PAUSE_PID:-}   # a training run to pause while measuring, if any
[ -n "$P" ] && kill -STOP $P
for round in 1 2; do
  for bin in 407d80b 2fce5f4; do
    echo "## round $round, binary $bin"
    "$DPX_BIN_DIR/dpx-$bin" bench --json 2>&1
  done
done
[ -n "$P" ] && kill -CONT $P
