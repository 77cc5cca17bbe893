#!/bin/sh
# tests/tools/record_roundtrip.sh HEAPKIT PROG CHECK WORKDIR MODE
# Records PROG (tests/tools/record_prog.c) ending by MODE, then checks the
# trace with CHECK (tests/tools/roundtrip_check.c).
set -u
tool=$1 prog=$2 check=$3 dir=$4 mode=$5
rm -rf "$dir" && mkdir -p "$dir" || exit 1
trace=$dir/prog.hkt
"$tool" record -o "$trace" -- "$prog" "$mode"
rc=$?
case $mode in
  kill) [ $rc -eq 137 ] || { echo "FAIL: exit status $rc, expected 137 (SIGKILL)"; exit 1; } ;;
  *) [ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; } ;;
esac
"$check" calls "$trace" "$mode" || exit 1
case $mode in
  fork) "$check" child "$trace" || exit 1 ;;
  exit) "$check" badinput "$trace" || exit 1 ;;
esac
exit 0
