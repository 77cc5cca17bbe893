#!/usr/bin/env bash
# ports/doom/build.sh OUT [VARIANT...] - builds Chocolate Doom (the Debian
# source package, fetched into OUT/src by `apt-get source`) as
#   OUT/stock/chocolate-doom    its own z_zone.c (the rover zone)
#   OUT/heapkit/chocolate-doom  ports/doom/z_zone.c on heapkit's zone (src/all.c)
#   OUT/debug/chocolate-doom    the same, the zone built with its assertions
#                               (HK_DEBUG=2); only when asked for
# VARIANTs default to "stock heapkit". Both get the same small edits, made
# here at build time (the engine's source never enters this repository):
#   - g_game.c: HK_SyncTic() at the start of every game tic, HK_SyncReport()
#     before a timedemo's closing report (ports/doom/hk_sync.c: the game-state
#     checksum and the zone figures);
#   - hk_sync.c added to the doom library, Z_FreeTags wrapped at link time
#     (--wrap) to time the level change;
#   - stock only: stock-zone-stats.c appended to its z_zone.c, and a purge
#     counter on the one line of Z_Malloc that purges.
# Needs the packages of ports/doom/install-deps.sh. A tree is rebuilt when
# one of our files is newer than it; the library's sources (src/all.c is
# compiled into the heapkit engine) are followed by the engine's CMake build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:?usage: build.sh OUT [stock|heapkit]...}
shift
variants=${*:-stock heapkit}
mkdir -p "$out/src"
out=$(cd "$out" && pwd)
jobs=${JOBS:-2}

fetch() {
  local d
  d=$(ls -d "$out"/src/chocolate-doom-*/ 2>/dev/null | head -n 1 || true)
  if [ -z "$d" ]; then
    (cd "$out/src" && apt-get source -qq chocolate-doom >/dev/null 2>"$out/src/apt-get-source.log") || {
      cat "$out/src/apt-get-source.log" >&2
      echo "build.sh: apt-get source chocolate-doom failed (deb-src entries: ports/doom/enable-deb-src.sh)" >&2
      exit 1
    }
    d=$(ls -d "$out"/src/chocolate-doom-*/ | head -n 1)
  fi
  echo "${d%/}"
}

# Applies our edits to a fresh copy of the source in $1 for variant $2.
edit_tree() {
  local t=$1 v=$2 g=$1/src/doom/g_game.c
  grep -q '^void G_Ticker (void)' "$g" && grep -q '// do player reborns if needed' "$g" &&
    grep -q 'I_Error ("timed %i gametics' "$g" || {
    echo "build.sh: g_game.c does not have the lines our edit expects" >&2
    exit 1
  }
  sed -i -e '1i void HK_SyncTic(void); void HK_SyncReport(void);' \
    -e 's|^\([[:space:]]*\)// do player reborns if needed|\1HK_SyncTic();\n&|' \
    -e 's|^\([[:space:]]*\)I_Error ("timed %i gametics|\1HK_SyncReport();\n&|' "$g"
  cp "$here/hk_sync.c" "$t/src/doom/hk_sync.c"
  printf '\ntarget_sources(doom PRIVATE hk_sync.c)\n' >>"$t/src/doom/CMakeLists.txt"
  printf '\ntarget_link_options("${PROGRAM_PREFIX}doom" PRIVATE "-Wl,--wrap=Z_FreeTags")\n' \
    >>"$t/src/CMakeLists.txt"
  case $v in
  stock)
    grep -q 'Z_Free ((byte \*)rover+sizeof(memblock_t));' "$t/src/z_zone.c" || {
      echo "build.sh: z_zone.c does not have the purge line our edit expects" >&2
      exit 1
    }
    sed -i 's|Z_Free ((byte \*)rover+sizeof(memblock_t));|& hk_stock_purges++;|' "$t/src/z_zone.c"
    sed -i '1i extern unsigned long hk_stock_purges;' "$t/src/z_zone.c"
    cat "$here/stock-zone-stats.c" >>"$t/src/z_zone.c"
    ;;
  heapkit | debug)
    cp "$here/z_zone.c" "$t/src/z_zone.c"
    cat >>"$t/src/CMakeLists.txt" <<EOF
find_package(Threads REQUIRED)
target_sources("\${PROGRAM_PREFIX}doom" PRIVATE "$root/src/all.c")
# the library is checked with its own warnings (make check); not the engine's C90 ones
set_source_files_properties("$root/src/all.c" PROPERTIES COMPILE_OPTIONS "-w")
# heapkit's headers are C11 (declarations after statements): not the engine's C90 style
set_source_files_properties(z_zone.c PROPERTIES COMPILE_OPTIONS "-Wno-declaration-after-statement")
target_include_directories("\${PROGRAM_PREFIX}doom" PRIVATE "$root/include")
target_link_libraries("\${PROGRAM_PREFIX}doom" Threads::Threads \${CMAKE_DL_LIBS})
EOF
    # debug: the zone with its internal assertions (HK_DEBUG=2, src/internal.h)
    [ "$v" != debug ] ||
      printf 'set_source_files_properties("%s/src/all.c" PROPERTIES COMPILE_DEFINITIONS "HK_DEBUG=2")\n' \
        "$root" >>"$t/src/CMakeLists.txt"
    ;;
  esac
}

src=$(fetch)
for v in $variants; do
  t=$out/$v/tree
  stamp=$out/$v/.edited
  stale=0
  for f in build.sh hk_sync.c stock-zone-stats.c z_zone.c; do
    [ -e "$stamp" ] && [ ! "$here/$f" -nt "$stamp" ] || stale=1
  done
  if [ "$stale" = 1 ]; then
    rm -rf "$out/$v"
    mkdir -p "$out/$v"
    cp -a "$src" "$t"
    edit_tree "$t" "$v"
    cmake -S "$t" -B "$out/$v/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo --log-level=WARNING >"$out/$v/cmake.log" 2>&1 ||
      { cat "$out/$v/cmake.log" >&2; exit 1; }
    touch "$stamp"
  fi
  cmake --build "$out/$v/build" --target chocolate-doom -j "$jobs" >"$out/$v/build.log" 2>&1 ||
    { tail -n 40 "$out/$v/build.log" >&2; echo "build.sh: building the $v engine failed" >&2; exit 1; }
  cp "$out/$v/build/src/chocolate-doom" "$out/$v/chocolate-doom"
  echo "build.sh: $out/$v/chocolate-doom"
done
