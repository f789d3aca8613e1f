#!/usr/bin/env bash
# The C install, as a user does it: `make install` under a scratch prefix, examples/c/hello.c built
# with pkg-config's flags alone and run against the bundled demo server from the installed
# library; the soname checked with readelf; `make uninstall` leaves nothing behind. The first run
# builds the libraries in target/install (a few minutes), which is why tests/run.sh leaves it out.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
make install PREFIX="$prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
echo "pkg-config --cflags --libs mcplug: $(pkg-config --cflags --libs mcplug)"
cc -std=c11 -Wall -Wextra -Werror examples/c/hello.c $(pkg-config --cflags --libs mcplug) -o "$prefix/hello"
readelf -d "$prefix/lib/libmcplug.so.0" | grep -F 'Library soname: [libmcplug.so.0]'
readelf -d "$prefix/hello" | grep -F 'Shared library: [libmcplug.so.0]'
LD_LIBRARY_PATH="$prefix/lib" ldd "$prefix/hello" | grep -F "$prefix/lib/libmcplug.so.0"
if readelf -S "$prefix/lib/libmcplug.so.0" | grep -q '\.debug_info'; then
  echo "the installed library still carries its debug info" >&2; exit 1
fi
cargo build --release --example demo
out=$(LD_LIBRARY_PATH="$prefix/lib" "$prefix/hello" target/release/examples/demo --serve)
echo "$out"
grep -q '^echo: ok' <<<"$out"
make uninstall PREFIX="$prefix"
left=$(find "$prefix" -mindepth 1 ! -name hello ! -type d)
if [ -n "$left" ]; then
  echo "make uninstall left: $left" >&2; exit 1
fi
echo "C install: ok"
