#!/bin/sh
# Real programs, multi-threaded where the program allows it, run twice: as
# they are and with LD_PRELOAD=libheapkit-malloc.so. Both runs must succeed
# and print exactly the same; the preload must have served the allocations
# (HEAPKIT_STATS=1) and reported no misuse.
#   preload_programs.sh LIB CASE WORKDIR [SOURCE_DIR]
# Cases: python_threads perl sqlite lua gcc cmake.
# Exit 77 (CTest SKIP_RETURN_CODE) when the program is not installed
# (.ci/install-deps.sh installs them).
#
# Invariants: every workload prints only deterministic results (no
# addresses, timings or hash orders), so any difference is the allocator's;
# each case works in its own WORKDIR, removed and made anew.
set -u
lib=$1
case_=$2
work=$3
srcdir=${4:-}
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1

need() { command -v "$1" >/dev/null 2>&1 || { echo "SKIP: $1 not installed (.ci/install-deps.sh installs it)"; exit 77; }; }

# both CMD...: runs CMD plain (plain.out) and under the preload (preload.out,
# statistics on preload.err), and compares.
both() {
    "$@" >plain.out 2>plain.err || { echo "FAIL: plain run of $* exited $?"; cat plain.err; exit 1; }
    HEAPKIT_STATS=1 LD_PRELOAD="$lib" "$@" >preload.out 2>preload.err \
        || { echo "FAIL: $* under the preload exited $?"; cat preload.err; exit 1; }
    if ! cmp -s plain.out preload.out; then
        echo "FAIL: $* printed something else under the preload:"
        diff plain.out preload.out | head -n 40
        exit 1
    fi
    if ! grep -q "heapkit: zone 'malloc': [1-9][0-9]* allocations" preload.err; then
        echo "FAIL: the preload did not serve $*'s allocations:"; cat preload.err; exit 1
    fi
    if grep "^heapkit: " preload.err | grep -v "^heapkit: zone 'malloc': [0-9]* allocations, " | grep -q .; then
        echo "FAIL: misuse reported under the preload:"; cat preload.err; exit 1
    fi
    echo "same output ($(wc -c <plain.out) bytes): $(head -c 200 plain.out | head -n 3)"
    grep "heapkit: zone" preload.err | tail -n 1
}

case "$case_" in
python_threads)
    need python3
    cat >t.py <<'PY'
import threading, queue, os, json
from concurrent.futures import ThreadPoolExecutor

def job(k):
    d = {}
    for i in range(20000):
        d[(k, i)] = str(i * k) * (i % 7)
    l = sorted(d.values(), key=lambda s: (len(s), s))
    return sum(len(s) for s in l) + len(json.dumps(l[:500]))

with ThreadPoolExecutor(4) as ex:
    pool = list(ex.map(job, range(16)))

# blocks made by one thread, freed by another
q = queue.Queue(maxsize=64)
got = []
def producer():
    for i in range(20000):
        q.put([i] * (i % 33))
    q.put(None)
def consumer():
    n = 0
    while True:
        x = q.get()
        if x is None:
            break
        n += len(x)
    got.append(n)
ts = [threading.Thread(target=producer), threading.Thread(target=consumer)]
[t.start() for t in ts]; [t.join() for t in ts]

# fork from a process with threads: the child allocates
pid = os.fork()
if pid == 0:
    x = [bytes(i % 200) for i in range(20000)]
    os._exit(0 if len(x) == 20000 else 1)
_, st = os.waitpid(pid, 0)
print("pool", pool)
print("queue", got, "fork", st)
PY
    both python3 t.py ;;
perl)
    need perl
    cat >t.pl <<'PL'
use strict; use warnings;
my %h; $h{"k$_"} = "v" x ($_ % 50) for 1..100000;
my $s = 0; $s += length($h{$_}) for keys %h;
delete $h{"k$_"} for grep { $_ % 3 } 1..100000;
my @k = sort keys %h;
my $t = join(",", @k[0..9]);
(my $u = join("", map { $h{$_} } @k[0..999])) =~ s/v/ww/g;
my @n = sort { $a <=> $b } map { ($_ * 7919) % 100003 } 1..100000;
print "perl $s ", scalar(@k), " $t ", length($u), " @n[0..4]\n";
my $threads = eval { require threads; 1 } ? 1 : 0;
if ($threads) {
    my @th = map { my $k = $_; threads->create(sub { my %x; $x{$_} = [$_ .. $_ + $k % 9] for 1..20000; my $c = 0; $c += @{$x{$_}} for keys %x; $c }) } 1..4;
    print "threads ", join(" ", map { $_->join } @th), "\n";
}
PL
    both perl t.pl ;;
