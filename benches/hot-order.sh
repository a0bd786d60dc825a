#!/usr/bin/env bash
# Writes packaging/hot-functions.order, the order of the hot functions in the release binary's
# .text (build.rs; BENCHMARKS.md, "Hot functions first"). Run it again after a toolchain or
# dependency update, when the idle RSS of benches/daemon.sh (figure 1) grows back.
#
#   benches/hot-order.sh          # some 10 minutes with the release build done
#
# The default release binary, built with its symbols, runs under callgrind in the daemon
# benchmark (benches/daemon/): counters are zeroed 20 s after it starts (what start-up ran is
# left out), dumped after IDLE_SECS of idle (the idle profile: Telegram's long polls, Lark's
# pings, the timers), then dumped again at its exit, after turns of every kind (plain DMs, tool
# turns, streamed answers, Lark groups). benches/hot_order.py lists what ran in each.
# Needs: valgrind (callgrind_control), python3.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
IDLE_SECS="${IDLE_SECS:-150}"
OUT="$(mktemp -d -t ethan-hot-order.XXXXXX)"
trap 'rm -rf "$OUT"' EXIT
command -v callgrind_control >/dev/null || { echo "needs valgrind (callgrind_control)" >&2; exit 1; }

# The binary most people install (default features), with its symbols; `cargo bench` below
# rebuilds target/release/ethan with the tests' features, so it runs from a copy.
cargo rustc --release --locked --bin ethan -- -C strip=none
cp "$TARGET/release/ethan" "$OUT/ethan"
cat > "$OUT/run" <<WRAP
#!/bin/sh
exec valgrind --tool=callgrind --dump-instr=no --demangle=no --callgrind-out-file=$OUT/cg.%p $OUT/ethan "\$@"
WRAP
chmod +x "$OUT/run"

# The first daemon is the benchmark's start-up run; the second stays for the rest.
watch() {
  local first="" pid=""
  while [ -z "$first" ]; do sleep 0.2; first=$(pgrep -f "$OUT/cg" | head -1 || true); done
  while [ -z "$pid" ]; do
    sleep 0.2
    pid=$(pgrep -f "$OUT/cg" | grep -vx "$first" | head -1 || true)
  done
  echo "$pid" > "$OUT/pid"
  sleep 20
  callgrind_control -z "$pid" >/dev/null
  sleep $((IDLE_SECS - 20))
  callgrind_control -d "$pid" >/dev/null
}
watch &
BENCH_BIN="$OUT/run" BENCH_STARTS=0 BENCH_IDLE_SECS=$((IDLE_SECS + 10)) BENCH_MESSAGES=100 \
  BENCH_TOOL_TURNS=40 BENCH_RATIO_TURNS=20 BENCH_STREAMED=20 BENCH_LARK_MESSAGES=40 \
  BENCH_CHATS=20 BENCH_LARK_CHATS=20 BENCH_MANY_CHATS=0 BENCH_WORKER_WAIT=0 BENCH_ANTHROPIC=0 \
  BENCH_REPLICAS= cargo bench --locked --bench daemon > "$OUT/bench.log" 2>&1 \
  || { tail -20 "$OUT/bench.log" >&2; exit 1; }
wait
pid=$(cat "$OUT/pid")
python3 benches/hot_order.py ethan "$OUT/cg.$pid.1" "$OUT/cg.$pid" > packaging/hot-functions.order
echo "packaging/hot-functions.order: $(grep -vc '^#' packaging/hot-functions.order) functions" >&2
