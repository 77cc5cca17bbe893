#!/bin/sh
# Installs the allocators heapkit-bench compares against (Debian packages).
# Safe to run again; does nothing when they are all present. Needs root.
set -e
# heaptrack: the recording overhead `heapkit record` is compared with (suite replay)
# the programs suite preload runs under each allocator; valgrind: bench/icount.sh
pkgs="libmimalloc-dev libjemalloc-dev libgoogle-perftools-dev heaptrack python3 sqlite3 lua5.4 perl gcc valgrind"
missing=""
for p in $pkgs; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "install-peers: not root; missing:$missing (benchmarks will skip them)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || true
apt-get install -y -qq $missing
