#!/bin/bash
# bench/guard_cost.sh - what `heapkit guard`'s default (two runs) costs
# against one run and against the other checkers, in CPU time (task-clock
# of the whole process tree: the tool, both runs, their helpers) and wall
# time, on small programs of the corpus and on real programs.
#   bench/guard_cost.sh BUILD_DIR [ROUNDS] [RUNS] [small|real|all|"python3 perl ..."]
# Each (program, tool) pair runs RUNS times under `perf stat` per round;
# rounds interleave the tools, so load from other processes hits all
# alike; the figure is the median over ROUNDS of each round's mean. A tool
# that is not installed, or a program that fails under it, is printed as
# such (never left out silently).
#
# A program that fails or hangs (120 s) under a tool is printed as such.
# Tools: glibc (nothing), trailing (`--sides trailing`: one run, the
# previous default's shape), default (both sides, second run isolated),
# noiso (`--no-isolate`: the default where isolation is unavailable: one
# run and a note), efence (Electric Fence), duma, valgrind (memcheck, real
# programs: one round of one run), base (the default of another build's
# tool, GUARD_BASE=/path/to/heapkit: a change measured against the build
# before it, in the same rounds). ASan needs the program rebuilt: it is
# measured on the corpus only (bench/guard_peers.sh).
set -u
build=$(cd "${1:?usage: guard_cost.sh BUILD_DIR [ROUNDS] [RUNS] [small|real|all]}" && pwd)
rounds=${2:-3}
runs=${3:-10}
what=${4:-all}
tool=$build/heapkit
work=$(mktemp -d /tmp/hk-guard-cost.XXXXXX)
trap 'rm -rf "$work"' EXIT
command -v perf >/dev/null || { echo "perf not installed (linux-perf)"; exit 1; }
efence=""
for p in /usr/lib/libefence.so.0 /usr/lib/x86_64-linux-gnu/libefence.so.0; do [ -r "$p" ] && efence=$p && break; done
duma=""
for p in /usr/lib/libduma.so.0 /usr/lib/x86_64-linux-gnu/libduma.so.0; do [ -r "$p" ] && duma=$p && break; done

# the real programs' workloads (those of tests/guard_programs.sh)
cd "$work" || exit 1
cat >t.py <<'PY'
import json, re, collections, itertools
class Node:
    __slots__ = ("k", "kids")
    def __init__(self, k):
        self.k = k; self.kids = []
root = Node(0)
nodes = [root]
for i in range(1, 1500):
    n = Node(i); nodes[(i * 7) % len(nodes)].kids.append(n); nodes.append(n)
def depth(n): return 1 + max((depth(c) for c in n.kids), default=0)
words = [("w%d" % (i * 31 % 997)) * (i % 5 + 1) for i in range(2500)]
c = collections.Counter(words)
s = json.dumps({w: k for w, k in c.most_common(50)}, sort_keys=True)
print("depth", depth(root), "distinct", len(c), "json", len(s))
PY
cat >t.pl <<'PL'
my %h; my @l;
for my $i (1 .. 20000) { my $k = "k" . ($i * 7919 % 10007); $h{$k} .= chr(65 + $i % 26); push @l, [$i, $k]; }
my @s = sort { length($h{$a}) <=> length($h{$b}) or $a cmp $b } keys %h;
print scalar(@s), "\n";
PL
cat >t.lua <<'LUA'
local t = {}
for i = 1, 12000 do t[i] = string.rep(string.char(97 + i % 26), i % 37) .. i end
table.sort(t)
print(#t)
LUA
cat >t.sql <<'SQL'
create table t(a integer primary key, b text, c real);
with recursive n(x) as (select 1 union all select x + 1 from n where x < 20000)
  insert into t select x, printf('%d-%s', x, substr('abcdefghijklmnopqrstuvwxyz', 1 + x % 26, 1 + x % 17)), x / 7.0 from n;
create index tb on t(b);
select count(*), sum(length(b)) from t;
SQL
cat >t.sh <<'SH'
set -e
rm -rf r
git init -q r
cd r
for i in 1 2 3 4 5 6; do seq $i 400 > f$i.txt; done
git add .
git commit -q -m first
git log --format='%s' >/dev/null
SH
printf 'int f(int x) { return x * 3; }\nint main(void) { return f(2) - 6; }\n' >t.c
export HOME=$work GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@example.org \
    GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@example.org PERL_DESTRUCT_LEVEL=2
cc1=$(gcc -print-prog-name=cc1 2>/dev/null)
gcc -E t.c -o t.i 2>/dev/null

small="$build/guard_corpus/guard_corpus_ok_stdio $build/guard_corpus/guard_corpus_ok_uninit $build/guard_corpus/guard_corpus_ok_list /bin/true"
real="python3 perl lua sqlite3 git cc1"
progs=""
case $what in
all) progs="$small $real" ;;
small) progs=$small ;;
real) progs=$real ;;
*) progs=$what ;; # one or more of the real programs, by name
esac

