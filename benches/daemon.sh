#!/usr/bin/env bash
# Whole-process benchmarks of `ethan run` against loopback fakes (benches/fakes.py).
#
#   benches/daemon.sh                  # build the release binary once, run everything
#   BENCH_MESSAGES=10000 benches/daemon.sh
#
# Environment:
#   BENCH_MESSAGES   messages for the per-message overhead run (default 1000)
#   BENCH_CHATS      concurrent chats for the throughput run (default 200)
#   BENCH_PER_CHAT   messages per chat for the throughput run (default 5)
#   BENCH_STARTS     startup runs (default 20)
#   BENCH_IDLE_SECS  idle time before reading RSS (default 30)
#   BENCH_SKIP_BUILD=1  use the existing target/release/ethan
#   BENCH_GOVERNANCE=0  skip `cargo bench --bench governance`
# Needs: cargo, python3 (stdlib), curl. Everything binds 127.0.0.1; all processes are killed on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MESSAGES="${BENCH_MESSAGES:-1000}"
CHATS="${BENCH_CHATS:-200}"
PER_CHAT="${BENCH_PER_CHAT:-5}"
STARTS="${BENCH_STARTS:-20}"
IDLE_SECS="${BENCH_IDLE_SECS:-30}"
BIN="$ROOT/target/release/ethan"
TOKEN="123456:bench-token"

