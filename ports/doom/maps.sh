#!/usr/bin/env bash
# ports/doom/maps.sh OUT DIR - the heap maps of docs/doom.md: heapkit's
# engine (built into OUT by build.sh) plays ports/doom/levelchange-demo.py's
# demo on each WAD at -mb 3, drawing on, and writes the zone's map
# (heapkit/map.h) at the first tic of each level (hk_sync.c's -hkmap):
# DIR/freedoom1-1-E1M1.svg, DIR/freedoom1-2-E1M2.svg, and MAP01, MAP02 for
# freedoom2.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: maps.sh OUT DIR}
dir=${2:?usage: maps.sh OUT DIR}
"$here/build.sh" "$out" heapkit >/dev/null
mkdir -p "$dir" "$out/maps"
python3 "$here/levelchange-demo.py" "$out/maps/levelchg.lmp" 1 1
for w in freedoom1 freedoom2; do
  rm -rf "$out/maps/$w"
  mkdir -p "$out/maps/$w"
  "$here/play.sh" "$out/maps/$w.log" "$out/heapkit/chocolate-doom" "$w" "$out/maps/levelchg" \
    -timer 1 -mb 3 -noblit -hkmap "$out/maps/$w"
  for f in "$out/maps/$w"/*.svg; do cp "$f" "$dir/$w-$(basename "$f")"; done
done
ls -l "$dir"
