#!/bin/sh
# The out-of-memory sweep of a malloc preload: runs tests/malloc_oom_prog.c
# under LD_PRELOAD with HEAPKIT_FAIL_AFTER=N for N = 1..MAX, once and
# persistently (HEAPKIT_FAIL_PERSIST=1). Every run must end with "oom prog
# ok" (NULL always with errno ENOMEM, contents kept, a retry succeeding
# once memory is back, never a crash) and write nothing on stderr; over the
# sweep some calls must have failed.
#   malloc_oom.sh PROG PRELOAD_LIB [MAX]
set -u
prog=$1
lib=$2
max=${3:-40}
total=0
for persist in 0 1; do
    mode=once
    [ "$persist" = 1 ] && mode=persistent
    n=1
    while [ "$n" -le "$max" ]; do
        out=$(HEAPKIT_FAIL_AFTER=$n HEAPKIT_FAIL_PERSIST=$persist LD_PRELOAD="$lib" "$prog" $mode 2>/tmp/malloc_oom.$$)
        rc=$?
        if [ $rc -ne 0 ] || [ -s /tmp/malloc_oom.$$ ]; then
            echo "FAIL: N=$n $mode: exit $rc"; echo "$out"; cat /tmp/malloc_oom.$$; rm -f /tmp/malloc_oom.$$; exit 1
        fi
        f=$(echo "$out" | sed -n 's/^oom prog ok: \([0-9]*\) failed calls$/\1/p')
        [ -n "$f" ] || { echo "FAIL: N=$n $mode: $out"; rm -f /tmp/malloc_oom.$$; exit 1; }
        total=$((total + f))
        n=$((n + 1))
    done
done
rm -f /tmp/malloc_oom.$$
[ "$total" -gt 0 ] || { echo "FAIL: no call failed over the sweep: nothing was injected"; exit 1; }
echo "malloc oom sweep ok: $total calls failed cleanly over $((2 * max)) runs"
