#!/usr/bin/env bash
# Builds agents-control as a static Linux binary (musl) for deploy/Containerfile and copies it to
# deploy/agents-control, the image's build context:
#   scripts/build-linux-control.sh x86_64|aarch64
# Needs the Rust target <arch>-unknown-linux-musl and a C compiler for it (the TLS stack compiles
# some C): musl-gcc when building for this machine's own architecture (Debian/Ubuntu: musl-tools),
# otherwise <arch>-linux-musl-gcc (the musl.cc cross toolchains). It stops with the command that
# installs whichever is missing.
set -euo pipefail

usage() { echo "usage: scripts/build-linux-control.sh x86_64|aarch64" >&2; }

[ $# -eq 1 ] || { usage; exit 2; }
case "$1" in
  x86_64 | aarch64) arch="$1" ;;
  -h | --help) usage; exit 0 ;;
  *)
    echo "build-linux-control: unknown architecture '$1': give x86_64 or aarch64" >&2
    exit 2
    ;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
target="$arch-unknown-linux-musl"
fail() { echo "build-linux-control: $*" >&2; exit 1; }

command -v cargo >/dev/null || fail "cargo is not installed: install Rust from https://rustup.rs"

# The target's standard library: rustup knows which targets are installed; any other toolchain
# (a distribution's or Nix's) ships its libraries under the sysroot.
if command -v rustup >/dev/null; then
  rustup target list --installed | grep -qx "$target" ||
    fail "the Rust target $target is not installed: run \`rustup target add $target\`"
else
  [ -d "$(rustc --print sysroot)/lib/rustlib/$target" ] ||
    fail "the Rust target $target is not installed in this toolchain ($(rustc --print sysroot)): install one that has it, e.g. with rustup: \`rustup target add $target\`"
fi

# A C compiler for the target, also used as the linker.
if [ "$(uname -m)" = "$arch" ] && command -v musl-gcc >/dev/null; then
  cc=musl-gcc
elif command -v "$arch-linux-musl-gcc" >/dev/null; then
  cc="$arch-linux-musl-gcc"
elif [ "$(uname -m)" = "$arch" ]; then
  fail "no C compiler for $target: install musl-gcc (Debian/Ubuntu: \`apt-get install musl-tools\`) or put $arch-linux-musl-gcc on PATH"
else
  fail "no C compiler for $target: put $arch-linux-musl-gcc on PATH (a cross toolchain from https://musl.cc, e.g. $arch-linux-musl-cross)"
fi

target_env=$(echo "$target" | tr 'a-z-' 'A-Z_')
export "CC_${target//-/_}=$cc"
export "CARGO_TARGET_${target_env}_LINKER=$cc"

cd "$root"
echo "build-linux-control: building agents-control for $target with $cc" >&2
cargo build --release --locked -p agents-control --bin agents-control --target "$target"
install -m 0755 "target/$target/release/agents-control" deploy/agents-control
echo "build-linux-control: wrote deploy/agents-control ($target); next: docker build -f deploy/Containerfile -t agents-control deploy" >&2
