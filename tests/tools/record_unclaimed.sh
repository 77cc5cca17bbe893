#!/bin/sh
# tests/tools/record_unclaimed.sh - the record preload used by hand, with
# HEAPKIT_RECORD_OUT and no HEAPKIT_RECORD_PID: a shell that records,
# runs programs that record too (each after fork and exec), and goes on
# allocating. The shell's trace must stay whole: the programs it ran write
# OUT.<pid>, never truncate OUT under the shell (regression: they did, and
# the shell died of SIGBUS or left a corrupt trace).
#   record_unclaimed.sh HEAPKIT LIBRECORD PROG DIR
set -u
tool=$1 lib=$2 prog=$3 dir=$4
rm -rf "$dir" && mkdir -p "$dir" || exit 1
out=$dir/shell.hkt
HEAPKIT_RECORD_OUT=$out LD_PRELOAD=$lib bash -c '
  s=; for i in $(seq 3000); do s="$s$i"; done
  for k in 1 2 3 4; do x=$("$0" exit); done
  t=; for i in $(seq 3000); do t="$t$i"; done
  echo "shell done ${#s} ${#t}"' "$prog" || { echo "FAIL: the recorded shell exited with $?"; exit 1; }
"$tool" replay "$out" --allocators glibc > "$dir/replay.txt" 2>&1 || { echo "FAIL: the shell's trace:"; cat "$dir/replay.txt"; exit 1; }
n=$(ls "$dir" | grep -c '^shell\.hkt\.[0-9]*$')
[ "$n" -ge 4 ] || { echo "FAIL: $n traces of the programs the shell ran, expected at least 4"; exit 1; }
echo "record unclaimed ok ($n other traces)"
