#!/usr/bin/env bash
# Build the Rust crates sandbox programs may `use` (HumanEval-X's declarations: rand, regex, md5) from Debian's crate
# sources (librust-*-dev, under /usr/share/cargo/registry), offline, with the rustc on PATH: the sandbox links them
# read-only (sandbox/language_table.py: RUST_CRATES). rlibs only work with the rustc that built them, so the build
# is redone when `rustc --version` changes. Usage: bash scripts/rust_crates.sh [target dir]
set -euo pipefail
crates=${1:-/usr/local/share/reward-sandbox/rust-crates}
registry=/usr/share/cargo/registry
command -v cargo >/dev/null 2>&1 && command -v rustc >/dev/null 2>&1 || { echo "rust_crates: no cargo/rustc" >&2; exit 0; }
[ -d "$registry/rand-0.8.5" ] && [ -d "$registry/regex-1.7.1" ] && [ -d "$registry/md5-0.7.0" ] \
  || { echo "rust_crates: Debian's librust-{rand,regex,md5}-dev are not installed" >&2; exit 0; }
[ "$(cat "$crates/rustc-version" 2>/dev/null)" = "$(rustc --version)" ] && exit 0

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
mkdir -p "$build/src" "$build/.cargo"
: > "$build/src/lib.rs"
printf '[package]\nname = "sandbox-crates"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\n%s\n' \
  'rand = "=0.8.5"
regex = "=1.7.1"
md5 = "=0.7.0"' > "$build/Cargo.toml"
printf '[source.crates-io]\nreplace-with = "debian"\n[source.debian]\ndirectory = "%s"\n' "$registry" \
  > "$build/.cargo/config.toml"
(cd "$build" && CARGO_HOME="$build/cargo-home" cargo build --release --offline -q)
rm -rf "$crates"
mkdir -p "$crates/deps"
cp "$build"/target/release/deps/lib*.rlib "$crates/deps/"
rm -f "$crates"/deps/libsandbox_crates-*.rlib
# the crates a program names get stable paths for --extern; their dependencies are found in deps/ by rustc
for crate in rand regex md5; do cp "$crates"/deps/lib"$crate"-*.rlib "$crates/lib$crate.rlib"; done
rustc --version > "$crates/rustc-version"
chmod -R a+rX "$crates"
