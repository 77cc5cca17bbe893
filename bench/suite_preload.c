/*
 * bench/suite_preload.c - real programs under each allocator's preload
 * library: wall time, CPU time and peak RSS, medians over interleaved runs.
 *
 *  python_dict   python3: dict and list churn
 *  python_pool   python3: a 4-thread pool (concurrent.futures), dicts and strings
 *  sqlite        sqlite3: insert 200k rows in memory and index them twice
 *  lua           lua5.4: table and string churn
 *  perl          perl: hash churn
 *  gcc           gcc -O2 -S on a source of this project (src/zone_check.c)
 *
 * Allocators: glibc (no preload), libheapkit-malloc.so, and the peers'
 * malloc replacements (libmimalloc.so.2, libjemalloc.so.2,
 * libtcmalloc_minimal.so.4, from bench/install-peers.sh) when the harness
 * could load them.
 *
 * Invariants of this file:
 *  - every figure is a median over ctx->reps runs, interleaved (run k of
 *    every allocator, then run k+1), each program in a scratch directory
 *    removed at the end; a missing program is recorded as skipped;
 *  - a program's standard output under every allocator must equal its
 *    output under glibc (the workloads print deterministic results); a
 *    difference is recorded (output_differs) and reported, never hidden;
 *  - time_vs_X = the allocator's wall time / X's (< 1: faster than X);
 *  - --quick shrinks every workload (smoke run), the default is sized for
 *    about 0.2-0.6 s of CPU per run under glibc (some 60 s for the suite at
 *    5 runs on a quiet machine); CPU time (user + system) is recorded and
 *    summarised beside wall time, being steadier on a busy machine.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "harness.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define SUITE "preload"

static const char k_py_dict[] = "import sys\n"
                                "n, rounds = int(sys.argv[1]), 4\n"
                                "tot = 0\n"
                                "for r in range(rounds):\n"
                                "    d = {}\n"
                                "    for i in range(n):\n"
                                "        d[str(i) + 'k'] = [i] * (i % 16)\n"
                                "    l = [x for v in d.values() for x in v[:2]]\n"
                                "    s = {k: len(v) for k, v in d.items() if len(v) % 3}\n"
                                "    tot += len(l) + len(s)\n"
                                "    del d, l, s\n"
                                "print('python dict', tot)\n";

static const char k_py_pool[] = "import sys\n"
                                "from concurrent.futures import ThreadPoolExecutor\n"
                                "m = int(sys.argv[1])\n"
                                "def job(k):\n"
                                "    d = {}\n"
                                "    for i in range(m):\n"
                                "        d[(k, i)] = str(i) * (i % 8)\n"
                                "    l = sorted(d.values(), key=len)\n"
                                "    return sum(len(v) for v in l)\n"
                                "with ThreadPoolExecutor(4) as ex:\n"
                                "    print('python pool', sum(ex.map(job, range(32))))\n";

static const char k_lua[] = "local n = tonumber(arg[1])\n"
                            "local t = {}\n"
                            "local len = 0\n"
                            "for r = 1, 4 do\n"
                            "  local s = {}\n"
                            "  for i = 1, n do s[i] = tostring(i * r) .. 'k'; t[s[i]] = i end\n"
                            "  len = len + #table.concat(s, ',', 1, 1000)\n"
                            "  for k, v in pairs(t) do if v % 3 == 0 then t[k] = nil end end\n"
                            "end\n"
                            "collectgarbage()\n"
                            "local c = 0\n"
                            "for _ in pairs(t) do c = c + 1 end\n"
                            "print('lua', c, len)\n";

static const char k_perl[] = "my $n = $ARGV[0]; my $tot = 0;\n"
                             "for my $r (1..4) {\n"
                             "  my %h; $h{\"k$_\"} = 'v' x ($_ % 32) for 1..$n;\n"
                             "  $tot += length($h{$_}) for keys %h;\n"
                             "  delete $h{\"k$_\"} for grep { $_ % 2 } 1..$n;\n"
                             "  $tot += scalar(keys %h);\n"
                             "}\n"
                             "print \"perl $tot\\n\";\n";

enum { P_PY_DICT, P_PY_POOL, P_SQLITE, P_LUA, P_PERL, P_GCC, P_COUNT };
static const char *const k_prog[P_COUNT] = {"python_dict", "python_pool", "sqlite", "lua", "perl", "gcc"};

#define MAXA    6
#define MAXREPS 15

typedef struct alloc_spec {
    const char *name;
    const char *preload; /* NULL: none */
} alloc_spec;

