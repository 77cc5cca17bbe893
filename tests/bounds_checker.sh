#!/bin/sh
# The worst-case checker (bench/bounds.py --check, run by make check-bounds)
# against made-up counts for rows of bench/bounds.tsv: within the bound and
# up to 10% above it passes; 11% above fails and names the call and the path;
# a per-unit row scales with its units; a counted path without a published
# bound fails.
#   tests/bounds_checker.sh PYTHON3 BOUNDS_PY
set -eu
py=$1 bp=$2
tmp=$(mktemp -d /tmp/hk-bchk-XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
tsv=$(dirname "$bp")/bounds.tsv
# the first O(1) row and the first per-unit row
o1=$(grep -v '^#' "$tsv" | awk -F'\t' '$5 == "" { print; exit }')
pu=$(grep -v '^#' "$tsv" | awk -F'\t' '$5 != "" && $7 > 0 { print; exit }')
[ -n "$o1" ] && [ -n "$pu" ] || { echo "no rows to test in $tsv"; exit 1; }
field() { printf '%s\n' "$1" | cut -f"$2"; }
count() { # driver call path units instructions
    printf '%s\t1\t%s|%s|%s\t%s\n' "$1" "$2" "$3" "$4" "$5"
}
d=$(field "$o1" 1) c=$(field "$o1" 2) p=$(field "$o1" 3) b=$(field "$o1" 6)
run() { "$py" "$bp" --counts "$tmp/c" --drivers "" --scales 1 --check >"$tmp/out" 2>&1; }
count "$d" "$c" "$p" 0 "$b" >"$tmp/c"
run || { cat "$tmp/out"; echo "FAIL: a count at its bound was refused"; exit 1; }
count "$d" "$c" "$p" 0 $((b * 110 / 100)) >"$tmp/c"
run || { cat "$tmp/out"; echo "FAIL: a count 10% above its bound was refused"; exit 1; }
count "$d" "$c" "$p" 0 $((b * 111 / 100 + 1)) >"$tmp/c"
if run; then echo "FAIL: a count 11% above its bound passed"; exit 1; fi
grep -qF "$c [$p]" "$tmp/out" || { cat "$tmp/out"; echo "FAIL: the failure does not name call and path"; exit 1; }
# per unit: bound + per_unit * units
d=$(field "$pu" 1) c=$(field "$pu" 2) p=$(field "$pu" 3) b=$(field "$pu" 6) k=$(field "$pu" 7)
lim=$(awk -v b="$b" -v k="$k" 'BEGIN { printf "%d", b + k * 1000000 }')
count "$d" "$c" "$p" 1000000 "$lim" >"$tmp/c"
run || { cat "$tmp/out"; echo "FAIL: a per-unit count at its bound was refused"; exit 1; }
count "$d" "$c" "$p" 1 "$lim" >"$tmp/c"
if run; then echo "FAIL: a per-unit count for fewer units passed"; exit 1; fi
# a path with no published bound
count zone zone.alloc "a path nobody published" 0 10 >"$tmp/c"
if run; then echo "FAIL: a path without a bound passed"; exit 1; fi
grep -q "no bound is published" "$tmp/out" || { cat "$tmp/out"; exit 1; }
echo "bounds checker: ok"
