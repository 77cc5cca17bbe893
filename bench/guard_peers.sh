#!/bin/bash
# bench/guard_peers.sh - the guard corpus (tests/guard_corpus) under every
# heap checker in one run: glibc (nothing), `heapkit guard` (its defaults:
# both sides), `heapkit guard --sides trailing` (one run), the previous
# default (`--sides trailing --align-min 1`: one run, alignment 1), Electric
# Fence, DUMA, valgrind memcheck and AddressSanitizer (the corpus rebuilt
# with -fsanitize=address). Repetitions are interleaved program by program and
# tool by tool, so load from other processes hits all alike; each figure is
# a median of wall times. Prints a markdown table per tool (buggy programs
# flagged, correct ones flagged, corpus wall time, median run of a correct
# and of a buggy program), then every program's median per tool.
#   bench/guard_peers.sh BUILD_DIR [REPS]
# A tool that is not installed is listed as missing, never left out
# silently (Debian: electric-fence, duma, valgrind; ASan comes with gcc).
#
# Invariants: a buggy program (not ok_*) is flagged by a non-zero status or
# a signal; valgrind runs with --error-exitcode and --leak-check=full
# (definite leaks count); standard input is the program's .input file when
# it has one, else /dev/null (never a terminal: the guard's default runs
# both sides).
set -u
build=${1:?usage: guard_peers.sh BUILD_DIR [REPS]}
reps=${2:-3}
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd)
tool=$build/heapkit
work=$(mktemp -d /tmp/hk-guard-peers.XXXXXX)
trap 'rm -rf "$work"' EXIT

progs=""
for f in "$src"/tests/guard_corpus/*.c; do
    n=$(basename "$f" .c)
    case $n in many_live) continue ;; esac # 100,000 live blocks: minutes under valgrind
    progs="$progs $n"
done

efence=""
for p in /usr/lib/libefence.so.0 /usr/lib/x86_64-linux-gnu/libefence.so.0; do [ -r "$p" ] && efence=$p && break; done
duma=""
for p in /usr/lib/libduma.so.0 /usr/lib/x86_64-linux-gnu/libduma.so.0; do [ -r "$p" ] && duma=$p && break; done
have_vg=$(command -v valgrind || true)
asan_ok=1
for n in $progs; do
    cc -fsanitize=address -g -O0 -fno-omit-frame-pointer -fno-inline -fno-builtin -w -D_GNU_SOURCE -pthread \
        -o "$work/asan_$n" "$src/tests/guard_corpus/$n.c" 2>/dev/null || asan_ok=0
done

tools="glibc guard trailing old efence duma valgrind asan"
# HK_GUARD_BEFORE=/path/to/an/older/heapkit adds its default run as "before"
# (the tool finds the preload library next to itself)
before=${HK_GUARD_BEFORE:-}
[ -n "$before" ] && tools="glibc before guard trailing old efence duma valgrind asan"
missing() {
    case $1 in
    efence) [ -z "$efence" ] && echo "libefence.so not installed (apt-get install electric-fence)" ;;
    duma) [ -z "$duma" ] && echo "libduma.so not installed (apt-get install duma)" ;;
    valgrind) [ -z "$have_vg" ] && echo "valgrind not installed" ;;
    asan) [ $asan_ok = 0 ] && echo "cc -fsanitize=address failed" ;;
    esac
}

# run TOOL PROG: prints "status ms" (standard input: the program's .input file, else /dev/null)
run() {
    local t=$1 n=$2 p=$build/guard_corpus/guard_corpus_$2 s e st in=/dev/null
    [ -f "$src/tests/guard_corpus/$n.input" ] && in=$src/tests/guard_corpus/$n.input
    exec 3<"$in"
    s=$(date +%s%N)
    case $t in
    glibc) "$p" <&3 >/dev/null 2>&1 ;;
    guard) "$tool" guard -- "$p" <&3 >/dev/null 2>&1 ;;
    trailing) "$tool" guard --sides trailing -- "$p" <&3 >/dev/null 2>&1 ;;
    old) "$tool" guard --sides trailing --align-min 1 -- "$p" <&3 >/dev/null 2>&1 ;;
    before) "$before" guard -- "$p" <&3 >/dev/null 2>&1 ;;
    efence) EF_ALLOW_MALLOC_0=1 LD_PRELOAD=$efence "$p" <&3 >/dev/null 2>&1 ;;
    duma) LD_PRELOAD=$duma "$p" <&3 >/dev/null 2>&1 ;;
    valgrind) valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite "$p" \
        <&3 >/dev/null 2>&1 ;;
    asan) ASAN_OPTIONS=detect_leaks=1 "$work/asan_$n" <&3 >/dev/null 2>&1 ;;
    esac
    st=$?
    e=$(date +%s%N)
    exec 3<&-
    echo "$st $(((e - s) / 1000))"
}

for r in $(seq "$reps"); do
    for n in $progs; do
        for t in $tools; do
            [ -n "$(missing $t)" ] && continue
            [ "$t" = valgrind ] && [ "$r" -gt 1 ] && continue # seconds a run: once
            set -- $(run $t $n)
            echo "$2" >>"$work/$t.$n.us"
            echo "$1" >"$work/$t.$n.st"
        done
    done
done

median() { sort -n "$1" | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

echo "| tool | buggy flagged | correct flagged | corpus wall time (sum of medians) | median correct run | median buggy run |"
echo "|---|---|---|---|---|---|"
for t in $tools; do
    m=$(missing $t)
    if [ -n "$m" ]; then echo "| $t | missing: $m | | | | |"; continue; fi
    nb=0; fb=0; nok=0; fok=0; tot=0; : >"$work/ok.$t"; : >"$work/bug.$t"
    for n in $progs; do
        med=$(median "$work/$t.$n.us"); st=$(cat "$work/$t.$n.st")
        tot=$((tot + ${med%.*}))
        case $n in
        ok_*) nok=$((nok + 1)); [ "$st" != 0 ] && fok=$((fok + 1)); echo "$med" >>"$work/ok.$t" ;;
        *) nb=$((nb + 1)); [ "$st" != 0 ] && fb=$((fb + 1)); echo "$med" >>"$work/bug.$t" ;;
        esac
    done
    printf '| %s | %d of %d | %d of %d | %.1f ms | %.2f ms | %.2f ms |\n' "$t" $fb $nb $fok $nok \
        "$(echo "$tot / 1000" | bc -l)" "$(echo "$(median "$work/ok.$t") / 1000" | bc -l)" \
        "$(echo "$(median "$work/bug.$t") / 1000" | bc -l)"
done
echo
printf '| program |'; for t in $tools; do printf ' %s |' "$t"; done; echo
printf '|---|'; for t in $tools; do printf -- '---|'; done; echo
for n in $progs; do
    printf '| %s |' "$n"
    for t in $tools; do
        if [ -n "$(missing $t)" ]; then printf ' - |'; continue; fi
        st=$(cat "$work/$t.$n.st")
        printf ' %.2f ms%s |' "$(echo "$(median "$work/$t.$n.us") / 1000" | bc -l)" "$([ "$st" != 0 ] && echo " (flagged)")"
    done
    echo
done
