#!/usr/bin/env bash
# kill -9 a real CIFAR-10 run at a random moment after its first checkpoint, resume it, and
# compare every output byte with an uninterrupted run (summary.csv without `seconds`).
#
#   scripts/kill_resume_check.sh [DPX_BINARY] [OUT_DIR]
#
# Needs CIFAR-10 in $DPX_DATA_DIR/cifar10 (dpx data fetch cifar10). Exits 1 on any difference.
set -euo pipefail
DPX=${1:-target/release/dpx}
OUT=${2:-$(mktemp -d)}
CFG=configs/cifar_kill_resume.toml
mkdir -p "$OUT"
rm -rf "$OUT/straight" "$OUT/killed"
"$DPX" run "$CFG" --out "$OUT/straight" --threads 2 --quiet
# The killed run: checkpoints every 5 steps; SIGKILL at a random time after the first one.
"$DPX" run "$CFG" --out "$OUT/killed" --threads 2 --quiet --checkpoint-every 5 &
PID=$!
until ls "$OUT"/killed/seeds/*.checkpoint >/dev/null 2>&1; do sleep 0.5; done
DELAY=$(( RANDOM % 10 + 1 ))
sleep "$DELAY"
kill -9 "$PID" 2>/dev/null || true
wait "$PID" 2>/dev/null || true
if [ -f "$OUT/killed/summary.csv" ]; then
  echo "the run finished before the kill: nothing was checked; run again" >&2
  exit 2
fi
echo "killed after the first checkpoint + ${DELAY} s; checkpoints left:"
ls -l "$OUT"/killed/seeds/ | grep -E "checkpoint|summary" || true
"$DPX" run "$CFG" --out "$OUT/killed" --threads 2 --quiet --resume --checkpoint-every 5
status=0
for f in metrics.csv seeds/0.metrics.csv seeds/1.metrics.csv seeds/0.model.safetensors seeds/1.model.safetensors config.toml; do
  if cmp -s "$OUT/straight/$f" "$OUT/killed/$f"; then echo "same: $f"; else echo "DIFFERENT: $f"; status=1; fi
done
strip() { python3 -c 'import csv,sys
r=list(csv.reader(open(sys.argv[1]))); i=r[0].index("seconds")
print("\n".join(",".join(x[:i]+x[i+1:]) for x in r))' "$1"; }
if [ "$(strip "$OUT/straight/summary.csv")" = "$(strip "$OUT/killed/summary.csv")" ]; then
  echo "same: summary.csv (all columns but seconds)"
else
  echo "DIFFERENT: summary.csv"; status=1
fi
if ls "$OUT"/killed/seeds/*.checkpoint >/dev/null 2>&1; then echo "a checkpoint was left behind"; status=1; fi
exit $status