sqlite)
    need sqlite3
    cat >t.sql <<'SQL'
create table t(a integer primary key, b text, c real);
begin;
with recursive s(x) as (select 1 union all select x + 1 from s where x < 100000)
  insert into t select x, printf('%08x-%d', (x * 2654435761) % 4294967296, x % 97), x * 0.25 from s;
commit;
create index tb on t(b);
create index tc on t(c);
select count(*), sum(a), min(b), max(b) from t;
select b from t where b like 'ff%' order by b limit 5;
delete from t where a % 3 = 0;
vacuum;
select count(*), sum(length(b)), avg(c) from t;
SQL
    both sqlite3 :memory: ".read t.sql" ;;
lua)
    need lua5.4
    cat >t.lua <<'LUA'
local t, len = {}, 0
for r = 1, 3 do
  local s = {}
  for i = 1, 100000 do s[i] = tostring(i * r) .. "k"; t[s[i]] = i end
  len = len + #table.concat(s, ",", 1, 2000)
  for k, v in pairs(t) do if v % 3 == 0 then t[k] = nil end end
end
local co = coroutine.wrap(function() for i = 1, 50000 do coroutine.yield(string.rep("ab", i % 40)) end end)
local c = 0
for _ = 1, 50000 do c = c + #co() end
collectgarbage()
local n = 0
for _ in pairs(t) do n = n + 1 end
print("lua", n, len, c)
LUA
    both lua5.4 t.lua ;;
gcc)
    need gcc
    [ -n "$srcdir" ] && [ -f "$srcdir/src/zone.c" ] || { echo "FAIL: no project source given"; exit 1; }
    # the assembly gcc writes for a project source, then a program it builds
    both gcc -O2 -D_GNU_SOURCE -I"$srcdir/include" -I"$srcdir/src" -S -o - "$srcdir/src/zone.c"
    cat >p.c <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
    char *a[1000];
    long s = 0;
    for (int i = 0; i < 1000; i++) { a[i] = malloc(16 + i); memset(a[i], i & 0x7f, 16 + i); }
    for (int i = 0; i < 1000; i++) { s += a[i][i]; free(a[i]); }
    printf("built program %ld\n", s);
    return 0;
}
C
    HEAPKIT_STATS=1 LD_PRELOAD="$lib" gcc -O2 -o p p.c 2>build.err || { echo "FAIL: gcc under the preload"; cat build.err; exit 1; }
    ./p | grep -qx "built program 62252" || { echo "FAIL: the program gcc built under the preload"; ./p; exit 1; } ;;
cmake)
    need cmake
    [ -n "$srcdir" ] || { echo "FAIL: no project source given"; exit 1; }
    cat >t.cmake <<CM
file(GLOB_RECURSE srcs RELATIVE "$srcdir" "$srcdir/src/*.c" "$srcdir/src/*.h" "$srcdir/include/*.h")
list(SORT srcs)
list(LENGTH srcs n)
set(total 0)
foreach(f \${srcs})
  file(STRINGS "$srcdir/\${f}" lines)
  list(LENGTH lines k)
  math(EXPR total "\${total} + \${k}")
  file(READ "$srcdir/\${f}" body)
  string(REGEX MATCHALL "hk_[a-z_]+\\\\(" calls "\${body}")
  list(LENGTH calls c)
  string(MD5 h "\${body}")
  message("\${f} \${k} \${c} \${h}")
endforeach()
message("files \${n} lines \${total}")
CM
    both cmake -P t.cmake
    # cmake -P prints with message() on stderr: compare that too
    cmake -P t.cmake 2>plain.msg
    HEAPKIT_STATS=1 LD_PRELOAD="$lib" cmake -P t.cmake 2>preload.msg
    grep -v "^heapkit:" preload.msg >preload.msg2
    cmp -s plain.msg preload.msg2 || { echo "FAIL: cmake -P messages differ"; diff plain.msg preload.msg2 | head; exit 1; }
    tail -n 1 plain.msg ;;
*)
    echo "unknown case $case_"; exit 2 ;;
esac
echo "$case_: same output with and without libheapkit-malloc.so"
