#!/usr/bin/env bash
# ports/doom/install-deps.sh - what check-doom and the doom bench need, on
# Debian (as root): the engine's source entries (enable-deb-src.sh), Xvfb,
# Freedoom's WADs and Chocolate Doom's build dependencies. Exits non-zero,
# saying what failed, when something cannot be installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pkgs="xvfb xauth freedoom dpkg-dev cmake gcc make pkg-config libsdl2-dev libsdl2-mixer-dev
  libsdl2-net-dev libpng-dev libsamplerate0-dev"
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: not root: nothing installed" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
"$here/enable-deb-src.sh"
update=0
[ -n "$missing" ] && update=1
apt-cache showsrc chocolate-doom 2>/dev/null | grep -q '^Package: chocolate-doom' || update=1
if [ "$update" = 1 ]; then apt-get update -qq; fi
if [ -n "$missing" ]; then apt-get install -y -qq --no-install-recommends $missing >/dev/null; fi
apt-cache showsrc chocolate-doom 2>/dev/null | grep -q '^Package: chocolate-doom' || {
  echo "install-deps: apt has no source package chocolate-doom" >&2
  exit 1
}
