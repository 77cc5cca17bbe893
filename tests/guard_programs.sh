#!/bin/sh
# Real programs on the guard heap with `heapkit guard`'s defaults (both
# sides: two runs, the second isolated; blocks 2-aligned at least): each
# runs plain and under the guard, in fresh directories, with the same
# input; both must succeed and print exactly the same, and the guard must
# print no report.
#   guard_programs.sh HEAPKIT CASE WORKDIR
# Cases: python3 perl lua sqlite git cc1 isolation no_isolation addr2line stdin terminal twin.
# Exit 77 (CTest SKIP_RETURN_CODE) when the program is not installed
# (.ci/install-deps.sh installs them).
#
# Invariants: every workload prints only deterministic results (no
# addresses, timings, hash orders or dates), so any difference is the
# guard's; standard input is a file (not a terminal), so the tool's
# default two runs are what is tested.
set -u
tool=$1
case_=$2
work=$3
rm -rf "$work"
mkdir -p "$work/plain" "$work/guard"
cd "$work" || exit 1

# gone DIR: DIR no longer exists (the tool's temporary directory; up to
# 5 s allowed)
gone() {
    n=0
    while [ -e "$1" ] && [ $n -lt 50 ]; do sleep 0.1; n=$((n + 1)); done
    [ ! -e "$1" ] || { echo "FAIL: $1 left behind:"; ls -laR "$1"; exit 1; }
}

need() { command -v "$1" >/dev/null 2>&1 || { echo "SKIP: $1 not installed (.ci/install-deps.sh installs it)"; exit 77; }; }

# both [guard options --] CMD...: runs CMD in plain/ and under `heapkit
# guard OPTIONS -- CMD` in guard/ (standard input from ../in when it
# exists, else /dev/null), and compares.
both() {
    opts=""
    if [ "$1" = "--opts" ]; then opts=$2; shift 2; fi
    in=/dev/null
    [ -f in ] && in=$PWD/in
    (cd plain && "$@" <"$in" >../plain.out 2>../plain.err) \
        || { echo "FAIL: plain run of $* exited $?"; cat plain.err; exit 1; }
    # shellcheck disable=SC2086
    (cd guard && "$tool" guard $opts -- "$@" <"$in" >../guard.out 2>../guard.err)
    rc=$?
    # the note of a second run that ended early is no report: the overlay's
    # lower layer is the live working directory, so the second run can meet
    # the first's files (git's index.lock) and stop (docs/guard.md,
    # "Isolation"); shown, not failed on
    grep "ended early" guard.err | sed 's/^/note: /'
    grep -v "heapkit guard: the second run (guard page before each block) ended early" guard.err >guard.rep
    if [ $rc -ne 0 ] || grep -q "heapkit guard" guard.rep; then
        echo "FAIL: $* under heapkit guard $opts exited $rc:"; head -n 60 guard.err; exit 1
    fi
    if ! cmp -s plain.out guard.out; then
        echo "FAIL: $* printed something else under heapkit guard:"
        diff plain.out guard.out | head -n 40
        exit 1
    fi
    echo "same output ($(wc -c <plain.out) bytes): $(head -c 200 plain.out | head -n 3)"
}

case "$case_" in
python3)
    need python3
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
print(sum(1 for w in words if re.fullmatch(r"(w\d+)+", w)), sorted(set(len(w) for w in words))[:5])
print(list(itertools.islice(itertools.permutations(range(6)), 700, 703)))
PY
    py=python3
    [ -x /usr/bin/python3 ] && py=/usr/bin/python3 # the system's, not a version manager's shim
    both "$py" "$work/t.py"
    ;;
perl)
    need perl
    cat >t.pl <<'PL'
my %h; my @l;
for my $i (1 .. 20000) { my $k = "k" . ($i * 7919 % 10007); $h{$k} .= chr(65 + $i % 26); push @l, [$i, $k]; }
my @s = sort { length($h{$a}) <=> length($h{$b}) or $a cmp $b } keys %h;
my $n = grep { /^k1\d*7$/ } @s;
print scalar(@s), " ", $n, " ", join(",", @s[0 .. 4]), " ", scalar(@l), "\n";
PL
    # perl frees its interpreter at exit only with PERL_DESTRUCT_LEVEL=2
    # (what leak checkers need; docs/guard.md, "Leaks")
    PERL_DESTRUCT_LEVEL=2 both perl "$work/t.pl"
    ;;
