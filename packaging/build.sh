#!/usr/bin/env bash
# Builds the two release artefacts into dist/, with their SHA-256 sums in dist/SHA256SUMS:
#   ethan_VERSION-1_amd64.deb                     the Debian package (cargo deb; Cargo.toml's
#                                                 [package.metadata.deb]), glibc, default features;
#                                                 it needs glibc 2.36 when the build machine's
#                                                 glibc let build.rs pack the relocations
#   ethan-VERSION-x86_64-unknown-linux-musl.tar.gz  the static binary (musl, SQLite bundled,
#                                                 rustls, default features) with the licence, the
#                                                 README, the example config and the system unit
# Both use the release profile (opt-level "z", LTO, one codegen unit): some 16 minutes each on two
# cores. Each build's wall and CPU time and each artefact's size are printed at the end.
#
# Usage: packaging/build.sh [--ci] [--out DIR]
#   --out DIR   where the artefacts go (default dist/; the ones of an earlier run are replaced)
#   --ci        the artefacts CI installs and runs (tests/suite/packages.rs): one static binary
#               built with the profile `ci-package` (no optimisation, no LTO: minutes instead of
#               half an hour), packed both as the tarball and into the .deb. Same packaging and
#               static link; the release .deb holds the glibc binary instead.
#
# Needs: cargo-deb (`cargo install cargo-deb --locked`), the musl target
# (`rustup target add x86_64-unknown-linux-musl`) and musl-gcc (Debian: musl-tools) for the C in
# the bundled SQLite and in ring; dpkg-dev for the package's library dependencies (not with
# --ci: a static binary has none). Each one missing is named, with how to get it.
set -euo pipefail
cd "$(dirname "$0")/.."

ci=0 out=dist
while [ $# -gt 0 ]; do
  case "$1" in
    --ci) ci=1 ;;
    --out) out="${2:?--out needs a folder}"; shift ;;
    *) echo "packaging/build.sh: unknown option $1 (see the head of this file)" >&2; exit 2 ;;
  esac
  shift
done

say() { echo "packaging/build.sh: $*" >&2; }
musl=x86_64-unknown-linux-musl

missing=()
cargo deb --version >/dev/null 2>&1 || missing+=("cargo-deb: cargo install cargo-deb --locked")
rustup target list --installed 2>/dev/null | grep -qx "$musl" \
  || missing+=("the musl target: rustup target add $musl")
command -v musl-gcc >/dev/null || missing+=("musl-gcc: apt-get install musl-tools")
[ "$ci" = 1 ] || command -v dpkg-shlibdeps >/dev/null \
  || missing+=("dpkg-shlibdeps: apt-get install dpkg-dev")
if [ ${#missing[@]} -gt 0 ]; then
  say "cannot build the packages; missing:"
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)"
target_dir="${CARGO_TARGET_DIR:-target}"
name="ethan-$version-$musl"
mkdir -p "$out"
rm -f "$out"/ethan_*.deb "$out"/ethan-*.tar.gz "$out/SHA256SUMS"
timings=()

# Runs "$@", adding "LABEL: wall, CPU" to the timings.
timed() {
  local label="$1" start end cpu0 cpu1
  shift
  start="$(date +%s)"
  cpu0="$(awk '{print $14+$15+$16+$17}' /proc/$$/stat)"
  "$@"
  end="$(date +%s)"
  cpu1="$(awk '{print $14+$15+$16+$17}' /proc/$$/stat)"
  timings+=("$label: $((end - start)) s wall, $(((cpu1 - cpu0) / $(getconf CLK_TCK))) s CPU")
}

# The static binary. The C code (SQLite, ring) is compiled by musl-gcc against musl's headers:
# the host's gcc would compile it against glibc's, whose symbols musl does not have.
profile=release
[ "$ci" = 1 ] && profile=ci-package
export CC_x86_64_unknown_linux_musl=musl-gcc
timed "static ($profile, musl)" cargo build --locked --profile "$profile" --target "$musl" --bin ethan

# The Debian package: in CI the static binary just built, otherwise a glibc release build.
if [ "$ci" = 1 ]; then
  timed "deb (the static binary)" \
    cargo deb --locked --no-build --profile "$profile" --target "$musl" --fast --output "$out/"
else
  # A binary with packed relative relocations (build.rs) needs glibc 2.36: the package's variant
  # `packed-relocs` depends on it (Cargo.toml).
  timed "glibc (release)" cargo build --locked --release --bin ethan
  variant=()
  grep -q GLIBC_ABI_DT_RELR "$target_dir/release/ethan" && variant=(--variant packed-relocs)
  timed "deb (release, glibc)" cargo deb --locked --no-build "${variant[@]}" --output "$out/"
fi

bin="$target_dir/$musl/$profile/ethan"
# glibc's ldd says "not a dynamic executable" (or "statically linked" for a static PIE).
if ! ldd "$bin" 2>&1 | grep -Eq 'not a dynamic executable|statically linked'; then
  say "$bin is not static:"
  ldd "$bin" >&2
  exit 1
fi
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name/systemd"
install -m 0755 "$bin" "$stage/$name/ethan"
install -m 0644 LICENSE README.md config.example.yaml "$stage/$name/"
install -m 0644 systemd/ethan.service "$stage/$name/systemd/"
tar -C "$stage" --owner=0 --group=0 -czf "$out/$name.tar.gz" "$name"

(cd "$out" && sha256sum -- *.deb *.tar.gz >SHA256SUMS)

mib() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
say "built into $out/:"
for f in "$out"/*.deb "$out"/*.tar.gz; do printf '  %-52s %s\n' "$(basename "$f")" "$(mib "$f")" >&2; done
printf '  %-52s %s\n' "the static binary, unpacked" "$(mib "$bin")" >&2
if [ "$ci" = 0 ]; then
  printf '  %-52s %s\n' "the glibc binary, unpacked" "$(mib "$target_dir/release/ethan")" >&2
fi
for t in "${timings[@]}"; do say "$t"; done
