#!/usr/bin/env bash
# Sweep overhead and scaling: 100 quickstart-sized runs (configs/quickstart.toml, one seed,
# learning rates 1.00..1.99) as one `dpx sweep` versus 100 back-to-back `dpx run`s, and the sweep
# with 1 and 2 threads. Prints wall-clock and CPU seconds; checks that a sweep point's summary
# equals the matching `dpx run` (ignoring `seconds`). Uses target/release/dpx (build it first).
#
#   cargo build --release && scripts/sweep_perf.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
B="${DPX_BIN:-$ROOT/target/release/dpx}"
W="$(mktemp -d /tmp/dpx-sweep-perf.XXXXXX)"
trap 'rm -rf "$W"' EXIT
lr_values() { for i in $(seq 0 99); do printf '%s%d.%02d' "$([ "$i" = 0 ] || echo ', ')" $((1 + i / 100)) $((i % 100)); done; }
printf 'base = "%s/configs/quickstart.toml"\nseeds = [0]\n[grid]\n"train.learning_rate" = [%s]\n' \
    "$ROOT" "$(lr_values)" > "$W/sweep100.toml"
for i in $(seq 0 99); do
    sed -e 's/^seeds = \[0, 1, 2\]/seeds = [0]/' \
        -e "s/^learning_rate = 2.0/learning_rate = $(printf '%d.%02d' $((1 + i / 100)) $((i % 100)))/" \
        "$ROOT/configs/quickstart.toml" > "$W/run$i.toml"
done
TIMEFORMAT='%R s wall, %U s user, %S s sys'
echo "100 back-to-back dpx run (--threads 1):"
time (for i in $(seq 0 99); do "$B" run "$W/run$i.toml" --out "$W/rb/$i" --threads 1 -q >/dev/null; done)
for t in 1 2; do
    echo "dpx sweep, 100 points, --threads $t:"
    time "$B" sweep "$W/sweep100.toml" --out "$W/sw$t" --threads "$t" --quiet
done
strip() { sed -E 's/,[^,]*$//' "$1"; }
id="$(sed -n 2p "$W/sw1/points.csv" | cut -d, -f2)"
diff <(strip "$W/sw1/points/$id/summary.csv") <(strip "$W/rb/0/summary.csv") >/dev/null \
    && echo "check: sweep point 0 equals dpx run 0"
diff <(strip "$W/sw1/summary.csv") <(strip "$W/sw2/summary.csv") >/dev/null \
    && echo "check: sweep results equal with 1 and 2 threads"
