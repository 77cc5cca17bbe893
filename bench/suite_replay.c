/*
 * bench/suite_replay.c - the `replay` suite: three real programs (python3
 * with PYTHONMALLOC=malloc, sqlite3 on an in-memory database, a gcc
 * compile: the compiler proper, cc1, run directly, since heaptrack does not
 * follow a driver's children) are run plain, under `heapkit record` and
 * under heaptrack (the recording overhead side by side), then each recorded
 * trace is replayed on every allocator with `heapkit replay --json` and its
 * figures recorded. Every program is started directly (no shell between),
 * so both recorders see the same process.
 *
 * The tools are found next to this build's heapkit tool (build/heapkit);
 * programs or tools that are missing are recorded as skipped with the
 * reason, never measured with a stand-in.
 */
#define _GNU_SOURCE 1
#include "harness.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SR_SUITE "replay"

static char sr_dir[PATH_MAX], sr_tool[PATH_MAX + 16], sr_work[PATH_MAX + 16];

static int sr_have(const char *prog) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}

/* Wall time of a shell command in ns; -1 when it failed. */
static double sr_time(const char *cmd) {
    uint64_t t0 = hkb_now_ns();
    int rc = system(cmd);
    uint64_t t1 = hkb_now_ns();
    if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0) return -1;
    return (double)(t1 - t0);
}

static double sr_median_time(const char *cmd, int reps) {
    double v[16];
    int n = 0;
    for (int i = 0; i < reps && i < 16; i++) {
        double t = sr_time(cmd);
        if (t < 0) return -1;
        v[n++] = t;
    }
    return hkb_median(v, n);
}

/* The largest file named base.* in the work directory (a child's trace). */
static int sr_largest_child(const char *base, char *out, size_t n) {
    DIR *d = opendir(sr_work);
    if (!d) return 0;
    struct dirent *de;
    off_t best = -1;
    size_t bl = strlen(base);
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, base, bl) != 0 || de->d_name[bl] != '.') continue;
        char p[PATH_MAX * 2];
        snprintf(p, sizeof p, "%s/%s", sr_work, de->d_name);
        struct stat st;
        if (stat(p, &st) == 0 && st.st_size > best) {
            best = st.st_size;
            snprintf(out, n, "%s", p);
        }
    }
    closedir(d);
    return best >= 0;
}

/* Reads `heapkit replay --json` output back into the bench's records. */
static void sr_import(const char *json, const char *workload) {
    FILE *f = fopen(json, "r");
    if (!f) {
        hkb_skip(SR_SUITE, workload, "all", "heapkit replay wrote no results");
        return;
    }
    char line[2048];
    while (fgets(line, sizeof line, f)) {
        char alloc[64], metric[64], unit[64], note[512];
        const char *a = strstr(line, "\"allocator\": \""), *m = strstr(line, "\"metric\": \"");
        const char *v = strstr(line, "\"value\": "), *u = strstr(line, "\"unit\": \"");
        if (!a || !m || !v) continue;
        if (sscanf(a + 14, "%63[^\"]", alloc) != 1 || sscanf(m + 11, "%63[^\"]", metric) != 1) continue;
        if (!strcmp(metric, "skipped")) {
            const char *nt = strstr(line, "\"note\": \"");
            if (!nt || sscanf(nt + 9, "%511[^\"]", note) != 1) snprintf(note, sizeof note, "not loaded");
            hkb_skip(SR_SUITE, workload, alloc, note);
            continue;
        }
        double val = atof(v + 9);
        if (!u || sscanf(u + 9, "%63[^\"]", unit) != 1) unit[0] = 0;
        char full[96];
        snprintf(full, sizeof full, "replay_%s", metric);
        hkb_record(SR_SUITE, workload, alloc, full, val, unit);
    }
    fclose(f);
}

typedef struct sr_workload {
    const char *name;
    const char *prog; /* must be in PATH */
    const char *cmd;  /* shell command (run in sr_work); %s: nothing */
    int children;     /* the trace to replay is a child's (gcc: cc1) */
} sr_workload;

