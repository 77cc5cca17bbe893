#!/bin/sh
# Runs a real program with LD_PRELOAD=libheapkit-malloc.so and checks its output.
#   zone_preload.sh LIB CASE WORKDIR
# Exit 77 (CTest SKIP_RETURN_CODE) when the program is not installed.
set -u
lib=$1
case_=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
export HEAPKIT_STATS=1

need() { command -v "$1" >/dev/null 2>&1 || { echo "SKIP: $1 not installed"; exit 77; }; }

# Runs "$@" under the preload; stdout to out.txt, stderr to err.txt.
run() { LD_PRELOAD="$lib" "$@" >out.txt 2>err.txt; }

# The preload served allocations and reported no misuse.
served() {
    if ! grep -q "heapkit: zone 'malloc': [1-9][0-9]* allocations" err.txt; then
        echo "FAIL: the zone did not serve the program's allocations"; cat err.txt; exit 1
    fi
    if grep "heapkit:" err.txt | grep -v "allocations" | grep -q .; then
        echo "FAIL: misuse reported:"; cat err.txt; exit 1
    fi
    grep "heapkit: zone" err.txt | tail -n 1
}

# The same command without the preload must print the same.
same_as_reference() {
    "$@" >ref.txt 2>/dev/null
    if ! cmp -s ref.txt out.txt; then
        echo "FAIL: output differs from the run without the preload:"; diff ref.txt out.txt; exit 1
    fi
    cat out.txt
}

expect() {
    if ! grep -qx "$1" out.txt; then
        echo "FAIL: expected line '$1', got:"; cat out.txt; cat err.txt; exit 1
    fi
}

case "$case_" in
python)
    need python3
    cat >t.py <<'PY'
import json, re, threading, os, hashlib
d = {str(i): [i] * (i % 50) for i in range(100000)}
s = sum(len(v) for v in d.values())
j = json.loads(json.dumps(d))
assert len(j) == 100000
words = re.findall(r"\w+", " ".join(str(i) for i in range(50000)))
h = hashlib.sha256("".join(words).encode()).hexdigest()[:8]
out = []
def work(n):
    out.append(sum(len(bytearray(k)) for k in range(n)))
ts = [threading.Thread(target=work, args=(3000,)) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
pid = os.fork()
if pid == 0:
    x = [bytes(100) for _ in range(10000)]
    os._exit(0 if len(x) == 10000 else 1)
_, st = os.waitpid(pid, 0)
print("python ok", s, len(words), h, sum(out), st)
PY
    run python3 t.py || { echo "FAIL: python3 exited $?"; cat out.txt err.txt; exit 1; }
    grep -q "^python ok 2450000 50000 [0-9a-f]* 17994000 0$" out.txt || { echo "FAIL: python output"; cat out.txt; exit 1; }
    same_as_reference python3 t.py
    served ;;
perl)
    need perl
    run perl -e 'my %h; $h{$_} = "x" x ($_ % 100) for 1..200000; my $s = 0; $s += length($h{$_}) for keys %h; my @a = sort { $a <=> $b } map { $_ * 7 % 1000 } 1..100000; my $t = join(",", @a[0..4]); $_ =~ s/x/yy/g for values %h; my $u = 0; $u += length for values %h; print "perl ok $s $t $u\n";' \
        || { echo "FAIL: perl exited $?"; cat out.txt err.txt; exit 1; }
    expect "perl ok 9900000 0,0,0,0,0 19800000"
    served ;;
gcc)
    need gcc
    cat >hello.c <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct node { struct node *next; int v; };
int main(void) {
    struct node *h = NULL;
    for (int i = 0; i < 1000; i++) { struct node *n = malloc(sizeof *n); n->v = i; n->next = h; h = n; }
    long s = 0; while (h) { struct node *n = h->next; s += h->v; free(h); h = n; }
    printf("gcc-built program ok %ld\n", s);
    return 0;
}
C
    run gcc -O2 -Wall -o hello hello.c || { echo "FAIL: gcc exited $?"; cat out.txt err.txt; exit 1; }
    served
    ./hello >out.txt 2>&1 || exit 1
    expect "gcc-built program ok 499500" ;;
cmake)
    need cmake
    mkdir -p proj
    cat >proj/CMakeLists.txt <<'CM'
cmake_minimum_required(VERSION 3.16)
project(preload_probe C)
add_executable(probe main.c)
CM
    cat >proj/main.c <<'C'
#include <stdio.h>
int main(void) { printf("cmake-built program ok\n"); return 0; }
C
    run sh -c 'cmake -S proj -B b -DCMAKE_BUILD_TYPE=Release && cmake --build b' \
        || { echo "FAIL: cmake build failed"; cat out.txt err.txt; exit 1; }
    served
    ./b/probe >out.txt 2>&1 || exit 1
    expect "cmake-built program ok" ;;
lua)
    need lua5.4
    run lua5.4 -e 'local t = {} for i = 1, 200000 do t[i] = tostring(i) .. "x" end local s = 0 for i = 1, #t do s = s + #t[i] end local c = {} for i = 1, 50000 do c[#c + 1] = string.rep("ab", i % 30) end collectgarbage() print("lua ok", #t, s, #c)' \
        || { echo "FAIL: lua5.4 exited $?"; cat out.txt err.txt; exit 1; }
    grep -q "^lua ok	200000	[0-9]*	50000$" out.txt || { echo "FAIL: lua output"; cat out.txt; exit 1; }
    same_as_reference lua5.4 -e 'local t = {} for i = 1, 200000 do t[i] = tostring(i) .. "x" end local s = 0 for i = 1, #t do s = s + #t[i] end local c = {} for i = 1, 50000 do c[#c + 1] = string.rep("ab", i % 30) end collectgarbage() print("lua ok", #t, s, #c)'
    served ;;
sqlite)
    need sqlite3
    run sqlite3 :memory: "create table t(a, b); with recursive c(x) as (select 1 union all select x + 1 from c where x < 100000) insert into t select x, hex(randomblob(20)) from c; create index i on t(b); select count(*), sum(a), count(distinct length(b)) from t;" \
        || { echo "FAIL: sqlite3 exited $?"; cat out.txt err.txt; exit 1; }
    expect "100000|5000050000|1"
    served ;;
*)
    echo "unknown case $case_"; exit 2 ;;
esac
echo "$case_ under libheapkit-malloc.so: ok"
