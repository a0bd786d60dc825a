#!/usr/bin/env bash
# The whole test suite, on a fresh machine as on one already set up. It installs what the tests
# need where it can: Debian/Ubuntu packages with apt-get (as root, or through sudo without a
# password), the MCP test servers with tests/tools/install.sh (npm and pip). What it cannot
# install it names, with how to get it, and stops. Then it runs the suite on SQLite and again on
# PostgreSQL (a throwaway cluster the tests start themselves).
#
# Usage: tests/run.sh [--no-install] [--install-only] [--sqlite-only] [-- CARGO_TEST_ARGS...]
#   --no-install     check only: name what is missing instead of installing it
#   --install-only   install and check, run no test
#   --sqlite-only    skip the second run on PostgreSQL
# On a machine already set up, `cargo test --workspace` runs the same suite on SQLite.
set -euo pipefail
cd "$(dirname "$0")/.."

install=1 run=1 postgres=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) install=0 ;;
    --install-only) run=0 ;;
    --sqlite-only) postgres=0 ;;
    --) shift; break ;;
    *) echo "tests/run.sh: unknown option $1 (see the head of this file)" >&2; exit 2 ;;
  esac
  shift
done

say() { echo "tests/run.sh: $*" >&2; }

# A program on PATH that can run (bash's `command -v` also names a file it cannot run).
have() { local p; p="$(command -v "$1" 2>/dev/null)" && [ -x "$p" ]; }
have_postgres() {
  { have initdb && have postgres; } || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}
have_chromium() { have chromium || have chromium-browser || have google-chrome; }
have_venv() { have python3 && python3 -c 'import venv, ensurepip' 2>/dev/null; }

# What the suite needs from the system: a test of it, its Debian package, and who needs it.
needs=(
  "have cc|gcc|a C compiler: the bundled SQLite is compiled with the crate"
  "have rg|ripgrep|rg: tests/suite/web_tools.rs compares rg_search with it"
  "have fdfind|fd-find|fdfind: tests/suite/web_tools.rs compares fd_find with it"
  "have python3|python3|python3: tests/suite/injection.rs runs it in the sandbox"
  "have_venv|python3-venv|python3's venv module: the MCP time server is installed into a venv"
  "have_postgres|postgresql|PostgreSQL's server binaries (initdb, postgres) and its pg_trgm extension (Debian ships both in postgresql-NN): the PostgreSQL store's tests start a cluster of their own, and tests/suite/knowledge_shared.rs checks that the shared knowledge index uses pg_trgm"
  "have_chromium|chromium|Chromium: tests/suite/browser.rs drives it through the browser tools, tests/suite/web_page.rs and attack_web_page*.rs drive the gateway's web page in it"
  "have openssl|openssl|openssl: tests/suite/store_tls.rs makes a test CA and a server certificate with it"
  "have node|nodejs|node: the MCP test server server-everything runs on it"
  "have npm|npm|npm: tests/tools/install.sh installs server-everything with it"
)

# The packages of the needs not met, and a line for each.
missing() {
  pkgs=() lines=()
  local entry test pkg why
  for entry in "${needs[@]}"; do
    IFS='|' read -r test pkg why <<<"$entry"
    if ! eval "$test"; then
      pkgs+=("$pkg")
      lines+=("  - $why (Debian/Ubuntu package: $pkg)")
    fi
  done
}

if ! have cargo; then
  say "cargo is missing: install Rust 1.95 or newer with rustup (https://rustup.rs), then run this again"
  exit 1
fi

missing
if [ ${#pkgs[@]} -gt 0 ] && [ "$install" = 1 ]; then
  apt=()
  if [ "$(id -u)" = 0 ]; then
    apt=(env DEBIAN_FRONTEND=noninteractive apt-get)
  elif have sudo && sudo -n true 2>/dev/null; then
    apt=(sudo env DEBIAN_FRONTEND=noninteractive apt-get)
  fi
  if [ ${#apt[@]} -gt 0 ] && have apt-get; then
    say "installing ${pkgs[*]} with apt-get"
    "${apt[@]}" update -qq
    "${apt[@]}" install -y -qq "${pkgs[@]}"
    missing
  fi
fi
if [ ${#pkgs[@]} -gt 0 ]; then
  say "the test suite needs what this machine lacks:"
  printf '%s\n' "${lines[@]}" >&2
  say "install them (on Debian or Ubuntu: sudo apt-get install ${pkgs[*]}), then run this again"
  exit 1
fi

# The real MCP servers tests/suite/mcp.rs runs (pinned versions, into target/test-tools).
if [ "$install" = 1 ]; then
  tests/tools/install.sh >&2 || {
    say "installing the MCP test servers failed (tests/tools/install.sh, above): it needs the npm registry and PyPI"
    exit 1
  }
elif ! [ -x target/test-tools/npm/node_modules/.bin/mcp-server-everything ] \
  || ! [ -x target/test-tools/venv/bin/mcp-server-time ]; then
  say "the MCP test servers are not installed: run tests/tools/install.sh (it needs the npm registry and PyPI)"
  exit 1
fi

# The sandbox is Landlock: nothing to install, but the kernel must enforce it.
if [ -r /sys/kernel/security/lsm ] && ! grep -qw landlock /sys/kernel/security/lsm; then
  say "warning: this kernel does not enforce Landlock (not in /sys/kernel/security/lsm); the sandbox tests will fail, saying so"
fi

[ "$run" = 1 ] || { say "everything the suite needs is here"; exit 0; }

say "the suite on SQLite"
cargo test --workspace --locked "$@"
# The short soak on every full run: 1,000 messages over both channels with faults and one kill -9
# (tests/suite/soak.rs; the 10,000-message run stays opt-in). Its figures are printed.
if [ $# -eq 0 ]; then
  say "the short soak"
  SOAK_MESSAGES=1000 SOAK_SESSIONS=40 SOAK_KILLS=1 \
    cargo test --workspace --locked --test all soak:: -- --ignored --nocapture
fi
if [ "$postgres" = 1 ]; then
  say "the suite on PostgreSQL"
  ETHAN_TEST_STORE=postgres cargo test --workspace --locked "$@"
fi
