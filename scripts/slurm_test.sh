#!/usr/bin/env bash
# End-to-end test of `dpx sweep --slurm` on a real single-node Slurm cluster on loopback.
#
# Installs Debian's slurm-wlm and munge if missing (needs root and the Debian mirror), writes a
# minimal slurm.conf in a temporary directory (one node on 127.0.0.1, select/cons_tres,
# proctrack/linuxproc, no cgroups, no accounting), starts munged, slurmctld and slurmd, submits
# the array script that `dpx sweep --slurm` writes, waits for it (bounded), merges the shards
# with `dpx collect`, and checks the merged summary equals a local `dpx sweep` of the same file
# (ignoring the `seconds` column). Stops only the daemons it started.
#
#   scripts/slurm_test.sh [SWEEP_FILE]     (default configs/sweeps/quickstart_eps_lr.toml)
#
# Environment: DPX_BIN (default: build and use target/debug/dpx, under CARGO_TARGET_DIR when set),
# SLURM_TEST_TIMEOUT (seconds to wait for the array, default 600), SLURM_TEST_SHARDS (default 3).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SWEEP="${1:-$ROOT/configs/sweeps/quickstart_eps_lr.toml}"
SWEEP="$(cd "$(dirname "$SWEEP")" && pwd)/$(basename "$SWEEP")"
TIMEOUT="${SLURM_TEST_TIMEOUT:-600}"
SHARDS="${SLURM_TEST_SHARDS:-3}"
STARTED=$(date +%s)

log() { echo "slurm_test: $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

if [ "$(id -u)" != 0 ]; then
    fail "must run as root (installs packages and starts slurmd)"
fi

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    log "installing slurm-wlm and munge"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi

if [ -z "${DPX_BIN:-}" ]; then
    (cd "$ROOT" && cargo build --quiet --bin dpx)
    DPX_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/dpx"
fi
DPX_BIN="$(cd "$(dirname "$DPX_BIN")" && pwd)/$(basename "$DPX_BIN")"

W="$(mktemp -d /tmp/dpx-slurm-test.XXXXXX)"
chmod 755 "$W"
mkdir -p "$W/state" "$W/spool" "$W/munge/run" "$W/munge/log" "$W/munge/lib"
PIDS=()

# Remember the pid a daemon wrote to its pid file (waits up to 10 s for the file).
remember() {
    for _ in $(seq 1 50); do
        if [ -s "$1" ]; then
            PIDS+=("$(cat "$1")")
            return
        fi
        sleep 0.2
    done
    fail "no pid file $1"
}

cleanup() {
    local rc=$?
    # Only the daemons this script started, by pid; slurmd first, munged last.
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        kill "${PIDS[$i]}" 2>/dev/null || true
    done
    if [ $rc -ne 0 ]; then
        log "logs kept in $W (slurmctld.log, slurmd.log, out/slurm/)"
    else
        sleep 1
        rm -rf "$W"
    fi
    exit $rc
}
trap cleanup EXIT

# munge: a private key and socket under $W, so a system munged (if any) is left alone.
dd if=/dev/urandom of="$W/munge/munge.key" bs=1024 count=1 status=none
chown -R munge:munge "$W/munge"
chmod 755 "$W/munge" "$W/munge/run"
chmod 700 "$W/munge/lib" "$W/munge/log"
chmod 400 "$W/munge/munge.key"
SOCKET="$W/munge/run/munge.socket.2"
runuser -u munge -- munged --key-file="$W/munge/munge.key" --socket="$SOCKET" \
    --pid-file="$W/munge/run/munged.pid" --log-file="$W/munge/log/munged.log" \
    --seed-file="$W/munge/lib/munged.seed"
remember "$W/munge/run/munged.pid"

CPUS="$(nproc)"
NODE=dpxnode
cat > "$W/slurm.conf" <<EOF
ClusterName=dpxtest
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCKET
CredType=cred/munge
SlurmctldPort=$((17000 + RANDOM % 1000))
SlurmdPort=$((18000 + RANDOM % 1000))
StateSaveLocation=$W/state
SlurmdSpoolDir=$W/spool
SlurmctldPidFile=$W/slurmctld.pid
SlurmdPidFile=$W/slurmd.pid
SlurmctldLogFile=$W/slurmctld.log
SlurmdLogFile=$W/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$(hostname) CPUs=$CPUS State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$W/slurm.conf"

log "starting slurmctld and slurmd ($CPUS CPUs) in $W"
slurmctld -f "$SLURM_CONF"
remember "$W/slurmctld.pid"
slurmd -f "$SLURM_CONF" -N "$NODE"
remember "$W/slurmd.pid"

for _ in $(seq 1 60); do
    if sinfo -h -N -o '%T' 2>/dev/null | grep -q -E '^(idle|mixed|allocated)'; then
        break
    fi
    sleep 1
done
sinfo -h -N -o '%N %T' | grep -q -E 'idle|mixed|allocated' \
    || fail "node never became idle: $(sinfo -h -N -o '%N %T' 2>&1); see $W/slurmd.log"

# The array script, written by dpx itself.
cd "$W"
"$DPX_BIN" sweep "$SWEEP" --slurm --shards "$SHARDS" --cpus 1 --time 00:10:00 \
    --partition debug --out "$W/out" >"$W/dpx_slurm.txt"
cat "$W/dpx_slurm.txt" >&2
grep -q -- "--array=0-$((SHARDS - 1))" "$W/out/sweep.sbatch" || fail "no array line in sweep.sbatch"

log "submitting the array (waiting at most ${TIMEOUT}s)"
JOB="$(sbatch --parsable "$W/out/sweep.sbatch")"
DEADLINE=$(($(date +%s) + TIMEOUT))
while squeue -h -j "$JOB" 2>/dev/null | grep -q .; do
    if [ "$(date +%s)" -gt "$DEADLINE" ]; then
        scancel "$JOB" || true
        fail "array $JOB not finished after ${TIMEOUT}s: $(squeue -j "$JOB" 2>&1)"
    fi
    sleep 2
done
for i in $(seq 0 $((SHARDS - 1))); do
    [ -f "$W/out/shards/$i/points.csv" ] || fail "shard $i wrote nothing; see $W/out/slurm/"
done

"$DPX_BIN" collect --out "$W/out" "$W"/out/shards/*
"$DPX_BIN" sweep "$SWEEP" --out "$W/local" --threads "$CPUS" --quiet

# Compare without the last column (`seconds`, the only one that varies between identical runs).
strip() { sed -E 's/,[^,]*$//' "$1"; }
if ! diff <(strip "$W/out/summary.csv") <(strip "$W/local/summary.csv") >"$W/diff.txt"; then
    fail "merged Slurm summary differs from the local sweep: $(head -20 "$W/diff.txt")"
fi
ROWS=$(($(wc -l <"$W/local/summary.csv") - 1))
[ "$ROWS" -gt 0 ] || fail "empty summary"
log "OK: $ROWS jobs in $SHARDS array tasks equal the local sweep ($(($(date +%s) - STARTED)) s)"
