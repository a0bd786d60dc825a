#!/usr/bin/env bash
# Every benchmark figure of the daemon, one command, one table at the end.
#
#   benches/daemon.sh                      # build the release binary, run everything
#                                          # (~15 min with the build done)
#   BENCH_MESSAGES=1000 BENCH_IDLE_SECS=5 benches/daemon.sh   # a quick pass
#
# Runs, in order:
#   cargo build --release --locked         the binary under test (kept as target/ethan-default),
#                                          after the same with --features postgres for the
#                                          replica runs (kept as target/ethan-postgres)
#   cargo bench --bench daemon             whole-process figures against loopback fakes:
#                                          idle RSS, startup, per-message overhead, CPU per
#                                          turn, throughput (SQLite, PostgreSQL replicas),
#                                          streaming, RSS after 10,000 chats, request size per
#                                          provider, binary size (benches/daemon/)
#   cargo bench --bench governance         governance overhead per tool call
#   cargo bench --bench pipeline           history load at 100,000 stored messages
# Environment (see benches/README.md): BENCH_MESSAGES (10000), BENCH_CHATS (1000),
# BENCH_PER_CHAT (1), BENCH_STARTS (20), BENCH_IDLE_SECS (30), BENCH_STREAMED (500),
# BENCH_REPLICAS (1,2,3), BENCH_MANY_CHATS (10000), BENCH_WORKER_WAIT (320), BENCH_RATIO_TURNS
# (300: turns in a long chat and in fresh ones, for CPU per turn and its ratio), BENCH_TOOL_TURNS
# (300: owner's DM turns with one file_read each, update -> reply), BENCH_SKIP_BUILD=1
# (use the binaries already built), BENCH_PG_BIN (the replica runs' binary),
# PIPELINE_MESSAGES (100000).
# Needs: a Rust toolchain, PostgreSQL's server binaries (initdb, postgres) for the replica runs.
# Everything binds 127.0.0.1; every process started is stopped on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="$(mktemp -d -t ethan-bench.XXXXXX)"
trap 'rm -rf "$OUT"' EXIT
log() { printf '[bench] %s\n' "$*" >&2; }

# Two builds: the replica runs need the PostgreSQL store (feature `postgres`); every other
# figure is the default build's, the binary most people install. Both are copied out of
# target/release: `cargo bench` rebuilds target/release/ethan with the features of the tests.
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
PG_BIN="$TARGET/ethan-postgres"
DEFAULT_BIN="$TARGET/ethan-default"
if [[ "${BENCH_SKIP_BUILD:-0}" != 1 ]]; then
    log "cargo build --release --locked --features postgres"
    cargo build --release --locked --features postgres
    cp "$TARGET/release/ethan" "$PG_BIN"
    log "cargo build --release --locked"
    cargo build --release --locked
    cp "$TARGET/release/ethan" "$DEFAULT_BIN"
fi
export BENCH_BIN="${BENCH_BIN:-$DEFAULT_BIN}"
export BENCH_PG_BIN="${BENCH_PG_BIN:-$PG_BIN}"

log "cargo bench --bench daemon"
cargo bench --locked --bench daemon | tee "$OUT/daemon.txt"
log "cargo bench --bench governance"
cargo bench --locked --bench governance | tee "$OUT/governance.txt"
log "cargo bench --bench pipeline"
cargo bench --locked --bench pipeline | tee "$OUT/pipeline.txt"

gov() { awk -v t="$1" '$1 == t {printf "p50 %s µs, p99 %s µs", $(NF-2), $(NF-1)}' "$OUT/governance.txt"; }
hist() { awk -v w="$1" 'index($0, w) == 1 {printf "p50 %.0f µs, p99 %.0f µs", $(NF-3), $(NF-2)}' "$OUT/pipeline.txt"; }

echo
echo "Ethan benchmarks: $(nproc) cores, $(uname -sr), $(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| %s | %s | %s | %s | %s |\n' "#" "figure" "measured" "budget" "met"
printf '|---|---|---|---|---|\n'
grep '^FIGURE|' "$OUT/daemon.txt" | while IFS='|' read -r _ n what value budget verdict; do
    printf '| %s | %s | %s | %s | %s |\n' "$n" "$what" "$value" "$budget" "$verdict"
done
printf '| %s | %s | %s | %s | %s |\n' 5 "governance per call, read-only tool" "$(gov noop_read)" "" "reported"
printf '| %s | %s | %s | %s | %s |\n' 5 "governance per call, side-effect tool" "$(gov noop_write)" "" "reported"
printf '| %s | %s | %s | %s | %s |\n' 6 "history: load_window(50) + JSON body, 100,000 stored" "$(hist 'load_window(50) + JSON')" "" "reported"
missed="$(grep -c '|missed$' "$OUT/daemon.txt" || true)"
echo
echo "budgets missed: ${missed}"
