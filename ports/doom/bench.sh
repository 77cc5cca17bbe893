#!/usr/bin/env bash
# ports/doom/bench.sh OUT REPS [quick] - the figures of heapkit-bench's
# suite doom (bench/suite_doom.c parses them), printed one a line:
#   result <workload> <allocator> <metric> <value> <unit>
#   skip <workload> <allocator> <reason...>
# Builds the engines into OUT when they are not there (ports/doom/build.sh);
# when the packages are missing it prints one "skip all all <what>" line.
# Workloads: every demo of both WADs with -timedemo, drawing on (-noblit),
# on both engines at the default zone (-mb 16) and at 4 MiB: ms per tic
# (median of REPS runs, interleaved), purges, peak zone use and
# fragmentation at the end (1 - largest free block / free bytes); and a
# level change (ports/doom/levelchange-demo.py, E1M1 to E1M2 of
# freedoom1): Z_FreeTags's time at the change (median of REPS). quick: one
# demo per WAD.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: bench.sh OUT REPS [quick]}
reps=${2:-3}
quick=${3:-}
missing=""
for c in xvfb-run Xvfb cmake cc dpkg-source pkg-config python3; do
  command -v "$c" >/dev/null 2>&1 || missing="$missing $c"
done
for w in freedoom1 freedoom2; do [ -e /usr/share/games/doom/$w.wad ] || missing="$missing freedoom"; done
pkg-config --exists sdl2 SDL2_mixer SDL2_net samplerate libpng 2>/dev/null || missing="$missing chocolate-doom's build dependencies"
if [ -n "$missing" ]; then
  echo "skip all all packages missing:$missing (ports/doom/install-deps.sh installs them)"
  exit 0
fi
if ! "$here/build.sh" "$out" stock heapkit >"$out.bench-build.log" 2>&1; then
  echo "skip all all the engines did not build: $(tail -n 1 "$out.bench-build.log")"
  exit 0
fi
logs=$out/bench-logs
mkdir -p "$logs"
demos="freedoom1:demo1 freedoom1:demo2 freedoom1:demo3 freedoom1:demo4 freedoom2:demo1 freedoom2:demo2 freedoom2:demo3 freedoom2:demo4"
[ -z "$quick" ] || demos="freedoom1:demo3 freedoom2:demo4"

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
stat_of() { grep -a -o 'hk-stats: .*' "$1" | sed -n "s/.* $2 \([0-9.]*\).*/\1/p"; }

for d in $demos; do
  w=${d%%:*} m=${d##*:}
  for mb in 16 4; do
    wl="$w-$m-${mb}mb"
    for e in stock heapkit; do : >"$logs/$wl.$e.times"; done
    for r in $(seq "$reps"); do
      for e in stock heapkit; do
        log=$logs/$wl.$e.$r.log
        res=$("$here/play.sh" "$log" "$out/$e/chocolate-doom" "$w" "$m" -mb "$mb" -noblit -hkstats)
        case $res in
        played*)
          set -- $res
          awk -v rt="$4" -v t="$3" 'BEGIN { printf "%.4f\n", rt * 1000 / 35 / t }' >>"$logs/$wl.$e.times"
          cp "$log" "$logs/$wl.$e.last.log"
          ;;
        *) echo "skip $wl $e did not play: $res" ;;
        esac
      done
    done
    for e in stock heapkit; do
      [ -s "$logs/$wl.$e.times" ] || continue
      echo "result $wl $e ms_per_tic $(median <"$logs/$wl.$e.times") ms"
      l=$logs/$wl.$e.last.log
      fr=$(stat_of "$l" free) lf=$(stat_of "$l" largest_free)
      echo "result $wl $e purges $(stat_of "$l" purges) blocks"
      echo "result $wl $e peak_used $(stat_of "$l" peak_used) bytes"
      echo "result $wl $e fragmentation $(awk -v f="$fr" -v l="$lf" 'BEGIN { if (f > 0) printf "%.4f", 1 - l / f; else print 0 }') ratio"
    done
  done
done

# The level change: Z_FreeTags's time when E1M1 ends (the second call; the
# first, at the demo's start, frees an empty level).
python3 "$here/levelchange-demo.py" "$logs/levelchg.lmp" 1 1
for e in stock heapkit; do : >"$logs/levelchange.$e.times"; done
for r in $(seq "$reps"); do
  for e in stock heapkit; do
    log=$logs/levelchange.$e.$r.log
    res=$("$here/play.sh" "$log" "$out/$e/chocolate-doom" freedoom1 "$logs/levelchg" -timer 1 -noblit -hkstats)
    case $res in
    played*) stat_of "$log" freetags_max_ms >>"$logs/levelchange.$e.times" ;;
    *) echo "skip levelchange $e did not play: $res" ;;
    esac
  done
done
for e in stock heapkit; do
  [ -s "$logs/levelchange.$e.times" ] && echo "result levelchange $e freetags_ms $(median <"$logs/levelchange.$e.times") ms"
done
exit 0
