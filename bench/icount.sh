#!/bin/sh
# Worst-case instructions per operation, counted by callgrind: the game-frame
# trace (suite zone's, quick version) replayed on top of a heap that already
# holds 1 MiB, 16 MiB, 256 MiB and 1 GiB of live blocks, for the zone and
# glibc. Each operation is its own callgrind dump (bench/zone_icount.c), so
# the figures are exact instruction counts, independent of the machine's load.
# The counting (bench/icount.h) and the reading of the dumps
# (bench/icount_dumps.awk) are shared with the worst-case drivers
# (bench/bounds.sh, docs/realtime.md).
#
#   bench/icount.sh [BUILD_DIR] [OPS]      (defaults: build, 20000)
#   ICOUNT_ALLOCATORS="zone glibc" ICOUNT_HEAPS="1 16 256 1024" bench/icount.sh
#
# Prints, per allocator, heap size and operation kind: count, mean, median, p99,
# p99.99 and max instructions; then the worst malloc or free at each size
# against 1 MiB (target: flat within 10%) and the zone's against glibc's
# (target: below). realloc is listed apart: its worst case is the copy.
# Results also go to BUILD_DIR/bench/icount.txt. With OPS=20000 the 8 runs
# took 14 minutes on the 2-core machine at a load average of about 17 (the
# dumps dominate: about 0.5 ms each). Needs valgrind.
set -eu
build=${1:-build}
ops=${2:-20000}
allocs=${ICOUNT_ALLOCATORS:-zone glibc}
heaps=${ICOUNT_HEAPS:-1 16 256 1024}
bench=$build/bench/heapkit-bench
command -v valgrind >/dev/null 2>&1 || { echo "icount: valgrind not installed (bench/install-peers.sh installs it)"; exit 77; }
[ -x "$bench" ] || { echo "icount: $bench not built (make build)"; exit 1; }
out=$build/bench/icount.txt
tmp=$(mktemp -d /tmp/hkb-icount-XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
: >"$tmp/all"
for a in $allocs; do
    for h in $heaps; do
        rm -f "$tmp"/cg.*
        # HKB_REEXECED: the bench must not re-execute itself under valgrind
        if ! HKB_REEXECED=1 valgrind -q --tool=callgrind --instr-atstart=no --dump-line=no \
            --callgrind-out-file="$tmp/cg.%p" "$bench" --icount-child "$a" "$h" "$ops" >"$tmp/log" 2>&1; then
            echo "icount: $a at $h MiB failed:"; cat "$tmp/log"; exit 1
        fi
        # one line per operation: allocator heap kind instructions
        find "$tmp" -name 'cg.*' -exec awk -v prefix="$a $h" -f "$(dirname "$0")/icount_dumps.awk" {} + >>"$tmp/all"
        echo "icount: $a at $h MiB: $(grep -c "^$a $h " "$tmp/all") operations counted" >&2
    done
done
{
    echo "instructions per operation (callgrind), frame trace over a filled heap, first $ops operations"
    printf '%-8s %8s %-8s %8s %8s %8s %8s %8s %8s\n' allocator heap_MiB op count mean median p99 p99.99 max
    for a in $allocs; do for h in $heaps; do for k in malloc free realloc; do
        grep "^$a $h $k " "$tmp/all" | awk '{print $4}' | sort -n >"$tmp/v" || true
        n=$(wc -l <"$tmp/v")
        [ "$n" -gt 0 ] || continue
        pick() { sed -n "$(awk -v n="$n" -v p="$1" 'BEGIN { i = int(p * (n - 1)) + 1; print i }')p" "$tmp/v"; }
        mean=$(awk '{ s += $1 } END { printf "%.1f", s / NR }' "$tmp/v")
        printf '%-8s %8s %-8s %8s %8s %8s %8s %8s %8s\n' "$a" "$h" "$k" "$n" "$mean" "$(pick 0.5)" "$(pick 0.99)" "$(pick 0.9999)" "$(tail -n 1 "$tmp/v")"
    done; done; done
    echo
    echo "worst case of malloc and free (realloc apart: its copy of up to 32 KiB is O(size) in every"
    echo "allocator): max at each heap size, against the same allocator at the first size, and against glibc"
    awk -v heaps="$heaps" -v allocs="$allocs" '
        $3 != "realloc" { if ($4 > mx[$1 " " $2]) mx[$1 " " $2] = $4 }
        $3 == "realloc" { if ($4 > rx[$1 " " $2]) rx[$1 " " $2] = $4 }
        END {
            na = split(allocs, A, " "); nh = split(heaps, H, " ")
            for (i = 1; i <= na; i++) for (j = 1; j <= nh; j++) {
                m = mx[A[i] " " H[j]]; b = mx[A[i] " " H[1]]; g = mx["glibc " H[j]]
                printf "%-8s %6s MiB  malloc/free max %7d  vs %s MiB %.2fx", A[i], H[j], m, H[1], b ? m / b : 0
                if (A[i] != "glibc" && g) printf "  vs glibc %.2fx", m / g
                printf "  (realloc max %d)\n", rx[A[i] " " H[j]]
            }
        }' "$tmp/all"
} | tee "$out"
echo "written to $out"
