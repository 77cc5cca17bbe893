#!/bin/sh
# Instructions per malloc/free pair of bench/pair_loop.c (issue 35's pair
# loop: 1000 live blocks of 16..515 bytes, each step a free and a malloc),
# counted by callgrind with each allocator preloaded as the process's
# malloc. Each allocator runs twice, with N and 2N pairs; the difference
# over N removes start-up and the final frees, so the figure is the loop's
# instructions per pair, the loop's own (a random number, a byte written,
# about 20 instructions) included, the same for every allocator. The
# counts do not depend on the machine's load.
#
#   bench/pair_icount.sh [BUILD_DIR]        (default: build)
#   PAIR_ICOUNT_ALLOCATORS="glibc mimalloc heapkit-malloc.so" bench/pair_icount.sh
#
# Allocators: glibc, mimalloc, jemalloc, tcmalloc (bench/install-peers.sh
# installs them; one not installed is reported as skipped), heapkit-malloc.so
# and heapkit-malloc-unchecked.so: the measurement-only build without the
# owner's checks, from a build configured with
# CMAKE_FLAGS=-DCMAKE_C_FLAGS=-DHK_ZONE_UNCHECKED, named by
# PAIR_ICOUNT_UNCHECKED=that/build/libheapkit-malloc.so. Needs valgrind.
set -eu
build=${1:-build}
prog=$build/bench/heapkit-pair-loop
command -v valgrind >/dev/null 2>&1 || { echo "pair_icount: valgrind not installed"; exit 77; }
[ -x "$prog" ] || { echo "pair_icount: $prog not built (make build)"; exit 1; }
allocs=${PAIR_ICOUNT_ALLOCATORS:-glibc mimalloc jemalloc tcmalloc heapkit-malloc.so${PAIR_ICOUNT_UNCHECKED:+ heapkit-malloc-unchecked.so}}
n=${PAIR_ICOUNT_PAIRS:-200000}
tmp=$(mktemp -d /tmp/hkb-pair-XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
lib() { # the first of the names ldconfig knows
    for l in "$@"; do
        p=$(ldconfig -p 2>/dev/null | awk -v l="$l" '$1 == l { print $NF; exit }')
        [ -n "$p" ] && { echo "$p"; return; }
    done
}
count() { # PRELOAD PAIRS: instructions of the whole run (empty when it failed)
    if LD_PRELOAD=$1 valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$prog" "$2" >/dev/null 2>"$tmp/err"; then
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/err"
    fi
}
percall() { # FUNCTION CALLS: inclusive instructions of FUNCTION per call in the last run
    callgrind_annotate --inclusive=yes "$tmp/cg" 2>/dev/null |
        awk -v f="$1" -v c="$2" '{ x = $1; gsub(",", "", x) } $0 ~ ":" f " \\[" { printf "%.1f", x / c; exit }'
}
base=
for a in $allocs; do
    case $a in
    glibc) pre= ;;
    mimalloc) pre=$(lib libmimalloc.so.2 libmimalloc.so) ;;
    jemalloc) pre=$(lib libjemalloc.so.2 libjemalloc.so) ;;
    tcmalloc) pre=$(lib libtcmalloc_minimal.so.4 libtcmalloc.so.4) ;;
    heapkit-malloc.so) pre=$build/libheapkit-malloc.so ;;
    heapkit-malloc-unchecked.so) pre=${PAIR_ICOUNT_UNCHECKED:-} ;;
    *) echo "pair_icount: unknown allocator $a"; exit 1 ;;
    esac
    if [ "$a" != glibc ] && { [ -z "$pre" ] || [ ! -e "$pre" ]; }; then
        printf '%-28s skipped (not installed or not built)\n' "$a"
        continue
    fi
    i1=$(count "$pre" "$n")
    i2=$(count "$pre" $((2 * n)))
    if [ -z "$i1" ] || [ -z "$i2" ]; then
        printf '%-28s skipped (the run failed: %s)\n' "$a" "$(head -c 200 "$tmp/err")"
        continue
    fi
    per=$(awk -v a="$i1" -v b="$i2" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / n }')
    [ "$a" = mimalloc ] && base=$per
    calls=$((2 * n + 1000))
    printf '%-28s %8s instructions per pair   malloc %6s  free %6s per call\n' "$a" "$per" \
        "$(percall malloc $calls)" "$(percall free $calls)"
    echo "$a $per" >>"$tmp/rows"
done
if [ -n "$base" ] && [ -s "$tmp/rows" ]; then
    echo "against mimalloc:"
    awk -v b="$base" '{ printf "  %-26s %.2fx\n", $1, $2 / b }' "$tmp/rows"
fi
