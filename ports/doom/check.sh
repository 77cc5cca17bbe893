#!/usr/bin/env bash
# ports/doom/check.sh OUT [HEAPKIT_CMD] - `make check-doom`: Chocolate Doom
# on heapkit's zone against the stock engine, on every demo of Freedoom's
# two WADs (docs/doom.md). Needs ports/doom/install-deps.sh's packages;
# fails, saying which, when they are missing. Steps, each over the 8 demos
# (two runs at a time):
#  1. both engines at the default zone (-mb 16), -nodraw: heapkit's engine
#     must play each demo as stock does (same tic count, same game-state
#     checksum, ports/doom/hk_sync.c);
#  2. stock's smallest -mb per demo, drawing on (-noblit: the renderer runs,
#     so patches, flats and sprites are cached and purged; only the copy to
#     the window is skipped), and heapkit's engine at that -mb, in sync;
#  3. heapkit's debug engine (the zone built with its assertions, HK_DEBUG=2)
#     with Z_CheckHeap after every tic (-zonecheck) and the zone's debug
#     flags (-zonedebug: canaries, fill patterns), drawing on, at 3 MiB, in
#     sync;
#  4. heapkit's engine at 3 MiB, drawing on, in sync (stock needs 4 MiB for
#     two of the demos), then its own smallest zone per demo (-kb, 64 KiB
#     steps), which must be at most 3 MiB;
#  5. the stock engine under `heapkit guard` (HEAPKIT_CMD, the built
#     `heapkit` tool) for each demo: no fault or misuse report, and the same
#     play; the leaks it reports at exit are listed (docs/doom.md).
# Writes OUT/results.txt (the table) and OUT/results.tsv; logs in OUT/logs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: check.sh OUT [HEAPKIT_CMD]}
heapkit_cmd=${2:-}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export JOBS=${JOBS:-2}
start=$(date +%s)

missing=""
for c in xvfb-run Xvfb xauth cmake cc dpkg-source pkg-config; do
  command -v "$c" >/dev/null 2>&1 || missing="$missing $c"
done
for w in freedoom1 freedoom2; do [ -e /usr/share/games/doom/$w.wad ] || missing="$missing $w.wad"; done
pkg-config --exists sdl2 SDL2_mixer SDL2_net samplerate libpng 2>/dev/null || missing="$missing SDL2/SDL2_mixer/SDL2_net/samplerate/libpng(-dev)"
if [ -n "$missing" ]; then
  echo "check-doom: FAILED: missing:$missing" >&2
  echo "check-doom: run ports/doom/install-deps.sh as root (Debian: xvfb xauth freedoom and chocolate-doom's build dependencies)" >&2
  exit 1
fi

"$here/build.sh" "$out" stock heapkit debug
stock=$out/stock/chocolate-doom
hk=$out/heapkit/chocolate-doom
dbg=$out/debug/chocolate-doom
logs=$out/logs
rm -rf "$logs"
mkdir -p "$logs"
demos="freedoom1:demo1 freedoom1:demo2 freedoom1:demo3 freedoom1:demo4 freedoom2:demo1 freedoom2:demo2 freedoom2:demo3 freedoom2:demo4"
fail=0
bad() {
  echo "check-doom: FAIL: $*" >&2
  fail=1
}
# par NAME CMD...: runs CMD (with {} replaced by each demo as "wad demo")
# for every demo, JOBS at a time, with "wad demo" appended to CMD (so
# an inner bash -c '...' A B C sees them as $3 $4); the last line CMD
# prints goes to $logs/NAME.<wad>-<demo>
par() {
  local name=$1
  shift
  for d in $demos; do echo "${d%%:*} ${d##*:}"; done |
    LOGS=$logs NAME=$name xargs -P "$JOBS" -L 1 bash -c \
      'w=${*: -2:1} d=${*: -1}; "$@" 2>&1 | tail -n 1 >"$LOGS/$NAME.$w-$d"' _ "$@"
}
res() { cat "$logs/$1.$2-$3"; }

echo "check-doom: 1. both engines at the default zone, -nodraw"
par stock16 bash -c '"$0" "$1/stock16-$3-$4.log" "$2" "$3" "$4" -nodraw' "$here/play.sh" "$logs" "$stock"
par hk16 bash -c '"$0" "$1/hk16-$3-$4.log" "$2" "$3" "$4" -nodraw' "$here/play.sh" "$logs" "$hk"
for d in $demos; do
  w=${d%%:*} m=${d##*:}
  s=$(res stock16 "$w" "$m") h=$(res hk16 "$w" "$m")
  case $s in played*) ;; *) bad "$w $m: stock did not play: $s" ;; esac
  [ "$(echo "$s" | cut -d' ' -f1-3)" = "$(echo "$h" | cut -d' ' -f1-3)" ] ||
    bad "$w $m: heapkit ($h) differs from stock ($s) at -mb 16"
done

