#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for a bounded time each.
#
#   fuzz/run.sh                      # all targets, 30 s each
#   FUZZ_SECONDS=300 fuzz/run.sh lark_frame telegram_render
#   FUZZ_FLAGS="--sanitizer none" fuzz/run.sh   # extra `cargo fuzz run` flags (no ASan: faster)
#
# cargo-fuzz needs a nightly compiler; RUSTC_BOOTSTRAP=1 lets the stable toolchain act as one.
# The first run builds every dependency with coverage instrumentation into fuzz/target/ (many
# minutes); `cargo fuzz build` (with the same FUZZ_FLAGS) does that ahead.
# Corpora are seeded at run time from tests/fixtures/ and fuzz/seeds/ into fuzz/corpus/<target>/
# (gitignored) and grow there from run to run. Each target's libFuzzer output goes to
# fuzz/artifacts/<target>.log; crashes, timeouts (an input running over 10 s) and out-of-memory
# inputs land in fuzz/artifacts/<target>/ (gitignored): minimise one with
# `cargo fuzz tmin <target> <file>`, fix the bug, and copy the input to
# tests/fixtures/fuzz/<target>/ so `cargo test --test all fuzz_regressions::` keeps checking it.
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_EACH="${FUZZ_SECONDS:-30}"
read -r -a FLAGS <<<"${FUZZ_FLAGS:-}"
ALL=(telegram_update lark_frame lark_webhook telegram_render lark_card shell_classifier config)
TARGETS=("${@:-${ALL[@]}}")
FIX=../tests/fixtures

seed() { # seed <target> <file>...
  local dir="corpus/$1"; shift
  mkdir -p "$dir"
  for f in "$@"; do [ -f "$f" ] && cp -f "$f" "$dir/" || true; done
}

export RUSTC_BOOTSTRAP=1
summary=()
for t in "${TARGETS[@]}"; do
  case "$t" in
    telegram_update)  seed "$t" "$FIX"/telegram/*.json ;;
    telegram_render)  seed "$t" "$FIX"/telegram/*.json "$FIX"/*.md ../README.md seeds/telegram_render/* ;;
    lark_frame)       seed "$t" "$FIX"/lark/ws_frames/*.bin seeds/lark_frame/* ;;
    lark_webhook)     seed "$t" "$FIX"/lark/webhook_crypto_vectors.json "$FIX"/lark/url_verification.json ;;
    lark_card)        seed "$t" "$FIX"/lark/card_*.json seeds/lark_card/* ;;
    shell_classifier) seed "$t" seeds/shell_classifier/* ;;
    config)           seed "$t" seeds/config/* ;;
    *) echo "unknown target: $t" >&2; exit 2 ;;
  esac
  mkdir -p "corpus/$t"
  # telegram_render renders only an input's first 1 KB: mutations past that would be wasted.
  limits=()
  [ "$t" = telegram_render ] && limits=(-max_len=1024)
  log="artifacts/$t.log"
  mkdir -p "artifacts/$t"
  marker=$(mktemp)
  echo "== $t (${SECONDS_EACH}s)"
  status="nothing found"
  if ! cargo fuzz run "${FLAGS[@]}" "$t" "corpus/$t" -- -max_total_time="$SECONDS_EACH" \
      -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 "${limits[@]}" >"$log" 2>&1; then
    status="FAILED (see fuzz/$log)"
  fi
  found=$(find "artifacts/$t" -type f -newer "$marker" | sort | tr '\n' ' ')
  rm -f "$marker"
  [ -n "$found" ] && status="FOUND: $found(see fuzz/$log)"
  # libFuzzer's final statistics; without them (a crash), the last status line `#N ...`.
  execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1 || true)
  [ -z "$execs" ] && execs=$(grep -Eo '^#[0-9]+' "$log" | tr -d '#' | tail -1 || true)
  summary+=("$t: ${execs:-?} executions in ${SECONDS_EACH}s, $status")
  echo "   ${summary[-1]}"
done
echo
echo "== summary"
printf '%s\n' "${summary[@]}"
for s in "${summary[@]}"; do [[ "$s" == *FAILED* || "$s" == *FOUND* ]] && exit 1; done
exit 0
