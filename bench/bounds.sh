#!/bin/sh
# Worst-case instructions per call of every allocator (docs/realtime.md):
# runs each driver of heapkit-bounds (bench/bounds_*.c) at each scale under
# callgrind, one dump per counted call (bench/icount.h), then hands the
# counts to bench/bounds.py, which checks them against the published bounds
# (bench/bounds.tsv) or records them.
#
#   bench/bounds.sh [BUILD_DIR] [--check] [--record] [--rebound] [--doc]
#   BOUNDS_DRIVERS="hunk zone cache pool gc glibc" BOUNDS_SCALES="1 2 3 4" BOUNDS_JOBS=2
#
#   --check    fail (exit 1) when a count exceeds its bound by more than 10%,
#              or a counted path has no bound, printing call and path
#   --record   store the worst counts in bench/bounds-measured.tsv (the rows
#              of the drivers run; the other rows are kept)
#   --rebound  also set the bounds of those rows in bench/bounds.tsv from the
#              counts (rounded up to two significant digits)
#   --doc      regenerate the table of docs/realtime.md from the two files
#
# After a change to the zone:  bench/bounds.sh build --record --rebound --doc
# with BOUNDS_DRIVERS=zone re-measures the zone and rewrites its rows only.
# The counts of every call also go to BUILD_DIR/bench/bounds-counts.tsv.
# Needs valgrind (exit 77 without it).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=build
args=""
for a in "$@"; do
    case $a in
    --*) args="$args $a" ;;
    *) build=$a ;;
    esac
done
drivers=${BOUNDS_DRIVERS:-hunk zone cache pool gc glibc}
scales=${BOUNDS_SCALES:-1 2 3 4}
jobs=${BOUNDS_JOBS:-2}
bin=$build/bench/heapkit-bounds
command -v valgrind >/dev/null 2>&1 || { echo "bounds: valgrind not installed (.ci/install-deps.sh installs it)"; exit 77; }
[ -x "$bin" ] || { echo "bounds: $bin not built (make build)"; exit 1; }
tmp=$(mktemp -d /tmp/hk-bounds-XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
start=$(date +%s)
# one job per driver and scale, the largest scales first (they take longest)
for s in $scales; do for d in $drivers; do echo "$s $d"; done; done | sort -rn >"$tmp/jobs"
run_one() {
    s=$1 d=$2 dir=$tmp/$d.$s
    mkdir -p "$dir"
    t0=$(date +%s)
    if ! valgrind -q --tool=callgrind --instr-atstart=no --dump-line=no --dump-instr=no \
        --callgrind-out-file="$dir/cg" "$bin" "$d" "$s" >"$dir/log" 2>&1; then
        echo "bounds: $d at scale $s failed:"; cat "$dir/log"; return 1
    fi
    # dumps in the order they were made: cg.1, cg.2, ...
    ls "$dir" | sed -n 's/^cg\.\([0-9][0-9]*\)$/\1/p' | sort -n | sed "s|^|$dir/cg.|" >"$dir/files"
    if [ -s "$dir/files" ]; then
        xargs awk -v prefix="$d	$s" -v OFS='	' -f "$here/icount_dumps.awk" <"$dir/files" >"$dir/counts"
    else
        : >"$dir/counts"
    fi
    rm -f "$dir"/cg.*
    echo "bounds: $d at scale $s: $(wc -l <"$dir/counts") calls counted in $(( $(date +%s) - t0 ))s" >&2
}
# at most $jobs valgrind runs at a time, a new one as soon as one ends
running=0
pids=""
while read -r s d; do
    if [ "$running" -ge "$jobs" ]; then
        # wait for any one to end (POSIX sh has no wait -n: poll)
        while :; do
            still=""
            for p in $pids; do
                if kill -0 "$p" 2>/dev/null; then still="$still $p"; else wait "$p" || echo fail >>"$tmp/failed"; fi
            done
            pids=$still
            running=$(echo $pids | wc -w)
            [ "$running" -lt "$jobs" ] && break
            sleep 0.2
        done
    fi
    run_one "$s" "$d" &
    pids="$pids $!"
    running=$((running + 1))
done <"$tmp/jobs"
for p in $pids; do wait "$p" || echo fail >>"$tmp/failed"; done
[ ! -e "$tmp/failed" ] || { echo "bounds: a driver failed"; exit 1; }
cat "$tmp"/*/counts >"$tmp/all"
mkdir -p "$build/bench"
cp "$tmp/all" "$build/bench/bounds-counts.tsv"
echo "bounds: $(wc -l <"$tmp/all") calls counted in $(( $(date +%s) - start ))s (drivers: $drivers; scales: $scales)"
python3 "$here/bounds.py" --counts "$tmp/all" --drivers "$drivers" --scales "$scales" $args