lua)
    need lua5.4
    cat >t.lua <<'LUA'
local t = {}
for i = 1, 12000 do t[i] = string.rep(string.char(97 + i % 26), i % 37) .. i end
table.sort(t)
local m, s = {}, 0
for _, v in ipairs(t) do s = s + #v; m[#v % 11] = (m[#v % 11] or 0) + 1 end
local g = {}
for w in ("the quick brown fox jumps over the lazy dog "):rep(500):gmatch("%a+") do g[w] = (g[w] or 0) + 1 end
print("lua", s, m[0], m[10], g.the, collectgarbage("count") > 0)
LUA
    both lua5.4 "$work/t.lua"
    ;;
sqlite)
    need sqlite3
    cat >in <<'SQL'
create table t(a integer primary key, b text, c real);
with recursive n(x) as (select 1 union all select x + 1 from n where x < 20000)
  insert into t select x, printf('%d-%s', x, substr('abcdefghijklmnopqrstuvwxyz', 1 + x % 26, 1 + x % 17)), x / 7.0 from n;
create index tb on t(b);
select count(*), sum(length(b)), round(sum(c), 2) from t;
select b from t where b like '123%' order by b limit 5;
update t set b = b || 'x' where a % 3 = 0;
delete from t where a % 5 = 0;
select count(*), max(length(b)) from t;
vacuum;
select count(*) from t where b glob '*x';
SQL
    # a database file in the working directory: the second run writes its
    # own copy (the isolation), so the first sees only its own rows
    both sqlite3 t.db
    ;;
git)
    need git
    cat >t.sh <<'SH'
set -e
git init -q r
cd r
for i in 1 2 3 4 5 6; do seq $i 400 > f$i.txt; done
git add .
git commit -q -m first
sed -i 's/5/five/' f1.txt
git mv f2.txt g2.txt
git commit -q -a -m second
git log --format='%H %s'
git diff HEAD~1 --stat
git status --short
git gc -q
git fsck --no-progress 2>&1
git rev-list --count HEAD
SH
    # deterministic commits; git alone reads its configuration
    export HOME="$work" GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@example.org \
        GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@example.org GIT_AUTHOR_DATE=2020-01-01T00:00:00Z \
        GIT_COMMITTER_DATE=2020-01-01T00:00:00Z
    git config --global init.defaultBranch main
    # git leaves blocks unreachable at exit, and Valgrind agrees (on `git
    # add`: 112 bytes definitely and 67 indirectly lost, the guard's 179
    # bytes in 3 blocks): memory errors only here
    both --opts --no-leaks sh "$work/t.sh"
    ;;
cc1)
    need gcc
    cc1=$(gcc -print-prog-name=cc1)
    [ -x "$cc1" ] || { echo "SKIP: gcc's cc1 not found"; exit 77; }
    cat >t.c <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct item { char name[24]; int weight; struct item *next; };
static int cmp(const void *a, const void *b) { return (*(const struct item *const *)a)->weight - (*(const struct item *const *)b)->weight; }
int main(int argc, char **argv) {
    struct item *head = NULL, *v[64];
    int n = 0;
    for (int i = 0; i < 64; i++) {
        struct item *it = calloc(1, sizeof *it);
        snprintf(it->name, sizeof it->name, "item%d", i * 37 % 64);
        it->weight = (i * 7919) % 101 - argc;
        it->next = head; head = it; v[n++] = it;
    }
    qsort(v, (size_t)n, sizeof v[0], cmp);
    for (int i = 0; i < n; i++) if (strlen(v[i]->name) > 5) printf("%s %d\n", v[i]->name, v[i]->weight);
    while (head) { struct item *nx = head->next; free(head); head = nx; }
    return argv[0][0] == 0;
}
C
    gcc -E t.c -o t.i || exit 1
    # the compiler proper, at -O2, on the preprocessed file; the assembly must be the same
    both "$cc1" -quiet -O2 -fpreprocessed "$work/t.i" -o t.s
    cmp -s plain/t.s guard/t.s || { echo "FAIL: cc1 wrote other assembly under heapkit guard"; exit 1; }
    echo "same assembly ($(wc -l <plain/t.s) lines)"
    ;;
