#!/usr/bin/env bash
# Installs the real MCP servers the integration tests (tests/suite/mcp.rs) run by path:
#   @modelcontextprotocol/server-everything (npm, into an npm prefix) and
#   mcp-server-time (PyPI, into a venv).
# Usage: tests/tools/install.sh [DIR]   (DIR defaults to <repo>/target/test-tools)
# Idempotent: versions already present are left alone. Needs node + npm (Node 20 works) and
# python3 with the venv module; the registries are reached through npm and pip only.
set -euo pipefail

EVERYTHING_VERSION="2026.8.31"
TIME_VERSION="2026.10.19"

repo="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:-$repo/target/test-tools}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

fail() { echo "tests/tools/install.sh: $*" >&2; exit 1; }

# --- server-everything (npm) ---
command -v node >/dev/null || fail "node is required for @modelcontextprotocol/server-everything"
command -v npm >/dev/null || fail "npm is required for @modelcontextprotocol/server-everything"
npm_prefix="$dir/npm"
everything_bin="$npm_prefix/node_modules/.bin/mcp-server-everything"
everything_pkg="$npm_prefix/node_modules/@modelcontextprotocol/server-everything/package.json"
installed_version() {
  [ -f "$everything_pkg" ] || return 0
  node -e 'process.stdout.write(require(process.argv[1]).version)' "$everything_pkg" 2>/dev/null || true
}
if [ -x "$everything_bin" ] && [ "$(installed_version)" = "$EVERYTHING_VERSION" ]; then
  echo "server-everything $EVERYTHING_VERSION already installed"
else
  echo "installing @modelcontextprotocol/server-everything@$EVERYTHING_VERSION into $npm_prefix"
  mkdir -p "$npm_prefix"
  npm install --prefix "$npm_prefix" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" \
    || fail "npm install of @modelcontextprotocol/server-everything@$EVERYTHING_VERSION failed"
  [ "$(installed_version)" = "$EVERYTHING_VERSION" ] && [ -x "$everything_bin" ] \
    || fail "server-everything $EVERYTHING_VERSION is not at $everything_bin after npm install"
fi

# --- mcp-server-time (PyPI) ---
command -v python3 >/dev/null || fail "python3 is required for mcp-server-time"
venv="$dir/venv"
time_bin="$venv/bin/mcp-server-time"
time_version() {
  [ -x "$venv/bin/python" ] || return 0
  "$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp-server-time"), end="")' \
    2>/dev/null || true
}
if [ -x "$time_bin" ] && [ "$(time_version)" = "$TIME_VERSION" ]; then
  echo "mcp-server-time $TIME_VERSION already installed"
else
  echo "installing mcp-server-time==$TIME_VERSION into $venv"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv" || fail "python3 -m venv $venv failed"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "mcp-server-time==$TIME_VERSION" || fail "pip install mcp-server-time==$TIME_VERSION failed"
  [ "$(time_version)" = "$TIME_VERSION" ] && [ -x "$time_bin" ] \
    || fail "mcp-server-time $TIME_VERSION is not at $time_bin after pip install"
fi

echo "MCP test servers in $dir:"
echo "  everything (stdio, or 'streamableHttp' with PORT=<port>): $everything_bin"
echo "  time (stdio): $time_bin"
echo "tests/suite/mcp.rs finds them there (or set ETHAN_TEST_TOOLS=$dir)"
