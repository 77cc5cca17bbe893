#!/bin/sh
# tests/track_tools.sh TOOL PROG ALLOCATOR CASE [N] - runs one of
# tests/track_prog.c's programs under a tool and checks what the tool saw
# (src/track.h). Exit 0: as expected; 77: the tool is not installed (CTest
# skips, saying why); anything else: a failure, with the tool's log.
#   valgrind   clean: no error; uaf / bulk / overflow / uninit: memcheck's error of
#              that kind naming the heapkit block; leak: a leak record whose
#              allocation stack holds track_leak_block
#   asan       (an ASan build) clean: exit 0; uaf / bulk / overflow: ASan's report
#   heaptrack  count N: heaptrack_print counts at least N allocations
set -u
tool=$1 prog=$2 alloc=$3 case=$4 n=${5:-0}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
log=$dir/log
fail() {
  echo "FAIL ($tool $alloc $case): $*"
  cat "$log" 2>/dev/null
  exit 1
}
case $tool in
valgrind)
  command -v valgrind >/dev/null 2>&1 || { echo "SKIP: valgrind is not installed (.ci/install-deps.sh installs it)"; exit 77; }
  valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=all \
    --errors-for-leak-kinds=definite,possible --log-file="$log" "$prog" "$alloc" "$case" $n
  rc=$?
  case $case in
  clean) [ $rc = 0 ] || fail "exit $rc, expected a clean run" ;;
  uaf | bulk)
    [ $rc = 99 ] || fail "exit $rc: memcheck saw no error"
    grep -q "Invalid read" "$log" || fail "no 'Invalid read'"
    grep -q "Block was alloc'd at" "$log" || fail "no allocation stack of the block" ;;
  overflow)
    # the damaged header may crash the allocator afterwards, as in a real program
    [ $rc != 0 ] || fail "exit 0: memcheck saw no error"
    grep -q "Invalid write" "$log" || fail "no 'Invalid write'" ;;
  uninit)
    [ $rc = 99 ] || fail "exit $rc: memcheck saw no error"
    grep -q "uninitialised value" "$log" || fail "no 'uninitialised value'" ;;
  leak)
    grep -q "track_leak_block" "$log" || fail "no leak record with the block's allocation stack" ;;
  *) fail "unknown case" ;;
  esac ;;
asan)
  "$prog" "$alloc" "$case" >"$log" 2>&1
  rc=$?
  case $case in
  clean) [ $rc = 0 ] || fail "exit $rc, expected a clean run" ;;
  uaf | bulk | overflow)
    [ $rc != 0 ] || fail "exit 0: ASan saw nothing"
    grep -q "ERROR: AddressSanitizer" "$log" || fail "no AddressSanitizer report" ;;
  *) fail "unknown case" ;;
  esac ;;
heaptrack)
  command -v heaptrack >/dev/null 2>&1 || { echo "SKIP: heaptrack is not installed (.ci/install-deps.sh installs it)"; exit 77; }
  command -v heaptrack_print >/dev/null 2>&1 || { echo "SKIP: heaptrack_print is not installed"; exit 77; }
  heaptrack -o "$dir/ht" "$prog" "$alloc" "$case" $n >"$log" 2>&1 || fail "heaptrack failed"
  data=$(ls "$dir"/ht.* 2>/dev/null | head -n 1)
  [ -n "$data" ] || fail "no heaptrack data file"
  heaptrack_print "$data" >"$dir/print" 2>>"$log" || fail "heaptrack_print failed"
  calls=$(sed -n 's/^calls to allocation functions: \([0-9]*\).*/\1/p' "$dir/print")
  [ -n "$calls" ] || { cat "$dir/print" >>"$log"; fail "no allocation count in heaptrack_print's output"; }
  [ "$calls" -ge "$n" ] || { cat "$dir/print" >>"$log"; fail "heaptrack counted $calls allocations, the program made at least $n"; }
  echo "heaptrack counted $calls allocations ($n made through $alloc)" ;;
*) fail "unknown tool" ;;
esac
exit 0
