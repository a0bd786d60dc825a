#!/usr/bin/env bash
# Runs every fuzz target (or the ones named) for a bounded time each.
#
#   fuzz/run.sh                      # all targets, 30 s each
#   FUZZ_SECONDS=300 fuzz/run.sh lark_frame telegram_render
#
# cargo-fuzz needs a nightly compiler; RUSTC_BOOTSTRAP=1 lets the stable toolchain act as one.
# Corpora are seeded at run time from tests/fixtures/ and fuzz/seeds/ into fuzz/corpus/<target>/
# (gitignored). Crashes land in fuzz/artifacts/<target>/: copy them to
# tests/fixtures/fuzz/<target>/ so `cargo test --test fuzz_regressions` keeps checking them.
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_EACH="${FUZZ_SECONDS:-30}"
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
    lark_frame)       seed "$t" "$FIX"/lark/ws_frames/*.bin ;;
    lark_webhook)     seed "$t" "$FIX"/lark/webhook_crypto_vectors.json "$FIX"/lark/url_verification.json ;;
    lark_card)        seed "$t" "$FIX"/lark/card_*.json seeds/lark_card/* ;;
    shell_classifier) seed "$t" seeds/shell_classifier/* ;;
    config)           seed "$t" seeds/config/* ;;
    *) echo "unknown target: $t" >&2; exit 2 ;;
  esac
  mkdir -p "corpus/$t"
  log="artifacts/$t.log"
  mkdir -p artifacts
  echo "== $t (${SECONDS_EACH}s)"
  status=ok
  if ! cargo fuzz run "$t" "corpus/$t" -- -max_total_time="$SECONDS_EACH" \
      -rss_limit_mb=4096 -print_final_stats=1 >"$log" 2>&1; then
    status="FAILED (see fuzz/$log and fuzz/artifacts/$t/)"
  fi
  execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1 || true)
  summary+=("$t: ${execs:-?} executions, $status")
  echo "   ${summary[-1]}"
done
echo
echo "== summary"
printf '%s\n' "${summary[@]}"
for s in "${summary[@]}"; do [[ "$s" == *FAILED* ]] && exit 1; done
exit 0
