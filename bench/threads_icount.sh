#!/bin/sh
# Instructions per malloc/free pair in suite threads' workloads at 1 thread,
# counted by callgrind: the machine's load does not change them, so they
# compare allocators when the timings are noise. Each (allocator, workload)
# runs as the suite's own child process (--threads-child) twice, with N and
# 2N units of work; the difference over the pairs of N units removes start-up,
# peer loading and the final frees. The figure includes the workload's own
# loop (random numbers, the byte written at each end of a block, the call
# through a pointer), the same for every allocator.
#
#   bench/threads_icount.sh [BUILD_DIR]        (default: build)
#   THREADS_ICOUNT_WORKLOADS="larson xmalloc" THREADS_ICOUNT_ALLOCATORS="mimalloc zone+threads" ...
#
# Workloads: churn server prodcons larson xmalloc glibcthread (jobframe is
# not a pair loop). Allocators: glibc mimalloc jemalloc tcmalloc, the zone
# row (zone+threads or zone+mutex, as the suite names it) and
# heapkit-malloc.so (run under LD_PRELOAD). A peer that is not installed is
# reported as skipped. The default (3 workloads, 6 allocators) took 44 s on
# the 2-core machine at a load average of about 10. Needs valgrind.
set -eu
build=${1:-build}
bench=$build/bench/heapkit-bench
shim=$build/libheapkit-malloc.so
command -v valgrind >/dev/null 2>&1 || { echo "threads_icount: valgrind not installed (bench/install-peers.sh installs it)"; exit 77; }
[ -x "$bench" ] || { echo "threads_icount: $bench not built (make build)"; exit 1; }
zone=zone+threads
grep -q HKB_HAVE_ZONE_THREADS=1 "$build/bench/CMakeFiles/heapkit-bench.dir/flags.make" 2>/dev/null || zone=zone+mutex
workloads=${THREADS_ICOUNT_WORKLOADS:-larson xmalloc glibcthread}
allocs=${THREADS_ICOUNT_ALLOCATORS:-glibc mimalloc jemalloc tcmalloc $zone heapkit-malloc.so}
tmp=$(mktemp -d /tmp/hkb-ticount-XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
# the bench must not re-execute itself under valgrind; it would to raise this tunable
export HKB_REEXECED=1 GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536

# count NAME WL ITERS: the instructions of one child run (empty when it failed)
count() {
    pre=
    [ "$1" = heapkit-malloc.so ] && pre=$shim
    if LD_PRELOAD=$pre valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" \
        "$bench" --threads-child 3 "$1" "$2" 1 "$3" 1 1 3>/dev/null 2>"$tmp/err"; then
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/err"
    fi
}
skipped=

printf '%-12s' workload
for a in $allocs; do printf ' %17s' "$a"; done
printf '\n'
for w in $workloads; do
    # index in the suite's enum; N; malloc/free pairs in N units of work
    case $w in
    churn) wl=0 n=200000 pairs=200000 ;;
    server) wl=1 n=200000 pairs=200000 ;;
    prodcons) wl=2 n=2000 pairs=128000 ;;
    larson) wl=4 n=200000 pairs=200000 ;;
    xmalloc) wl=5 n=2000 pairs=64000 ;; # 1 thread: n/2 batches of 64
    glibcthread) wl=6 n=200000 pairs=200000 ;;
    *) echo "threads_icount: unknown workload $w"; exit 1 ;;
    esac
    printf '%-12s' "$w"
    for a in $allocs; do
        i1=$(count "$a" $wl $n)
        i2=$(count "$a" $wl $((2 * n)))
        if [ -z "$i1" ] || [ -z "$i2" ]; then
            printf ' %17s' skipped
            skipped="$skipped $a/$w"
        else
            printf ' %17s' "$(awk -v a="$i1" -v b="$i2" -v p=$pairs 'BEGIN { printf "%.1f", (b - a) / p }')"
        fi
    done
    printf '\n'
done
echo "(instructions per malloc/free pair at 1 thread, the workload's loop included)"
[ -z "$skipped" ] || echo "skipped (not installed, or the child failed):$skipped"
