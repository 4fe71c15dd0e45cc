#!/usr/bin/env bash
# The clipping-policy reproductions (results/adaclip_mnist_logreg/, results/dcsgd_mnist/): every
# sweep, then the summary tables. Needs the release binary and MNIST under $DPX_DATA_DIR/mnist.
#
#   DPX_DATA_DIR=/path/to/datasets scripts/clip_reproductions.sh [THREADS]
#
# Sweeps resume: re-running skips finished jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${1:-2}"
dpx=target/release/dpx
run() { nice -n 10 "$dpx" sweep "configs/sweeps/$1.toml" --threads "$threads" --quiet --out "$2"; }

run adaclip_logreg_dpsgd results/adaclip_mnist_logreg/dpsgd
run adaclip_logreg_adaclip results/adaclip_mnist_logreg/adaclip
run adaclip_logreg_confirm_dpsgd results/adaclip_mnist_logreg/confirm_dpsgd
run adaclip_logreg_confirm_adaclip results/adaclip_mnist_logreg/confirm_adaclip
for arm in dpsgd p e quantile; do
    run "dcsgd_grid_$arm" "results/dcsgd_mnist/grid_$arm"
done
for arm in dpsgd p quantile; do
    run "dcsgd_tuned_$arm" "results/dcsgd_mnist/tuned_$arm"
done
run dcsgd_trace results/dcsgd_mnist/trace
python3 scripts/clip_tables.py
for d in results/adaclip_mnist_logreg/{dpsgd,adaclip,confirm_dpsgd,confirm_adaclip} results/dcsgd_mnist/{grid,tuned}_* results/dcsgd_mnist/trace; do
    "$dpx" report "$d" > /dev/null
done
