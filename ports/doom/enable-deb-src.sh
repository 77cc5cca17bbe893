#!/usr/bin/env bash
# Enables source entries for the Debian archives apt already uses, so that
# `apt-get source chocolate-doom` works on a stock Debian system whose
# sources carry only `Types: deb`. It names no host: every deb822 stanza of
# /etc/apt/sources.list.d/*.sources and every one-line `deb` entry of
# /etc/apt/sources.list{,.d/*.list} that points at a Debian archive (signed by
# the Debian archive keyring, or a `/debian` path) is copied with its type
# changed to deb-src into one file of our own. Idempotent; needs root.
set -euo pipefail
out=/etc/apt/sources.list.d/heapkit-deb-src.sources
[ "$(id -u)" = 0 ] || { echo "enable-deb-src: needs root" >&2; exit 1; }
tmp=$(mktemp)
# deb822 files: stanzas are separated by blank lines.
for f in /etc/apt/sources.list.d/*.sources; do
  [ -e "$f" ] && [ "$f" != "$out" ] || continue
  awk -v RS= -v ORS='\n\n' '
    /(^|\n)Types:[^\n]*deb/ && (/debian-archive-keyring/ || /URIs:[^\n]*\/debian/) {
      gsub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print
    }' "$f" >>"$tmp"
done
# one-line format: deb [opt=value ...] URI SUITE COMPONENT...
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -e "$f" ] || continue
  awk '$1 == "deb" && $0 ~ /\/debian/ {
    i = 2; opts = ""
    if ($2 ~ /^\[/) {
      while (i <= NF) { opts = opts " " $i; if ($i ~ /\]$/) { i++; break } i++ }
      gsub(/[\[\]]/, "", opts)
    }
    print "Types: deb-src"; print "URIs: " $i; print "Suites: " $(i + 1)
    comp = ""; for (j = i + 2; j <= NF; j++) comp = comp " " $j
    print "Components:" comp
    n = split(opts, o, " ")
    for (k = 1; k <= n; k++) {
      split(o[k], kv, "=")
      if (kv[1] == "signed-by") print "Signed-By: " kv[2]
      else if (kv[1] == "arch") print "Architectures: " kv[2]
      else if (kv[1] == "trusted") print "Trusted: " kv[2]
    }
    print ""
  }' "$f" >>"$tmp"
done
if [ ! -s "$tmp" ]; then
  rm -f "$tmp"; echo "enable-deb-src: no Debian archive entry found in apt's sources" >&2; exit 1
fi
if [ -e "$out" ] && cmp -s "$tmp" "$out"; then rm -f "$tmp"; exit 0; fi
install -m 644 "$tmp" "$out"; rm -f "$tmp"
echo "enable-deb-src: wrote $out"
