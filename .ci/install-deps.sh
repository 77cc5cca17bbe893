#!/usr/bin/env bash
# Optional packages the test suite uses when present (Debian). Best effort:
# tests that need a missing program say so and are skipped by CTest.
set -u
[ "$(id -u)" = 0 ] || exit 0
# chromium: the report/heap-map browser test (tests/tools/browser_check.sh)
# libdw1: in-process symbolization of guard reports (src/os_posix_symbols.c loads libdw.so.1 at the
#   first report; no development header needed; without it one addr2line per module and run)
# git: a real program of the guard tests (tests/guard_programs.sh)
# wine64, gcc-mingw-w64-x86-64, g++-mingw-w64-x86-64: make check-windows (cross-build, tests
# under Wine) and the header check test_windows_headers (needed by .ci/run)
# electric-fence, duma, valgrind: the peers of the guard bench suite (bench/suite_guard.c)
# valgrind, heaptrack: the tools tests (tests/track_tools.sh: memcheck and heaptrack see heapkit blocks)
# python3 perl sqlite3 lua5.4 gcc cmake: the real programs run under
# libheapkit-malloc.so (tests/preload_programs.sh, tests/zone_preload.sh)
pkgs="valgrind heaptrack lua5.4 sqlite3 python3 perl gcc cmake electric-fence duma binutils chromium libdw1 git
  wine64 gcc-mingw-w64-x86-64 g++-mingw-w64-x86-64"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
[ -z "$missing" ] && exit 0
export DEBIAN_FRONTEND=noninteractive
(apt-get update -qq && apt-get install -y -qq $missing) || echo "install-deps: could not install:$missing" >&2
exit 0