isolation)
    # the default's second run is isolated where the machine allows it (the
    # tool says when it does not: then SKIP, and no_isolation below covers
    # that path): writes to the working directory and /tmp land in an
    # overlay, writes elsewhere fail (read-only), an inherited descriptor
    # is closed, and it has no network
    need cc
    "$tool" guard -- true </dev/null 2>iso.err
    if grep -q "could not be isolated" iso.err; then echo "SKIP: $(cat iso.err)"; exit 77; fi
    mkdir -p outside
    tmpf=/tmp/heapkit-guard-isolation.$$
    rm -f "$tmpf"
    cat >n.c <<'C'
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
int main(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    fprintf(stderr, "side %s: inet socket %s\n", getenv("HEAPKIT_GUARD_SIDE"), s >= 0 ? "ok" : strerror(errno));
    int u = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {AF_UNIX, "/nonexistent-heapkit"};
    int c = connect(u, (struct sockaddr *)&a, sizeof a);
    fprintf(stderr, "side %s: connect %s\n", getenv("HEAPKIT_GUARD_SIDE"), c == 0 ? "ok" : strerror(errno));
    return 0;
}
C
    cc -o n n.c -include stdlib.h || exit 1
    (cd guard && "$tool" guard -- sh -c "echo line >> f; echo line >> $tmpf; echo line >> ../outside/f; echo line >&3; \
        echo \"\$HEAPKIT_GUARD_LOG\" >> logs" </dev/null 3>>"$work/outside/fd") || exit 1
    lines=$(cat guard/f | wc -l)
    tlines=$(cat "$tmpf" | wc -l)
    olines=$(cat outside/f | wc -l)
    flines=$(cat outside/fd | wc -l)
    rm -f "$tmpf"
    echo "working directory: $lines line(s), /tmp: $tlines, elsewhere: $olines, inherited descriptor: $flines"
    [ "$lines" = 1 ] && [ "$tlines" = 1 ] && [ "$olines" = 1 ] && [ "$flines" = 1 ] \
        || { echo "FAIL: the second run's writes reached the files"; exit 1; }
    # only the first run's log path was written; the tool's directory (the
    # logs; the second run's layers were on a tmpfs of its own namespace)
    # goes, and no mount of the second run's is left in ours
    [ "$(wc -l <guard/logs)" = 1 ] || { echo "FAIL: logs:"; cat guard/logs; exit 1; }
    gone "$(dirname "$(cat guard/logs)")"
    if grep -q heapkit-guard /proc/self/mountinfo; then
        echo "FAIL: the second run's mounts are in ours:"; grep heapkit-guard /proc/self/mountinfo; exit 1
    fi
    # the same with a second run that writes files and under-reads (a
    # report: the logs are read before the directory goes)
    cat >u.c <<'C'
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    long *v = malloc(4 * sizeof *v);
    FILE *f = fopen("made", "a");
    if (f) fclose(f);
    int r = (int)v[-1];
    free(v);
    return r & 0;
}
C
    cc -g -O0 -o u u.c || exit 1
    (cd guard && HEAPKIT_GUARD_LOG= "$tool" guard -- ../u </dev/null 2>../u.err)
    grep -q "heap underflow (read of 8 bytes)" u.err || { echo "FAIL: no under-read report:"; cat u.err; exit 1; }
    [ -e guard/made ] || { echo "FAIL: the first run's file is missing"; exit 1; }
    echo "second run's directory removed, no mount of its left; its under-read reported"
    "$tool" guard --sides both -- ./n </dev/null >n.out 2>&1
    grep -q "side end: inet socket ok" n.out && grep -q "side start: inet socket Permission denied" n.out \
        && grep -q "side start: connect Permission denied" n.out && grep -q "side end: connect No such file" n.out \
        || { echo "FAIL: the second run reached the network:"; cat n.out; exit 1; }
    echo "network: $(grep side n.out | tr '\n' ';')"
    ;;