void hkb_suite_replay(hkb_ctx *ctx);
void hkb_suite_replay(hkb_ctx *ctx) {
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        hkb_skip(SR_SUITE, "all", "all", "cannot read /proc/self/exe");
        return;
    }
    self[len] = 0;
    *strrchr(self, '/') = 0;
    char *up = strrchr(self, '/');
    if (up) *up = 0;
    snprintf(sr_dir, sizeof sr_dir, "%s", self);
    snprintf(sr_tool, sizeof sr_tool, "%s/heapkit", sr_dir);
    snprintf(sr_work, sizeof sr_work, "%s/bench/replay", sr_dir);
    mkdir(sr_work, 0755);
    if (access(sr_tool, X_OK) != 0) {
        hkb_skip(SR_SUITE, "all", "all", "build/heapkit not built");
        return;
    }
    /* the workloads' inputs */
    char src[PATH_MAX * 2], sql[PATH_MAX * 2], py[PATH_MAX * 2];
    snprintf(src, sizeof src, "%s/unit.c", sr_work);
    snprintf(sql, sizeof sql, "%s/load.sql", sr_work);
    snprintf(py, sizeof py, "%s/work.py", sr_work);
    int scale = ctx->quick ? 1 : 3;
    FILE *f = fopen(src, "w");
    if (f) {
        for (int i = 0; i < 150 * scale; i++)
            fprintf(f,
                    "struct s%d { int a[%d]; double d; };\nstatic int f%d(struct s%d *p, int n) { int t = 0; "
                    "for (int i = 0; i < n; i++) t += p->a[i %% %d] * %d; return t; }\n"
                    "int g%d(void) { struct s%d x = {{0}}; return f%d(&x, %d); }\n",
                    i, 1 + i % 9, i, i, 1 + i % 9, i, i, i, i, i);
        fclose(f);
    }
    f = fopen(sql, "w");
    if (f) {
        fprintf(f,
                "create table t(id integer primary key, name text, v real);\n"
                "with recursive c(x) as (select 1 union all select x + 1 from c where x < %d)\n"
                "insert into t select x, printf('name-%%08d-%%s', x, hex(randomblob(12))), x * 0.5 from c;\n"
                "create index ti on t(name);\n"
                "select count(*), sum(length(name)) from t where name like 'name-0000%%';\n"
                "select name from t order by v desc limit 3;\n",
                25000 * scale);
        fclose(f);
    }
    f = fopen(py, "w");
    if (f) {
        fprintf(f,
                "import json\n"
                "d = {str(i): [i, str(i) * 3, {'k': i}] for i in range(%d)}\n"
                "s = json.dumps(d)\n"
                "e = json.loads(s)\n"
                "words = sorted(set(s.split(',')))\n"
                "print(len(s), len(e), len(words))\n",
                30000 * scale);
        fclose(f);
    }
    char c_py[PATH_MAX * 3], c_sql[PATH_MAX * 3], c_gcc[PATH_MAX * 6], cc1[PATH_MAX] = "cc1";
    FILE *pp = popen("gcc -print-prog-name=cc1 2>/dev/null", "r");
    if (pp) {
        if (fgets(cc1, sizeof cc1, pp)) cc1[strcspn(cc1, "\n")] = 0;
        pclose(pp);
    }
    snprintf(c_py, sizeof c_py, "/usr/bin/python3 %s", py);
    snprintf(c_sql, sizeof c_sql, "sqlite3 :memory: .read\\ %s", sql);
    snprintf(c_gcc, sizeof c_gcc, "%s -quiet -O2 %s -o %s/unit.s", cc1, src, sr_work);
    const sr_workload wl[] = {
        {"python3", "/usr/bin/python3", c_py, 0},
        {"sqlite3", "sqlite3", c_sql, 0},
        {"gcc", cc1, c_gcc, 0},
    };
    setenv("PYTHONMALLOC", "malloc", 1); /* python3: every object through malloc */
    int heaptrack = sr_have("heaptrack");
    int reps = ctx->reps > 5 ? 5 : ctx->reps;
    for (size_t w = 0; w < sizeof wl / sizeof wl[0]; w++) {
        const sr_workload *x = &wl[w];
        hkb_section(SR_SUITE, x->name,
                    "recording overhead (wall time) and the trace replayed on each allocator");
        if (!sr_have(x->prog)) {
            hkb_skip(SR_SUITE, x->name, "all",
                     "program not installed (.ci/install-deps.sh installs sqlite3)");
            continue;
        }
        char cmd[PATH_MAX * 16], trace[PATH_MAX * 2], json[PATH_MAX * 2];
        snprintf(cmd, sizeof cmd, "%s >/dev/null 2>&1", x->cmd);
        double plain = sr_median_time(cmd, reps);
        if (plain <= 0) {
            hkb_skip(SR_SUITE, x->name, "all", "the program failed");
            continue;
        }
        hkb_record(SR_SUITE, x->name, "plain", "wall_time", plain / 1e6, "ms");
        snprintf(trace, sizeof trace, "%s/%s.hkt", sr_work, x->name);
        snprintf(cmd, sizeof cmd, "rm -f %s %s.*; %s record -q -o %s -- %s >/dev/null 2>&1", trace, trace,
                 sr_tool, trace, x->cmd);
        double rec = sr_median_time(cmd, reps);
        if (rec > 0) {
            hkb_record(SR_SUITE, x->name, "heapkit-record", "wall_time", rec / 1e6, "ms");
            hkb_record(SR_SUITE, x->name, "heapkit-record", "overhead_vs_plain", rec / plain, "ratio");
        } else {
            hkb_skip(SR_SUITE, x->name, "heapkit-record", "heapkit record failed");
        }
        if (heaptrack) {
            snprintf(cmd, sizeof cmd, "cd %s && rm -f ht.%s.*; heaptrack -o %s/ht.%s %s >/dev/null 2>&1",
                     sr_work, x->name, sr_work, x->name, x->cmd);
            double ht = sr_median_time(cmd, reps);
            if (ht > 0) {
                hkb_record(SR_SUITE, x->name, "heaptrack", "wall_time", ht / 1e6, "ms");
                hkb_record(SR_SUITE, x->name, "heaptrack", "overhead_vs_plain", ht / plain, "ratio");
                if (rec > 0)
                    hkb_record(SR_SUITE, x->name, "heapkit-record", "ratio_vs_heaptrack", rec / ht, "ratio");
            } else {
                hkb_skip(SR_SUITE, x->name, "heaptrack", "heaptrack failed");
            }
        } else {
            hkb_skip(SR_SUITE, x->name, "heaptrack",
                     "not installed (bench/install-peers.sh installs heaptrack)");
        }
        if (rec <= 0) continue;
        /* the trace to replay: the program's own (or its largest child's) */
        char best[PATH_MAX * 2];
        if (!x->children || !sr_largest_child(strrchr(trace, '/') + 1, best, sizeof best))
            snprintf(best, sizeof best, "%s", trace);
        snprintf(json, sizeof json, "%s/%s.json", sr_work, x->name);
        snprintf(cmd, sizeof cmd, "%s replay %s --reps %d --json %s", sr_tool, best, reps, json);
        printf("   %s\n", cmd);
        fflush(stdout);
        if (system(cmd) != 0) {
            hkb_skip(SR_SUITE, x->name, "all", "heapkit replay failed");
            continue;
        }
        sr_import(json, x->name);
    }
}