static int write_file(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fputs(text, f);
    return fclose(f) == 0;
}

/* The executable behind `prog` on PATH (python3 may be a pyenv shim
 * script: the interpreter itself is what runs under each preload). */
static int find_program(const char *prog, char *out, size_t cap) {
    const char *path = getenv("PATH");
    if (!path) return 0;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, cap, "%s/%s", d, prog);
        if (access(out, X_OK) == 0) return 1;
    }
    return 0;
}

static int python_interpreter(char *out, size_t cap) {
    char sh[512];
    if (!find_program("python3", sh, sizeof sh)) return 0;
    char cmd[700];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import sys; print(sys.executable)' 2>/dev/null", sh);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    int ok = fgets(out, (int)cap, p) != NULL;
    pclose(p);
    if (!ok) return 0;
    out[strcspn(out, "\n")] = 0;
    return out[0] == '/' && access(out, X_OK) == 0;
}

typedef struct run_res {
    double wall, cpu, rss_mib;
    int ok;
} run_res;

/* Runs argv in dir with the preload (or none); stdout to `outfile`. */
static run_res run_prog(const char *dir, char *const argv[], const char *preload, const char *outfile) {
    run_res r = {0, 0, 0, 0};
    fflush(stdout);
    uint64_t t0 = hkb_now_ns();
    pid_t pid = fork();
    if (pid < 0) return r;
    if (pid == 0) {
        if (chdir(dir) != 0) _exit(126);
        if (preload)
            setenv("LD_PRELOAD", preload, 1);
        else
            unsetenv("LD_PRELOAD");
        int fd = open(outfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int nul = open("/dev/null", O_WRONLY);
        if (fd < 0 || nul < 0) _exit(126);
        dup2(fd, 1);
        dup2(nul, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid) return r;
    r.wall = (double)(hkb_now_ns() - t0) / 1e9;
    r.cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
            (double)ru.ru_stime.tv_usec / 1e6;
    r.rss_mib = (double)ru.ru_maxrss / 1024.0;
    r.ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    return r;
}

static int same_file(const char *a, const char *b) {
    FILE *f = fopen(a, "rb"), *g = fopen(b, "rb");
    int same = f && g;
    while (same) {
        int x = fgetc(f), y = fgetc(g);
        if (x != y) same = 0;
        if (x == EOF || y == EOF) break;
    }
    if (f) fclose(f);
    if (g) fclose(g);
    return same;
}

static void rm_tree(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "preload: could not remove %s\n", dir);
}

void hkb_suite_preload(hkb_ctx *ctx);
void hkb_suite_preload(hkb_ctx *ctx) {
    /* the allocators */
    alloc_spec al[MAXA];
    int na = 0;
    al[na++] = (alloc_spec){"glibc", NULL};
    const char *sp = hkb_shim_path();
    struct stat sst;
    if (sp && stat(sp, &sst) == 0)
        al[na++] = (alloc_spec){"heapkit-malloc.so", sp};
    else
        hkb_skip(SUITE, "all", "heapkit-malloc.so",
                 "libheapkit-malloc.so not built (set HKB_HEAPKIT_MALLOC)");
    static const struct {
        const char *name, *so;
    } k_so[] = {{"mimalloc", "libmimalloc.so.2"},
                {"jemalloc", "libjemalloc.so.2"},
                {"tcmalloc", "libtcmalloc_minimal.so.4"}};
    const hkb_allocator *peers;
    int np = hkb_peers(&peers);
    for (size_t i = 0; i < sizeof k_so / sizeof k_so[0]; i++)
        for (int j = 0; j < np; j++)
            if (!strcmp(peers[j].name, k_so[i].name)) al[na++] = (alloc_spec){k_so[i].name, k_so[i].so};
    int reps = ctx->reps < MAXREPS ? ctx->reps : MAXREPS;

    char dir[] = "/tmp/hkb-preload-XXXXXX";
    if (!mkdtemp(dir)) {
        hkb_skip(SUITE, "all", "all", "cannot create a scratch directory in /tmp");
        return;
    }
    if (!write_file(dir, "dict.py", k_py_dict) || !write_file(dir, "pool.py", k_py_pool) ||
        !write_file(dir, "churn.lua", k_lua) || !write_file(dir, "hash.pl", k_perl)) {
        hkb_skip(SUITE, "all", "all", "cannot write the workload scripts");
        rm_tree(dir);
        return;
    }
    char sql[1024];
    int rows = ctx->quick ? 20000 : 200000;
    snprintf(sql, sizeof sql,
             "create table t(a integer, b text, c real);\n"
             "begin;\n"
             "with recursive s(x) as (select 1 union all select x + 1 from s where x < %d)\n"
             "  insert into t select x, hex(randomblob(16)), x * 0.5 from s;\n"
             "commit;\n"
             "create index tb on t(b);\n"
             "create index tc on t(c);\n"
             "select count(*), sum(a), count(distinct length(b)) from t;\n",
             rows);
    if (!write_file(dir, "rows.sql", sql)) {
        rm_tree(dir);
        return;
    }
    char py[512], sq[512], lua[512], perl[512], gcc[512];
    int have[P_COUNT];
    have[P_PY_DICT] = have[P_PY_POOL] = python_interpreter(py, sizeof py);
    have[P_SQLITE] = find_program("sqlite3", sq, sizeof sq);
    have[P_LUA] = find_program("lua5.4", lua, sizeof lua);
    have[P_PERL] = find_program("perl", perl, sizeof perl);
    have[P_GCC] = find_program("gcc", gcc, sizeof gcc);
    char src[600], inc1[620], inc2[620];
#ifdef HKB_SOURCE_DIR
    snprintf(src, sizeof src, "%s/src/zone_check.c", HKB_SOURCE_DIR);
    snprintf(inc1, sizeof inc1, "-I%s/include", HKB_SOURCE_DIR);
    snprintf(inc2, sizeof inc2, "-I%s/src", HKB_SOURCE_DIR);
#else
    src[0] = inc1[0] = inc2[0] = 0;
#endif
    if (access(src, R_OK) != 0) have[P_GCC] = 0;
    const char *n_dict = ctx->quick ? "20000" : "80000", *n_pool = ctx->quick ? "2000" : "12000",
               *n_lua = ctx->quick ? "20000" : "60000", *n_perl = ctx->quick ? "20000" : "50000";
    char *argvs[P_COUNT][12] = {
        {py, "dict.py", (char *)n_dict, NULL},
        {py, "pool.py", (char *)n_pool, NULL},
        {sq, ":memory:", ".read rows.sql", NULL},
        {lua, "churn.lua", (char *)n_lua, NULL},
        {perl, "hash.pl", (char *)n_perl, NULL},
        {gcc, ctx->quick ? "-O0" : "-O2", "-D_GNU_SOURCE", inc1, inc2, "-S", "-o", "-", src, NULL},
    };
    printf("preload: %d runs per figure (medians, interleaved); wall time includes process start-up\n", reps);
    static double wall[P_COUNT][MAXA], cpu[P_COUNT][MAXA];
    memset(wall, 0, sizeof wall);
    memset(cpu, 0, sizeof cpu);
    for (int p = 0; p < P_COUNT; p++) {
        char what[200];
        snprintf(what, sizeof what, "%s under each preload: wall s (median), time_vs_X = time / X's time",
                 argvs[p][0] && argvs[p][0][0] ? argvs[p][0] : k_prog[p]);
        hkb_section(SUITE, k_prog[p], what);
        if (!have[p]) {
            hkb_skip(SUITE, k_prog[p], "all", "program not installed (.ci/install-deps.sh installs it)");
            continue;
        }
        double w[MAXA][MAXREPS], c[MAXA][MAXREPS], m[MAXA][MAXREPS];
        int okc[MAXA] = {0}, differs[MAXA] = {0};
        for (int k = 0; k < reps; k++)
            for (int a = 0; a < na; a++) {
                char out[64], ref[600], mine[600];
                snprintf(out, sizeof out, "out-%d.txt", a);
                run_res r = run_prog(dir, argvs[p], al[a].preload, out);
                if (!r.ok) continue;
                snprintf(ref, sizeof ref, "%s/out-0.txt", dir);
                snprintf(mine, sizeof mine, "%s/%s", dir, out);
                if (a > 0 && !same_file(ref, mine)) differs[a] = 1;
                w[a][okc[a]] = r.wall;
                c[a][okc[a]] = r.cpu;
                m[a][okc[a]] = r.rss_mib;
                okc[a]++;
            }
        for (int a = 0; a < na; a++) {
            if (!okc[a]) {
                hkb_skip(SUITE, k_prog[p], al[a].name, "the program failed under this preload");
                continue;
            }
            wall[p][a] = hkb_median(w[a], okc[a]);
            hkb_record(SUITE, k_prog[p], al[a].name, "wall_s", wall[p][a], "s");
            cpu[p][a] = hkb_median(c[a], okc[a]);
            hkb_record(SUITE, k_prog[p], al[a].name, "cpu_s", cpu[p][a],
                       "s (user + system, the program and its children)");
            hkb_record(SUITE, k_prog[p], al[a].name, "peak_rss_MiB", hkb_median(m[a], okc[a]),
                       "MiB (ru_maxrss)");
            if (differs[a]) {
                hkb_record(SUITE, k_prog[p], al[a].name, "output_differs", 1,
                           "(stdout differs from glibc's)");
                printf("preload: %s printed something else under %s than under glibc\n", k_prog[p],
                       al[a].name);
            }
        }
        for (int a = 1; a < na; a++) {
            if (wall[p][a] <= 0) continue;
            if (wall[p][0] > 0)
                hkb_record(SUITE, k_prog[p], al[a].name, "time_vs_glibc", wall[p][a] / wall[p][0],
                           "x (time / glibc's time)");
            for (int b = 1; b < na; b++)
                if (!strcmp(al[b].name, "mimalloc") && b != a && wall[p][b] > 0)
                    hkb_record(SUITE, k_prog[p], al[a].name, "time_vs_mimalloc", wall[p][a] / wall[p][b],
                               "x (time / mimalloc's time)");
        }
        hkb_skip_missing(SUITE, k_prog[p]);
    }
    rm_tree(dir);
    /* the summary table */
    int mi = -1;
    for (int a = 0; a < na; a++)
        if (!strcmp(al[a].name, "mimalloc")) mi = a;
    /* the summary tables: wall time, then CPU time (the steadier figure on a busy machine) */
    for (int tab = 0; tab < 2; tab++) {
        double(*v)[MAXA] = tab ? cpu : wall;
        printf("\n== preload / summary: %s s (time vs glibc, vs mimalloc)\n   %-12s", tab ? "CPU" : "wall",
               "program");
        for (int a = 0; a < na; a++) printf(" %24s", al[a].name);
        printf("\n");
        for (int p = 0; p < P_COUNT; p++) {
            printf("   %-12s", k_prog[p]);
            for (int a = 0; a < na; a++) {
                char cell[64];
                if (v[p][a] <= 0)
                    snprintf(cell, sizeof cell, "-");
                else if (mi >= 0 && v[p][mi] > 0 && v[p][0] > 0)
                    snprintf(cell, sizeof cell, "%.3f (%.2f, %.2f)", v[p][a], v[p][a] / v[p][0],
                             v[p][a] / v[p][mi]);
                else if (v[p][0] > 0)
                    snprintf(cell, sizeof cell, "%.3f (%.2f)", v[p][a], v[p][a] / v[p][0]);
                else
                    snprintf(cell, sizeof cell, "%.3f", v[p][a]);
                printf(" %24s", cell);
            }
            printf("\n");
        }
    }
    fflush(stdout);
}
