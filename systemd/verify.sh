#!/usr/bin/env bash
# Checks both unit files with `systemd-analyze verify`, the ExecStart binary substituted by a
# built one (default target/debug/ethan). Fails on any message, not only on errors: verify
# exits 0 after "Failed to parse …, ignoring" lines, which are mistakes all the same.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-target/debug/ethan}")"
[ -x "$bin" ] || { echo "no binary at $bin (build first, or pass its path)"; exit 1; }
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
sed "s#/usr/bin/ethan#$bin#" systemd/ethan.service >"$dir/ethan.service"
sed "s#%h/.cargo/bin/ethan#$bin#" systemd/ethan-user.service >"$dir/ethan-user.service"
status=0
for unit in ethan.service ethan-user.service; do
  out="$(systemd-analyze verify "$dir/$unit" 2>&1)" || status=1
  # The dedicated user exists only where the service is installed.
  out="$(printf '%s\n' "$out" | grep -v "User=ethan\|user ethan\|^$" || true)"
  if [ -n "$out" ]; then
    printf '%s: %s\n' "$unit" "$out"
    status=1
  fi
done
[ "$status" = 0 ] && echo "systemd units: ok"
exit "$status"
