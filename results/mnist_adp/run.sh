#!/usr/bin/env bash
# The ADP-SGD CPU experiment of docs/methods/adp_sgd.md §4.2 (Wu et al., arXiv 2110.07435): MNIST multinomial
# logistic regression, ADP-SGD (`noise.schedule = "adp"`, p = 1) vs DP-SGD (`constant`), learning
# rate S1 η_t = 1/√(20 + t), Poisson batches of 256, δ = 1e-5, 3 seeds per point, two arms:
#   paper: both calibrated to the same NOMINAL ε = 16·ε̄ under the paper's bound (`adp-paper`),
#          base configs/mnist_adp_paper.toml;
#   rdp:   both calibrated under RDP to the ε that the DP-SGD paper arm really spends at that
#          (ε̄, epochs), base configs/mnist_adp_rdp.toml (σ_t rounded down to 3 digits).
# Each point is the base file with four keys replaced, run with `dpx run` (one point per run,
# its seeds in order); outputs go to results/mnist_adp/runs/<arm>_<schedule>_c<C>_eb<ε̄>_ep<epochs>/.
# (Not `dpx sweep`: it writes each point's planned RDP curve for the tuning cost, which for the
# 9375 distinct σ_t of an unrounded ADP schedule took minutes per point on a busy 2-core machine.)
#
#   DPX_DATA_DIR=/path/to/datasets results/mnist_adp/run.sh [DPX_BINARY] [PRIORITY] [FIRST LAST]
#   PRIORITY 1: ε̄ = 0.8, C = 1, 5 and 40 epochs (the pass criterion); 2: + 20 epochs and C = 4;
#   3: every point (ε̄ ∈ {0.4, 0.8, 1.6}). Runs already complete are skipped (--resume).
#   FIRST LAST: run seeds FIRST..=LAST instead of the configs' [0, 1, 2], into <name>_s<FIRST>-<LAST>
#   (analyze.py pools the seeds of a point's directories), e.g. `... 1 3 9` for 10 seeds.
set -euo pipefail
DPX=${1:-target/release/dpx}
PRIORITY=${2:-3}
FIRST=${3:-}
LAST=${4:-}
cd "$(dirname "$0")/../.."
OUT=results/mnist_adp/runs
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# RDP ε of the DP-SGD paper arm, rounded down to 5 significant digits. For each (ε̄, epochs), z is
# the DP-SGD noise multiplier under the paper's bound (B_δ with m; it does not depend on C_G):
#   dpx account --config <configs/mnist_adp_paper_dpsgd.toml with epsilon 16·ε̄ and the epochs>  -> z, T
#   dpx account --noise-multiplier z --dataset-size 60000 --batch-size 256 --steps T --delta 1e-5
#   ε̄ = 0.4: z = 4.987526 / 10.400948 / 15.000404 at 5 / 20 / 40 epochs -> ε = 0.101901 / 0.095583 / 0.093372
#   ε̄ = 0.8: z = 2.493763 /  5.200474 /  7.500202                       -> ε = 0.225976 / 0.205143 / 0.199744
#   ε̄ = 1.6: z = 1.246881 /  2.600237 /  3.750101                       -> ε = 0.688551 / 0.448871 / 0.427284
#   (T = 1172 / 4688 / 9375 steps.)
rdp_eps() {
    case "$1_$2" in
        0.4_5) echo 0.10190 ;; 0.4_20) echo 0.095583 ;; 0.4_40) echo 0.093372 ;;
        0.8_5) echo 0.22597 ;; 0.8_20) echo 0.20514 ;; 0.8_40) echo 0.19974 ;;
        1.6_5) echo 0.68855 ;; 1.6_20) echo 0.44887 ;; 1.6_40) echo 0.42728 ;;
    esac
}

run_point() { # arm schedule clip ebar epochs
    local arm=$1 sched=$2 clip=$3 ebar=$4 epochs=$5 eps base name
    if [ "$arm" = paper ]; then
        eps=$(awk -v e="$ebar" 'BEGIN { printf "%g", 16 * e }')
        base=configs/mnist_adp_paper.toml
    else
        eps=$(rdp_eps "$ebar" "$epochs")
        base=configs/mnist_adp_rdp.toml
    fi
    name=${arm}_${sched}_c${clip}_eb${ebar}_ep${epochs}
    local seeds="[0, 1, 2]"
    if [ -n "$FIRST" ]; then
        seeds="[$(seq -s ', ' "$FIRST" "$LAST")]"
        name=${name}_s${FIRST}-${LAST}
    fi
    sed -e "s/^name = .*/name = \"mnist_adp_$name\"/" \
        -e "s/^seeds = .*/seeds = $seeds/" \
        -e "s/^schedule = .*/schedule = \"$sched\"/" \
        -e "s/^clip_norm = .*/clip_norm = $clip/" \
        -e "s/^epsilon = .*/epsilon = $eps/" \
        -e "s/^epochs = .*/epochs = $epochs/" "$base" >"$TMP/$name.toml"
    nice -n 10 "$DPX" run "$TMP/$name.toml" --out "$OUT/$name" --threads 1 --quiet --resume
    echo "$name done"
}

points() {
    for ep in 5 40; do echo "0.8 1 $ep"; done
    [ "$PRIORITY" -ge 2 ] && { echo "0.8 1 20"; for ep in 5 20 40; do echo "0.8 4 $ep"; done; }
    [ "$PRIORITY" -ge 3 ] && for eb in 0.4 1.6; do for c in 1 4; do for ep in 5 20 40; do
        echo "$eb $c $ep"; done; done; done
    return 0
}

points | while read -r ebar clip epochs; do
    for arm in paper rdp; do
        for sched in constant adp; do
            run_point "$arm" "$sched" "$clip" "$ebar" "$epochs"
        done
    done
done