WORK="$(mktemp -d -t ethan-bench.XXXXXX)"
FAKES_PID=""
DAEMON_PID=""
cleanup() {
    set +e
    if [[ -n "$DAEMON_PID" ]]; then kill "$DAEMON_PID" 2>/dev/null; wait "$DAEMON_PID" 2>/dev/null; fi
    if [[ -n "$FAKES_PID" ]]; then kill "$FAKES_PID" 2>/dev/null; wait "$FAKES_PID" 2>/dev/null; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { printf '[bench] %s\n' "$*" >&2; }

if [[ "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
    log "cargo build --release --locked"
    cargo build --release --locked
fi
[[ -x "$BIN" ]] || { echo "no $BIN" >&2; exit 1; }

# ---- fakes --------------------------------------------------------------------------------------
python3 "$ROOT/benches/fakes.py" "$TOKEN" >"$WORK/fakes.out" 2>"$WORK/fakes.err" &
FAKES_PID=$!
for _ in $(seq 100); do [[ -s "$WORK/fakes.out" ]] && break; sleep 0.05; done
read -r TG_KV MODEL_KV <"$WORK/fakes.out"
TG_PORT="${TG_KV#TELEGRAM_PORT=}"
MODEL_PORT="${MODEL_KV#MODEL_PORT=}"
CTL="http://127.0.0.1:$TG_PORT/_ctl"
log "fakes: telegram 127.0.0.1:$TG_PORT, model 127.0.0.1:$MODEL_PORT"

ctl() { curl -sf --max-time "${2:-600}" "$CTL/$1"; }
jget() { python3 -c 'import json,sys; v=json.load(sys.stdin).get(sys.argv[1]); print("" if v is None else v)' "$1"; }
fmt() { python3 -c 'import sys; v=sys.argv[1]; print("n/a" if v=="" else ("%.*f" % (int(sys.argv[2]), float(v))))' "$1" "${2:-0}"; }

HOME_DIR="$WORK/home"
mkdir -p "$HOME_DIR"
cat >"$HOME_DIR/config.yaml" <<EOF
model:
  base_url: http://127.0.0.1:$MODEL_PORT/v1
  api_key: sk-bench
  name: bench-model
channels:
  telegram:
    token: "$TOKEN"
    api_url: http://127.0.0.1:$TG_PORT
    dm_policy: open
gateway:
  listen: 127.0.0.1:0
EOF

start_daemon() {
    ETHAN_HOME="$HOME_DIR" RUST_LOG="${BENCH_RUST_LOG:-warn}" NO_COLOR=1 NO_PROXY='*' \
        "$BIN" run >>"$WORK/daemon.log" 2>&1 &
    DAEMON_PID=$!
}
stop_daemon() {
    if [[ -n "$DAEMON_PID" ]]; then
        kill -TERM "$DAEMON_PID" 2>/dev/null || true
        for _ in $(seq 200); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.05; done
        kill -KILL "$DAEMON_PID" 2>/dev/null || true
        wait "$DAEMON_PID" 2>/dev/null || true
        DAEMON_PID=""
    fi
}
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# ---- (2) startup: exec -> first getUpdates at the fake, median of $STARTS ---------------------
# The first run creates the database (migrations) and is reported separately; the median is over
# $STARTS restarts on the existing home. Both clocks are CLOCK_MONOTONIC: the fake's
# time.monotonic_ns() and this shell's reading of the same clock just before exec.
mono_ns() { python3 -c 'import time; print(time.monotonic_ns())'; }
startup_once() {
    ctl reset_polls >/dev/null
    local t0
    # exec the daemon from a python that records the monotonic time right before exec.
    python3 - "$WORK/t0" "$BIN" run <<'PY' >>"$WORK/daemon.log" 2>&1 &
import os, sys, time
open(sys.argv[1], "w").write(str(time.monotonic_ns()))
os.execv(sys.argv[2], sys.argv[2:])
PY
    DAEMON_PID=$!
    local t1
    t1="$(ctl 'wait_poll?timeout=20' 30 | jget t_ns)"
    t0="$(cat "$WORK/t0")"
    stop_daemon
    [[ -n "$t1" ]] || { echo "daemon never polled; log:" >&2; tail -20 "$WORK/daemon.log" >&2; exit 1; }
    echo $(( (t1 - t0) / 1000 ))
}
export ETHAN_HOME="$HOME_DIR" RUST_LOG="${BENCH_RUST_LOG:-warn}" NO_COLOR=1 NO_PROXY='*'
log "startup: first run (fresh home) + $STARTS runs"
FIRST_START_US="$(startup_once)"
STARTS_US=()
for _ in $(seq "$STARTS"); do STARTS_US+=("$(startup_once)"); done
STARTUP_MED_US="$(printf '%s\n' "${STARTS_US[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')"
STARTUP_MIN_US="$(printf '%s\n' "${STARTS_US[@]}" | sort -n | head -1)"
STARTUP_MAX_US="$(printf '%s\n' "${STARTS_US[@]}" | sort -n | tail -1)"

# ---- (1) idle memory -----------------------------------------------------------------------------
log "idle RSS: waiting ${IDLE_SECS}s with Telegram connected and no traffic"
start_daemon
ctl reset_polls >/dev/null
ctl 'wait_poll?timeout=20' 30 >/dev/null
sleep "$IDLE_SECS"
IDLE_RSS_KB="$(rss_kb "$DAEMON_PID")"
IDLE_CPU_TICKS="$(cpu_ticks "$DAEMON_PID")"

# ---- (3) per-message overhead ----------------------------------------------------------------------
log "per-message overhead: $MESSAGES sequential messages, instant model"
LAT="$(ctl "latency?n=$MESSAGES&timeout=10" 3600)"
echo "$LAT" | grep -q error && { echo "latency run failed: $LAT" >&2; tail -20 "$WORK/daemon.log" >&2; exit 1; }
RSS_AFTER_LAT_KB="$(rss_kb "$DAEMON_PID")"

# ---- (4) throughput ----------------------------------------------------------------------------------
log "throughput: $CHATS chats x $PER_CHAT messages, pushed at once"
CPU0="$(cpu_ticks "$DAEMON_PID")"
FCPU0="$(cpu_ticks "$FAKES_PID")"
TP="$(ctl "throughput?chats=$CHATS&per=$PER_CHAT&timeout=600" 900)"
CPU1="$(cpu_ticks "$DAEMON_PID")"
FCPU1="$(cpu_ticks "$FAKES_PID")"
RSS_AFTER_TP_KB="$(rss_kb "$DAEMON_PID")"
stop_daemon
TICK="$(getconf CLK_TCK)"

# ---- (5) binary size ------------------------------------------------------------------------------
BIN_BYTES="$(stat -c %s "$BIN")"
STRIPPED="no"
if command -v file >/dev/null && file "$BIN" | grep -q ', stripped'; then STRIPPED="yes"; fi

# ---- governance (criterion) ---------------------------------------------------------------------
GOV=""
if [[ "${BENCH_GOVERNANCE:-1}" != 0 ]]; then
    log "cargo bench --bench governance"
    GOV="$(cargo bench --bench governance 2>/dev/null | grep -A20 '^call ' || true)"
fi

# ---- table -----------------------------------------------------------------------------------------
TURNS="$(echo "$TP" | jget turns)"
REPLIED="$(echo "$TP" | jget replied)"
TPS="$(echo "$TP" | jget turns_per_s)"
CPU_MS_PER_TURN="$(python3 -c "print('%.2f' % (($CPU1-$CPU0)*1000.0/$TICK/max(1,$REPLIED)))")"
FAKE_CPU_MS_PER_TURN="$(python3 -c "print('%.2f' % (($FCPU1-$FCPU0)*1000.0/$TICK/max(1,$REPLIED)))")"
echo
echo "Ethan daemon benchmarks — $(nproc) cores, $(uname -sr), $(date -u +%Y-%m-%dT%H:%MZ)"
printf '%-58s %s\n' "Figure" "Value"
printf '%-58s %s\n' "----------------------------------------------------------" "----------------"
printf '%-58s %s\n' "(1) idle RSS, Telegram, after ${IDLE_SECS}s (VmRSS)" "$(fmt "$(python3 -c "print($IDLE_RSS_KB/1024)")" 1) MiB"
printf '%-58s %s\n' "    CPU used from start to end of idle period" "$(python3 -c "print('%d ms' % ($IDLE_CPU_TICKS*1000/$TICK))")"
printf '%-58s %s\n' "(2) startup exec -> first getUpdates, median of $STARTS" "$(fmt "$(python3 -c "print($STARTUP_MED_US/1000)")" 1) ms (min $(fmt "$(python3 -c "print($STARTUP_MIN_US/1000)")" 1), max $(fmt "$(python3 -c "print($STARTUP_MAX_US/1000)")" 1))"
printf '%-58s %s\n' "    first start on a fresh home (creates the database)" "$(fmt "$(python3 -c "print($FIRST_START_US/1000)")" 1) ms"
printf '%-58s %s\n' "(3) update handed out -> model request, p50 / p99 (n=$MESSAGES)" "$(fmt "$(echo "$LAT" | jget in_p50_us)" 0) / $(fmt "$(echo "$LAT" | jget in_p99_us)" 0) µs"
printf '%-58s %s\n' "    model response sent -> sendMessage, p50 / p99" "$(fmt "$(echo "$LAT" | jget out_p50_us)" 0) / $(fmt "$(echo "$LAT" | jget out_p99_us)" 0) µs"
printf '%-58s %s\n' "    whole turn at the fake (update -> sendMessage) p50 / p99" "$(fmt "$(echo "$LAT" | jget total_p50_us)" 0) / $(fmt "$(echo "$LAT" | jget total_p99_us)" 0) µs"
printf '%-58s %s\n' "    RSS after the sequential run" "$(fmt "$(python3 -c "print($RSS_AFTER_LAT_KB/1024)")" 1) MiB"
printf '%-58s %s\n' "(4) throughput, $CHATS chats x $PER_CHAT msgs, persisted" "$(fmt "$TPS" 0) turns/s ($REPLIED/$TURNS replied in $(fmt "$(echo "$TP" | jget seconds)" 2) s)"
printf '%-58s %s\n' "    CPU per turn: daemon / the Python fakes (same 2 cores)" "$CPU_MS_PER_TURN ms / $FAKE_CPU_MS_PER_TURN ms"
printf '%-58s %s\n' "    RSS after the throughput run" "$(fmt "$(python3 -c "print($RSS_AFTER_TP_KB/1024)")" 1) MiB"
printf '%-58s %s\n' "(5) release binary size (stripped: $STRIPPED)" "$(fmt "$(python3 -c "print($BIN_BYTES/1048576)")" 1) MiB ($BIN_BYTES bytes)"
if [[ -n "$GOV" ]]; then
    echo
    echo "Governance overhead per call (cargo bench --bench governance):"
    echo "$GOV"
fi
