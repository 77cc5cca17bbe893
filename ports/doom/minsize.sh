#!/usr/bin/env bash
# ports/doom/minsize.sh LOGDIR ENGINE WAD DEMO FLAG LO HI STEP [ARGS...] -
# the smallest zone (FLAG -mb in MiB or -kb in KiB) at which ENGINE plays
# the demo to its end, by bisection between LO (assumed to fail) and HI
# (tried first: it must play), to STEP. Prints "<size> <checksum>", or
# "none <reason>" when HI does not play. Each try's log stays in LOGDIR.
set -u
here=$(cd "$(dirname "$0")" && pwd)
dir=$1 engine=$2 wad=$3 demo=$4 flag=$5 lo=$6 hi=$7 step=$8
shift 8
mkdir -p "$dir"
try() { "$here/play.sh" "$dir/$wad-$demo$flag$1.log" "$engine" "$wad" "$demo" "$flag" "$1" "$@"; }
r=$(try "$hi" "$@")
case $r in played*) ;; *) echo "none $r"; exit 0 ;; esac
sum=$(echo "$r" | cut -d' ' -f2)
while [ $((hi - lo)) -gt "$step" ]; do
  m=$(((lo + hi) / 2 / step * step))
  [ "$m" -gt "$lo" ] || m=$((lo + step))
  r=$(try "$m" "$@")
  case $r in
  played*) hi=$m sum=$(echo "$r" | cut -d' ' -f2) ;;
  *) lo=$m ;;
  esac
done
echo "$hi $sum"