echo "check-doom: 2. stock's smallest -mb per demo (drawing on), heapkit at it"
par stockmin bash -c '"$0" "$1/stockmin" "$2" "$3" "$4" -mb 0 8 1 -noblit' "$here/minsize.sh" "$logs" "$stock"
for d in $demos; do
  w=${d%%:*} m=${d##*:}
  echo "$w $m $(res stockmin "$w" "$m")"
done >"$logs/stockmin.all"
par hkatstock bash -c 'mb=$(grep "^$3 $4 " "$1/stockmin.all" | cut -d" " -f3); "$0" "$1/hkatstock-$3-$4.log" "$2" "$3" "$4" -mb "$mb" -noblit' \
  "$here/play.sh" "$logs" "$hk"
for d in $demos; do
  w=${d%%:*} m=${d##*:}
  ref=$(res stock16 "$w" "$m" | cut -d' ' -f2)
  set -- $(res stockmin "$w" "$m")
  [ "$1" != none ] || { bad "$w $m: stock plays at no -mb up to 8: $*"; continue; }
  [ "$2" = "$ref" ] || bad "$w $m: stock at -mb $1 plays differently ($2, $ref at -mb 16)"
  h=$(res hkatstock "$w" "$m")
  [ "$h" != "${h#played $ref }" ] || bad "$w $m: heapkit at stock's -mb $1: $h (stock: $ref)"
done

echo "check-doom: 3. heapkit's debug build with Z_CheckHeap every tic and the zone's debug flags, 3 MiB, drawing on"
par hkcheck bash -c '"$0" "$1/hkcheck-$3-$4.log" "$2" "$3" "$4" -mb 3 -noblit -zonecheck -zonedebug' "$here/play.sh" "$logs" "$dbg"
echo "check-doom: 4. heapkit at 3 MiB, drawing on; then its smallest zone per demo"
par hk3 bash -c '"$0" "$1/hk3-$3-$4.log" "$2" "$3" "$4" -mb 3 -noblit -hkstats' "$here/play.sh" "$logs" "$hk"
par hkmin bash -c '"$0" "$1/hkmin" "$2" "$3" "$4" -kb 1024 3072 64 -noblit' "$here/minsize.sh" "$logs" "$hk"
for d in $demos; do
  w=${d%%:*} m=${d##*:}
  ref=$(res stock16 "$w" "$m" | cut -d' ' -f2)
  for p in hkcheck hk3; do
    h=$(res $p "$w" "$m")
    [ "$h" != "${h#played $ref }" ] || bad "$w $m: heapkit ($p): $h (stock: $ref)"
  done
  set -- $(res hkmin "$w" "$m")
  [ "$1" != none ] && [ "$2" = "$ref" ] || bad "$w $m: heapkit's smallest zone: $* (stock: $ref)"
done

if [ -n "$heapkit_cmd" ]; then
  echo "check-doom: 5. the stock engine under heapkit guard, -nodraw"
  export PLAY_WRAP="$heapkit_cmd guard --"
  par guard bash -c '"$0" "$1/guard-$3-$4.log" "$2" "$3" "$4" -nodraw' \
    "$here/play.sh" "$logs" "$stock"
  unset PLAY_WRAP
  for d in $demos; do
    w=${d%%:*} m=${d##*:}
    ref=$(res stock16 "$w" "$m" | cut -d' ' -f2)
    h=$(res guard "$w" "$m")
    [ "$h" != "${h#played $ref }" ] || bad "$w $m: stock under the guard: $h (without: $ref)"
  done
fi

# The table.
{
  printf '%-10s %-6s %6s %-17s %9s %12s %10s %8s %7s\n' wad demo tics checksum "stock_mb" "heapkit_kb" "hk3_purges" "hk3_frag" leaks
  for d in $demos; do
    w=${d%%:*} m=${d##*:}
    set -- $(res stock16 "$w" "$m")
    tics=$3 sum=$2
    smb=$(res stockmin "$w" "$m" | cut -d' ' -f1)
    hkb=$(res hkmin "$w" "$m" | cut -d' ' -f1)
    st=$(grep -a -o 'hk-stats: .*' "$logs/hk3-$w-$m.log" || true)
    purges=$(echo "$st" | sed -n 's/.* purges \([0-9]*\).*/\1/p')
    fr=$(echo "$st" | sed -n 's/.* free \([0-9]*\) largest_free \([0-9]*\).*/\1 \2/p')
    frag=$(echo "$fr" | awk '{ if ($1 > 0) printf "%.3f", 1 - $2 / $1; else print "-" }')
    leaks=$([ -e "$logs/guard-$w-$m.log" ] && grep -a -c 'heapkit guard: leak:' "$logs/guard-$w-$m.log" || echo -)
    printf '%-10s %-6s %6s %-17s %9s %12s %10s %8s %7s\n' "$w" "$m" "$tics" "$sum" "$smb" "$hkb" "${purges:--}" "${frag:--}" "$leaks"
  done
} | tee "$out/results.txt"
echo "check-doom: stock_mb: stock's smallest -mb (drawing on); heapkit_kb: heapkit's smallest zone in KiB;"
echo "check-doom: hk3_*: heapkit at 3 MiB: purges, fragmentation at the end (1 - largest free / free); leaks: guard's leak reports"
echo "check-doom: took $(($(date +%s) - start))s"
if [ "$fail" != 0 ]; then
  echo "check-doom: FAILED (logs in $logs)" >&2
  exit 1
fi
echo "check-doom: passed"