# cmd PROG: the command line of a program (real ones by name)
cmd() {
    case $1 in
    python3) echo "/usr/bin/python3 $work/t.py" ;;
    perl) echo "perl $work/t.pl" ;;
    lua) echo "lua5.4 $work/t.lua" ;;
    sqlite3) echo "sqlite3 -init $work/t.sql :memory: .quit" ;;
    git) echo "sh $work/t.sh" ;;
    cc1) echo "$cc1 -quiet -O2 -fpreprocessed $work/t.i -o /dev/null" ;;
    *) echo "$1" ;;
    esac
}
tools=${TOOLS:-"glibc trailing default noiso efence duma valgrind"} # TOOLS="...": a subset
# measure TOOL PROG N: prints "cpu_ms wall_ms" (perf stat: task-clock of
# the process tree and duration, means of N runs), or why not. The first
# time, one run (discarded) with a 120 s limit checks the exit status
# (Electric Fence hangs in perl here); the preload peers are set in perf's
# own environment (an `env` in front would add an exec to the figure).
measure() {
    local t=$1 c n=$3 pre=() lib="" noleaks=""
    # git leaves blocks unreachable at exit (valgrind agrees: tests/guard_programs.sh)
    [ "$2" = git ] && noleaks=--no-leaks
    read -r -a c <<<"$(cmd "$2")"
    case $t in
    glibc) pre=() ;;
    trailing) pre=("$tool" guard --sides trailing $noleaks --) ;;
    default) pre=("$tool" guard $noleaks --) ;;
    noiso) pre=("$tool" guard --no-isolate $noleaks --) ;;
    base) [ -x "${GUARD_BASE:-}" ] || { echo "missing"; return; }; pre=("$GUARD_BASE" guard $noleaks --) ;;
    efence) [ -z "$efence" ] && { echo "missing"; return; }; lib=$efence ;;
    duma) [ -z "$duma" ] && { echo "missing"; return; }; lib=$duma ;;
    valgrind) command -v valgrind >/dev/null || { echo "missing"; return; }; pre=(valgrind -q --error-exitcode=99) ;;
    esac
    local f="$work/$(basename "$2").$t" st
    if [ ! -s "$f" ] && [ "$t" != valgrind ]; then
        (cd "$work" && EF_ALLOW_MALLOC_0=1 LD_PRELOAD=$lib timeout 120 "${pre[@]}" "${c[@]}" </dev/null >/dev/null 2>&1)
        st=$?
        [ $st = 124 ] && { echo "timeout"; return; }
        [ $st != 0 ] && { echo "fails(status $st)"; return; }
    fi
    (cd "$work" && EF_ALLOW_MALLOC_0=1 LD_PRELOAD=$lib perf stat -r "$n" -x, -e task-clock -e duration_time \
        "${pre[@]}" "${c[@]}" </dev/null 2>&1 >/dev/null) |
        awk -F, '$3 == "task-clock" {c = $1} $3 == "duration_time" {w = $1 / 1e6}
            END {if (c == "") print "fail"; else print c, w}'
}
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$rounds"); do
    for p in $progs; do
        for t in $tools; do
            n=$runs
            case $t in valgrind) [ "$r" -gt 1 ] && continue; n=1 ;; esac
            case " $small " in *" $p "*) ;; *) [ "$t" != valgrind ] && n=$(((runs + 2) / 3)) ;; esac
            f="$work/$(basename "$p").$t"
            grep -q "missing\|fail\|timeout" "$f" 2>/dev/null && continue # not again
            echo "$(measure $t "$p" "$n")" >>"$f"
        done
    done
done
median() { awk '{print $'"$2"'}' "$1" | sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
echo "| program | $(echo $tools | sed 's/ / | /g') |"
echo "|---|$(for t in $tools; do printf -- '---|'; done)"
for p in $progs; do
    printf '| %s |' "$(basename "$p" | sed 's/guard_corpus_//')"
    for t in $tools; do
        f="$work/$(basename "$p").$t"
        if [ ! -s "$f" ]; then printf ' - |'; continue; fi
        if grep -q "missing\|fail\|timeout" "$f"; then printf ' %s |' "$(grep "missing\|fail\|timeout" "$f" | head -1)"; continue; fi
        printf ' %.2f / %.2f ms |' "$(median "$f" 1)" "$(median "$f" 2)"
    done
    echo
done
echo
echo "(each cell: CPU time / wall time, ms; median over $rounds rounds of the mean of the runs;"
echo " load average $load0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end)"