no_isolation)
    # where the second run cannot be isolated (--no-isolate says so), the
    # default runs the program once and says in one line what is not
    # checked; --sides both runs it twice all the same and says so
    (cd guard && "$tool" guard --no-isolate -- sh -c 'echo line >> f; echo "$HEAPKIT_GUARD_LOG" > logs' \
        </dev/null 2>../one.err) || exit 1
    [ "$(cat guard/f | wc -l)" = 1 ] || { echo "FAIL: the default ran twice without isolation"; exit 1; }
    gone "$(dirname "$(cat guard/logs)")"
    (cd guard && HEAPKIT_GUARD_ISOLATE=0 "$tool" guard -- sh -c 'echo line >> g' </dev/null 2>../zero.err) || exit 1
    [ "$(cat guard/g | wc -l)" = 1 ] && grep -q "could not be isolated (HEAPKIT_GUARD_ISOLATE=0)" zero.err \
        || { echo "FAIL: HEAPKIT_GUARD_ISOLATE=0:"; cat guard/g zero.err; exit 1; }
    [ "$(grep -c 'heapkit guard:' one.err)" = 1 ] && grep -q "under-reads not checked: .* could not be isolated" one.err \
        || { echo "FAIL: no note (or more than one line):"; cat one.err; exit 1; }
    rm -f guard/f
    (cd guard && "$tool" guard --sides both --no-isolate -- sh -c 'echo line >> f' </dev/null 2>../two.err) || exit 1
    [ "$(cat guard/f | wc -l)" = 2 ] && grep -q "was not isolated" two.err \
        || { echo "FAIL: --sides both --no-isolate:"; cat guard/f two.err; exit 1; }
    echo "default: one run, note: $(cat one.err | cut -c1-90)...; --sides both: two runs"
    ;;
addr2line)
    # without libdw, file:line come from one addr2line per module for the
    # whole run: a run with three reports starts it once (a wrapper on PATH
    # counts the starts)
    need cc
    real=$(command -v addr2line) || { echo "SKIP: addr2line (binutils) not installed"; exit 77; }
    mkdir -p bin
    printf '#!/bin/sh\necho start >> "%s/starts"\nexec "%s" "$@"\n' "$work" "$real" >bin/addr2line
    chmod +x bin/addr2line
    cat >r.c <<'C'
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) void drop_twice(char *p) { free(p); free(p); }
__attribute__((noinline)) void drop_again(char *p) { free(p); free(p); }
__attribute__((noinline)) char *keep(void) { return malloc(40); }
static char *volatile sink;
int main(void) {
    drop_twice(malloc(16));
    drop_again(malloc(24));
    sink = keep();
    sink = NULL; /* the block is now unreachable: a leak report at exit */
    puts("r done");
    return 0;
}
C
    cc -g -O0 -fno-inline -o r r.c || exit 1
    PATH="$work/bin:$PATH" HEAPKIT_NO_LIBDW=1 "$tool" guard --sides trailing --no-abort -- ./r </dev/null >r.out 2>r.err
    reports=$(grep -c "== heapkit guard: \(double free\|leak:\)" r.err)
    starts=$(cat starts 2>/dev/null | wc -l)
    echo "$reports reports, addr2line started $starts time(s)"
    grep -q "in drop_twice at .*r.c:3" r.err && grep -q "in drop_again at .*r.c:4" r.err \
        && grep -q "in keep at .*r.c:5" r.err || { echo "FAIL: no file:line from addr2line"; cat r.err; exit 1; }
    [ "$reports" = 3 ] && [ "$starts" = 1 ] || { echo "FAIL: expected 3 reports and one addr2line"; cat r.err; exit 1; }
    # the server holds none of the program's descriptors: a pipe the
    # program made before the report still reaches its end once the
    # program closes its write end
    cat >p.c <<'C'
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(void) {
    int p[2];
    if (pipe(p) != 0) return 2;
    char *b = malloc(8);
    free(b);
    free(b); /* a report: the addr2line server starts now */
    close(p[1]);
    alarm(5);
    char c;
    puts(read(p[0], &c, 1) == 0 ? "eof ok" : "no eof");
    return 0;
}
C
    cc -g -O0 -o p p.c || exit 1
    PATH="$work/bin:$PATH" HEAPKIT_NO_LIBDW=1 "$tool" guard --sides trailing --no-abort -- ./p </dev/null >p.out 2>p.err
    grep -q "eof ok" p.out || { echo "FAIL: the addr2line server kept the program's pipe open"; cat p.out p.err; exit 1; }
    # with libdw.so.1 (Debian libdw1; no development header was needed to
    # build): file:line in process, no addr2line at all
    if ldconfig -p 2>/dev/null | grep -q "libdw.so.1 "; then
        rm -f starts
        PATH="$work/bin:$PATH" "$tool" guard --sides trailing --no-abort -- ./r </dev/null >r.out 2>r.err
        starts=$(cat starts 2>/dev/null | wc -l)
        echo "with libdw.so.1: addr2line started $starts time(s)"
        grep -q "in drop_twice at .*r.c:3" r.err && [ "$starts" = 0 ] \
            || { echo "FAIL: libdw.so.1 is installed but was not used"; cat r.err; exit 1; }
    fi
    ;;
