#!/usr/bin/env bash
# ports/doom/play.sh LOG ENGINE WAD DEMO [ARGS...] - plays one demo with
# -timedemo, headless (Xvfb through xvfb-run, SDL audio on its dummy
# driver, -nogui so the closing report ends the run), and prints one line:
#   played <checksum> <tics> <realtics>      the demo played to its end
#   failed <reason>                          it did not (Z_Malloc failure...)
# The engine's whole output goes to LOG. WAD is a name in the Freedoom
# package's directory (freedoom1, freedoom2) or a path. HOME is a scratch
# directory beside LOG, so no user configuration is read or written.
# PLAY_WRAP, when set, is a command the engine runs under (heapkit guard --).
set -u
log=$1 engine=$2 wad=$3 demo=$4
shift 4
case $wad in */*) ;; *) wad=/usr/share/games/doom/$wad.wad ;; esac
home=$log.home
mkdir -p "$home"
HOME=$home SDL_AUDIODRIVER=dummy timeout 600 xvfb-run -a -s "-screen 0 640x480x24" \
  ${PLAY_WRAP:-} "$engine" -iwad "$wad" -nogui -timedemo "$demo" "$@" >"$log" 2>&1
rm -rf "$home"
# The timedemo's closing report ("timed N gametics in M realtics") and our
# checksum line; any I_Error before it is a failure.
sync=$(grep -a -o -m1 'hk-sync: .*' "$log")
timed=$(grep -a -m1 '^timed [0-9]* gametics' "$log")
bad=$(grep -a -v '^Z_Init: Init zone' "$log" | grep -m1 'Z_[A-Za-z]*: \|^Error\|Warning: recursive\|heapkit guard: [a-z -]*\(overflow\|underflow\|after free\|invalid\|double\|fault\)')
if [ -n "$timed" ] && [ -n "$sync" ] && [ -z "$bad" ]; then
  set -- $sync
  realtics=$(echo "$timed" | sed 's/.* in \([0-9]*\) realtics.*/\1/')
  echo "played $7 $3 $realtics"
else
  reason=$(echo "$bad" | cut -c1-300)
  echo "failed ${reason:-no closing report (see $log)}"
fi
