#!/bin/sh
# Runs tests/malloc_compat_prog.c on this machine's C library and under a
# preload library; the two outputs must be the same line for line (the
# preload behaves like the glibc it replaces at every edge the program
# probes), and the preload must print nothing on stderr (no misuse report
# for calls glibc accepts).
#   malloc_compat.sh PROG PRELOAD_LIB WORKDIR
set -u
prog=$1
lib=$2
work=$3
mkdir -p "$work"
"$prog" >"$work/glibc.txt" 2>"$work/glibc.err" || { echo "FAIL: the program failed on glibc"; cat "$work/glibc.err"; exit 1; }
LD_PRELOAD="$lib" "$prog" >"$work/preload.txt" 2>"$work/preload.err" || {
    echo "FAIL: the program failed under the preload"; cat "$work/preload.txt" "$work/preload.err"; exit 1; }
if ! cmp -s "$work/glibc.txt" "$work/preload.txt"; then
    echo "FAIL: the preload differs from glibc (< glibc, > preload):"
    diff "$work/glibc.txt" "$work/preload.txt"
    exit 1
fi
if [ -s "$work/preload.err" ]; then
    echo "FAIL: the preload wrote to stderr:"; cat "$work/preload.err"; exit 1
fi
grep -c . "$work/preload.txt" | sed 's/$/ edge cases behave as on glibc/'