stdin)
    # standard input from a pipe goes to both runs as it comes, not read to
    # its end first: a producer that never ends (yes) still lets the
    # program finish; a file is read by each run from its start
    out=$(yes | timeout 60 "$tool" guard -- head -n 3 | tr -d '\n')
    [ "$out" = yyy ] || { echo "FAIL: yes | heapkit guard -- head -n 3 printed '$out'"; exit 1; }
    sum=$(seq 1 20000 | "$tool" guard -- sh -c 'sum=0; while read -r x; do sum=$((sum + x)); done; echo $sum')
    [ "$sum" = 200010000 ] || { echo "FAIL: a pipe's 20000 lines summed to '$sum' under heapkit guard"; exit 1; }
    seq 1 20000 >in
    both sh -c 'sum=0; while read -r x; do sum=$((sum + x)); done; echo $sum'
    echo "yes | head: $out; a pipe's lines summed: $sum"
    ;;
terminal)
    # standard input a terminal (a pseudo-terminal from script(1)): the
    # first run has it, the second (isolated) reads /dev/null, and the
    # under-read only the second sees is reported all the same
    need cc
    need script
    "$tool" guard -- true </dev/null 2>iso.err
    if grep -q "could not be isolated" iso.err; then echo "SKIP: $(cat iso.err)"; exit 77; fi
    cat >u.c <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((noinline)) long before_start(const long *v) { return v[-1]; }
int main(void) {
    long *v = malloc(4 * sizeof *v);
    for (int i = 0; i < 4; i++) v[i] = i;
    printf("tty %d value %ld\n", isatty(0), before_start(v) != 0);
    free(v);
    return 0;
}
C
    cc -g -O0 -fno-inline -o u u.c || exit 1
    script -qec "'$tool' guard -- ./u" /dev/null </dev/null >t.out 2>&1
    grep -q "tty 1" t.out || { echo "FAIL: the first run did not have the terminal:"; cat t.out; exit 1; }
    grep -q "heap underflow (read of 8 bytes)" t.out && grep -q "before_start" t.out \
        || { echo "FAIL: the under-read was not reported with a terminal on standard input:"; cat t.out; exit 1; }
    echo "with a terminal: $(grep -c 'heapkit guard:' t.out) report(s), the first run's output: $(grep 'tty' t.out | tr -d '\r')"
    ;;
twin)
    # the default's second run forks from the first run's start (the
    # preload's constructor): it says so to the program in
    # HEAPKIT_GUARD_TWIN=0:second, so tw.c under-reads in the second run
    # only when it was forked; the first run and its children see no
    # variable (they fork nothing); the second run's children inherit its
    # side; standard input (a pipe, a file at an offset) reaches it; with
    # a thread already running at start the tool starts it itself
    need cc
    "$tool" guard -- true </dev/null 2>iso.err
    if grep -q "could not be isolated" iso.err; then echo "SKIP: $(cat iso.err)"; exit 77; fi
    cat >tw.c <<'C'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__attribute__((noinline)) long before_start(const long *v) { return v[-1]; }
static void *idle(void *a) { (void)a; for (;;) pause(); return 0; }
#ifdef THREAD_AT_START /* a library that starts a thread in its constructor */
__attribute__((constructor)) static void start_thread(void) { pthread_t t; pthread_create(&t, 0, idle, 0); }
#else
int main(int argc, char **argv) {
    const char *t = getenv("HEAPKIT_GUARD_TWIN");
    long *v = malloc(4 * sizeof *v);
    for (int i = 0; i < 4; i++) v[i] = i;
    int k = 0;
    if (argc > 1 && strcmp(argv[1], "read") == 0 && scanf("%d", &k) != 1) return 2;
    int second = t && strcmp(t, "0:second") == 0;
    printf("variable %s\n", t ? t : "unset");
    if (second || (argc > 1 && strcmp(argv[1], "always") == 0)) printf("%d\n", before_start(v) != 0);
    if (k) printf("%ld\n", v[k]); /* k = -1: before the block */
    char c;
    if (argc > 1 && strcmp(argv[1], "eof") == 0 && read(0, &c, 1) == 0) /* the end of its standard input */
        printf("%d\n", before_start(v) != 0);
    free(v);
    (void)idle;
    return 0;
}
#endif
C
    cc -g -O0 -fno-inline -o tw tw.c || exit 1
    cc -shared -fPIC -DTHREAD_AT_START -o libth.so tw.c -lpthread || exit 1
    under() { grep -q "heap underflow (read of 8 bytes)" "$1" || { echo "FAIL: $2: no under-read report:"; cat "$1"; exit 1; }; }
    "$tool" guard -- ./tw </dev/null >a.out 2>a.err
    under a.err "forked second run"
    grep -q before_start a.err && grep -qx "variable unset" a.out || { echo "FAIL: first run saw:"; cat a.out; exit 1; }
    HEAPKIT_GUARD_FORK=0 "$tool" guard -- ./tw </dev/null >b.out 2>b.err || { echo "FAIL: HEAPKIT_GUARD_FORK=0:"; cat b.err; exit 1; }
    grep -q "heapkit guard" b.err && { echo "FAIL: a second run started anew thinks it was forked:"; cat b.err; exit 1; }
    # children: the first run's see no variable, the second run's inherit it and its side
    "$tool" guard -- sh -c './tw; ./tw' </dev/null >c.out 2>c.err
    under c.err "a child of the second run"
    [ "$(grep -c 'variable unset' c.out)" = 2 ] || { echo "FAIL: a child of the first run saw:"; cat c.out; exit 1; }
    # standard input: a pipe, and a file the shell has read a line of
    printf -- '-1\n' | "$tool" guard -- ./tw read >/dev/null 2>d.err
    under d.err "standard input a pipe"
    printf '0\n-1\n' >two
    { read -r skip; "$tool" guard -- ./tw read; } <two >/dev/null 2>e.err
    under e.err "standard input a file at an offset"
    "$tool" guard -- ./tw eof </dev/null >/dev/null 2>h.err # a character device: the second run keeps it
    under h.err "standard input /dev/null"
    # a thread already running at start: the tool starts the second run (no variable), which still checks
    LD_PRELOAD=$PWD/libth.so "$tool" guard -- ./tw </dev/null >/dev/null 2>f.err \
        || { echo "FAIL: a thread at start:"; cat f.err; exit 1; }
    LD_PRELOAD=$PWD/libth.so "$tool" guard -- ./tw always </dev/null >/dev/null 2>g.err
    under g.err "a thread at start"
    echo "forked second run: under-reads reported (no variable in the first run or its children; pipe, file at an offset); thread at start: started by the tool, reported"
    ;;
*)
    echo "unknown case $case_"
    exit 2
    ;;
esac
exit 0
