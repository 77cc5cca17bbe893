/*
 * bench/suite_guard.c - the guard heap against the other debug heaps, on
 * whole programs.
 *
 * Each workload of bench/guard_workload.c (built next to the heapkit tool)
 * runs as a child process under:
 *   glibc            plain, the baseline
 *   heapkit-guard    LD_PRELOAD=libheapkit-guard.so, default settings (every
 *                    allocation guarded, leak check at exit)
 *   heapkit-sample   the same with HEAPKIT_GUARD_SAMPLE=1000 (production mode)
 *   efence           LD_PRELOAD=libefence.so (Debian electric-fence)
 *   duma             LD_PRELOAD=libduma.so (Debian duma)
 *   valgrind         valgrind --tool=memcheck
 * and we record wall time and peak RSS (VmHWM, printed by the program at the
 * end of its work; wait4's ru_maxrss would include the forking parent),
 * medians of the repetitions, and the ratios against glibc. A tool that is
 * not installed, crashes, exits non-zero or exceeds the time limit is
 * recorded with hkb_skip and the reason: never a made-up figure.
 *
 * Valgrind, Electric Fence and DUMA are slow: they get at most 3
 * repetitions (the figure is still a median) but the same sizes as the
 * others. Repetitions interleave the tools, so load from other processes
 * hits all of them alike. Each run is killed after 60 s (30 s with --quick).
 * HKB_GUARD_ONLY=corpus (or workloads) runs one section only;
 * HKB_GUARD_CORPUS_VERBOSE=1 prints each corpus program's median per tool.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SG_SUITE "guard"

typedef struct sg_tool {
    const char *name;
    const char *preload; /* LD_PRELOAD value, or NULL */
    const char *env[4];  /* extra NAME=VALUE, NULL-terminated */
    int valgrind;        /* prefix with valgrind */
    const char *missing; /* why it cannot run, or NULL */
} sg_tool;

typedef struct sg_result {
    int ok;
    int status; /* exit status, 128 + signal when killed by one (corpus runs) */
    double ms, rss_kb;
    char why[200];
} sg_result;

static char sg_dir[PATH_MAX];
static char sg_workload[PATH_MAX + 32];
static char sg_guard_lib[PATH_MAX + 32];
static char sg_valgrind[PATH_MAX];

static int sg_find_in_path(const char *name, char *out, size_t n) {
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    while (*path) {
        const char *e = strchr(path, ':');
        size_t len = e ? (size_t)(e - path) : strlen(path);
        snprintf(out, n, "%.*s/%s", (int)len, path, name);
        if (access(out, X_OK) == 0) return 1;
        if (!e) break;
        path = e + 1;
    }
    out[0] = 0;
    return 0;
}

static const char *sg_first_readable(const char *const *paths) {
    for (int i = 0; paths[i]; i++)
        if (access(paths[i], R_OK) == 0) return paths[i];
    return NULL;
}

/* Runs argv with the tool's environment; waits at most timeout_s. With
 * prog (a corpus program, no arguments) any exit counts as a run: the
 * status says whether the tool reported. */
static sg_result sg_run_prog(const sg_tool *t, const char *prog, const char *workload, long n,
                             double timeout_s) {
    sg_result r;
    memset(&r, 0, sizeof r);
    char nbuf[32];
    snprintf(nbuf, sizeof nbuf, "%ld", n);
    char *argv[16];
    int a = 0;
    if (t->valgrind) {
        argv[a++] = sg_valgrind;
        argv[a++] = (char *)"--tool=memcheck";
        argv[a++] = (char *)"-q";
        argv[a++] = (char *)"--error-exitcode=99";
        if (prog) {
            argv[a++] = (char *)"--leak-check=full";
            argv[a++] = (char *)"--errors-for-leak-kinds=definite";
        }
    }
    if (prog) {
        argv[a++] = (char *)prog;
    } else {
        argv[a++] = sg_workload;
        argv[a++] = (char *)workload;
        argv[a++] = nbuf;
    }
    argv[a] = NULL;

    char outpath[] = "/tmp/hkb_guard_XXXXXX";
    int outfd = mkstemp(outpath);
    if (outfd < 0) {
        snprintf(r.why, sizeof r.why, "cannot create a temp file: %s", strerror(errno));
        return r;
    }
    unlink(outpath);

    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);
    uint64_t t0 = hkb_now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        close(outfd);
        snprintf(r.why, sizeof r.why, "fork failed: %s", strerror(errno));
        return r;
    }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        dup2(outfd, 1);
        dup2(outfd, 2);
        unsetenv("LD_PRELOAD");
        if (t->preload) setenv("LD_PRELOAD", t->preload, 1);
        for (int i = 0; t->env[i]; i++) putenv((char *)t->env[i]);
        execv(argv[0], argv);
        _exit(127);
    }
    struct timespec to;
    to.tv_sec = (time_t)timeout_s;
    to.tv_nsec = (long)((timeout_s - (double)to.tv_sec) * 1e9);
    int status = 0, timed_out = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    for (;;) {
        pid_t w = wait4(pid, &status, WNOHANG, &ru);
        if (w == pid) break;
        uint64_t now = hkb_now_ns();
        double left = timeout_s - (double)(now - t0) / 1e9;
        if (left <= 0) {
            kill(pid, SIGKILL);
            wait4(pid, &status, 0, &ru);
            timed_out = 1;
            break;
        }
        to.tv_sec = (time_t)left;
        to.tv_nsec = (long)((left - (double)to.tv_sec) * 1e9);
        sigtimedwait(&chld, NULL, &to);
    }
    uint64_t t1 = hkb_now_ns();
    sigprocmask(SIG_SETMASK, &old, NULL);

    /* the program's own peak RSS line (see guard_workload.c) */
    double hwm = -1;
    {
        static char all[1 << 16];
        ssize_t got = pread(outfd, all, sizeof all - 1, 0);
        all[got > 0 ? got : 0] = 0;
        const char *h = strstr(all, "vmhwm_kb ");
        if (h) hwm = atof(h + 9);
    }
    /* last line of the output, for failure reasons */
    char tail[160] = "";
    off_t size = lseek(outfd, 0, SEEK_END);
    if (size > 0) {
        off_t from = size > (off_t)sizeof tail - 1 ? size - (off_t)sizeof tail + 1 : 0;
        ssize_t got = pread(outfd, tail, sizeof tail - 1, from);
        tail[got > 0 ? got : 0] = 0;
        for (char *c = tail; *c; c++)
            if (*c == '\n' || *c == '"') *c = ' ';
    }
    close(outfd);

    r.status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    if (prog && !timed_out) {
        r.ok = 1;
        r.ms = (double)(t1 - t0) / 1e6;
        return r;
    }
    if (timed_out) {
        snprintf(r.why, sizeof r.why, "timed out after %.0f s (killed)", timeout_s);
    } else if (WIFSIGNALED(status)) {
        snprintf(r.why, sizeof r.why, "crashed with signal %d (%s): %.100s", WTERMSIG(status),
                 strsignal(WTERMSIG(status)), tail);
    } else if (WEXITSTATUS(status) != 0) {
        snprintf(r.why, sizeof r.why, "exited with status %d: %.100s", WEXITSTATUS(status), tail);
    } else {
        r.ok = 1;
        r.ms = (double)(t1 - t0) / 1e6;
        r.rss_kb = hwm >= 0 ? hwm : (double)ru.ru_maxrss;
    }
    return r;
}

static sg_result sg_run(const sg_tool *t, const char *workload, long n, double timeout_s) {
    return sg_run_prog(t, NULL, workload, n, timeout_s);
}

/* The bug corpus (tests/guard_corpus, built next to the tool): every
 * program under every tool, repetitions interleaved program by program and
 * tool by tool, so load from other processes hits all tools alike. Per
 * tool: the whole corpus's wall time (the sum of each program's median),
 * the median run of a correct program (no report) and of a buggy one (a
 * report), how many buggy programs it flagged (non-zero status or a
 * signal) and how many correct ones it flagged wrongly. Valgrind runs once
 * per program in quick mode (seconds a run); the others 3 times. */
#define SG_CORPUS_MAX 40
static void sg_corpus(hkb_ctx *ctx, const sg_tool *tools, int ntools) {
    static const char *const progs[] = {"overflow_write",
                                        "overflow_read",
                                        "overflow_pad_write",
                                        "overflow_pad_read",
                                        "overflow_aligned_pad",
                                        "underflow_write",
                                        "underflow_read",
                                        "uaf_read",
                                        "uaf_write",
                                        "uaf_realloc",
                                        "overflow_strcpy",
                                        "double_free",
                                        "invalid_free_stack",
                                        "invalid_free_global",
                                        "invalid_free_wild",
                                        "interior_free",
                                        "realloc_after_free",
                                        "leak",
                                        "leak_dead_stack",
                                        "leak_thread_dead_stack",
                                        "pad_live_under",
                                        "pad_live_over",
                                        "uninit_read",
                                        "ok_basic",
                                        "ok_list",
                                        "ok_threads",
                                        "ok_uninit",
                                        "ok_fork",
                                        "ok_stdio",
                                        "ok_odd_sizes",
                                        NULL};
    const char *wname = "corpus";
    hkb_section(SG_SUITE, wname,
                "the bug corpus (tests/guard_corpus): one program per bug class and correct ones, whole-run "
                "wall time; detected = buggy programs flagged, false = correct programs flagged");
    int reps = ctx->quick ? 3 : 5;
    static double m[8][SG_CORPUS_MAX][8];
    static int got[8][SG_CORPUS_MAX], flagged[8][SG_CORPUS_MAX];
    memset(got, 0, sizeof got);
    memset(flagged, 0, sizeof flagged);
    if (ntools > 8) ntools = 8;
    for (int r = 0; r < reps; r++)
        for (int i = 0; progs[i] && i < SG_CORPUS_MAX; i++) {
            char path[PATH_MAX + 64];
            snprintf(path, sizeof path, "%s/guard_corpus/guard_corpus_%s", sg_dir, progs[i]);
            if (access(path, X_OK) != 0) continue;
            for (int ti = 0; ti < ntools; ti++) {
                const sg_tool *t = &tools[ti];
                if (t->missing || (t->valgrind && ctx->quick && r > 0)) continue;
                sg_result res = sg_run_prog(t, path, NULL, 0, ctx->quick ? 30.0 : 60.0);
                if (!res.ok) continue;
                m[ti][i][got[ti][i]++] = res.ms;
                flagged[ti][i] = res.status != 0;
            }
        }
    for (int ti = 0; ti < ntools; ti++) {
        const sg_tool *t = &tools[ti];
        if (t->missing) {
            hkb_skip(SG_SUITE, wname, t->name, t->missing);
            continue;
        }
        double total = 0, ok_ms[SG_CORPUS_MAX], bug_ms[SG_CORPUS_MAX];
        int nok = 0, nbug = 0, detected = 0, falsep = 0;
        for (int i = 0; progs[i] && i < SG_CORPUS_MAX; i++) {
            if (!got[ti][i]) continue;
            double med = hkb_median(m[ti][i], got[ti][i]);
            total += med;
            if (strncmp(progs[i], "ok_", 3) == 0) {
                ok_ms[nok++] = med;
                falsep += flagged[ti][i];
            } else {
                bug_ms[nbug++] = med;
                detected += flagged[ti][i];
            }
            if (ctx->quick && getenv("HKB_GUARD_CORPUS_VERBOSE"))
                fprintf(stderr, "corpus %-14s %-24s %8.2f ms %s\n", t->name, progs[i], med,
                        flagged[ti][i] ? "flagged" : "");
        }
        hkb_record(SG_SUITE, wname, t->name, "corpus_wall_ms", total, "ms (sum of each program's median)");
        if (nok)
            hkb_record(SG_SUITE, wname, t->name, "run_no_report_ms", hkb_median(ok_ms, nok), "ms (median)");
        if (nbug)
            hkb_record(SG_SUITE, wname, t->name, "run_buggy_ms", hkb_median(bug_ms, nbug), "ms (median)");
        hkb_record(SG_SUITE, wname, t->name, "detected", detected, "buggy programs flagged");
        hkb_record(SG_SUITE, wname, t->name, "buggy_programs", nbug, "buggy programs run");
        hkb_record(SG_SUITE, wname, t->name, "false_reports", falsep, "correct programs flagged");
    }
}

typedef struct sg_workload_spec {
    const char *name, *what;
    long n, n_quick;
} sg_workload_spec;

void hkb_suite_guard(hkb_ctx *ctx);
void hkb_suite_guard(hkb_ctx *ctx) {
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        hkb_skip(SG_SUITE, "all", "all", "cannot read /proc/self/exe");
        return;
    }
    self[len] = 0;
    *strrchr(self, '/') = 0; /* build/bench */
    char *up = strrchr(self, '/');
    if (up) *up = 0; /* build */
    snprintf(sg_dir, sizeof sg_dir, "%s", self);
    snprintf(sg_workload, sizeof sg_workload, "%s/guard_workload", sg_dir);
    snprintf(sg_guard_lib, sizeof sg_guard_lib, "%s/libheapkit-guard.so", sg_dir);
    if (access(sg_workload, X_OK) != 0) {
        hkb_skip(SG_SUITE, "all", "all", "guard_workload not built (cmake/modules/guard.cmake builds it)");
        return;
    }
    static const char *const efence_paths[] = {"/usr/lib/libefence.so.0", "/usr/lib/libefence.so",
                                               "/usr/lib/x86_64-linux-gnu/libefence.so.0", NULL};
    static const char *const duma_paths[] = {"/usr/lib/libduma.so.0", "/usr/lib/libduma.so",
                                             "/usr/lib/x86_64-linux-gnu/libduma.so.0", NULL};
    const char *efence = sg_first_readable(efence_paths);
    const char *duma = sg_first_readable(duma_paths);
    int have_vg = sg_find_in_path("valgrind", sg_valgrind, sizeof sg_valgrind);
    int have_guard = access(sg_guard_lib, R_OK) == 0;

    sg_tool tools[] = {
        {"glibc", NULL, {NULL}, 0, NULL},
        {"heapkit-guard",
         sg_guard_lib,
         {"HEAPKIT_GUARD_LOG=/dev/null", NULL},
         0,
         have_guard ? NULL : "libheapkit-guard.so not built"},
        {"heapkit-sample",
         sg_guard_lib,
         {"HEAPKIT_GUARD_SAMPLE=1000", "HEAPKIT_GUARD_LOG=/dev/null", NULL},
         0,
         have_guard ? NULL : "libheapkit-guard.so not built"},
        {"efence",
         efence,
         {"EF_ALLOW_MALLOC_0=1", NULL},
         0,
         efence ? NULL : "libefence.so not installed (apt-get install electric-fence)"},
        {"duma",
         duma,
         {"DUMA_DISABLE_BANNER=1", NULL},
         0,
         duma ? NULL : "libduma.so not installed (apt-get install duma)"},
        {"valgrind", NULL, {NULL}, 1, have_vg ? NULL : "valgrind not installed"},
    };
    const int ntools = (int)(sizeof tools / sizeof tools[0]);

    sg_workload_spec specs[] = {
        {"mixed", "200,000 mixed-size allocations (8 B..4 KiB), 1,000 live, reallocs", 200000, 50000},
        {"churn", "short-lived small blocks, 16 live", 200000, 50000},
        {"live", "live 64-byte blocks at once (memory per live block)", 20000, 5000},
        {"strings", "string table: strdup, realloc growth, replacements", 50000, 20000},
    };
    double timeout = ctx->quick ? 30.0 : 60.0;
    /* HKB_GUARD_ONLY=corpus|workloads runs one of the two sections (for
     * quick measurements; the full suite runs both) */
    const char *only = getenv("HKB_GUARD_ONLY");
    if (!only || strcmp(only, "workloads") != 0) sg_corpus(ctx, tools, ntools);
    if (only && strcmp(only, "corpus") == 0) return;

    for (size_t w = 0; w < sizeof specs / sizeof specs[0]; w++) {
        const sg_workload_spec *sp = &specs[w];
        long n = ctx->quick ? sp->n_quick : sp->n;
        char wname[64], what[200];
        snprintf(wname, sizeof wname, "%s_%ld", sp->name, n);
        snprintf(what, sizeof what, "%s; wall time and peak RSS of the whole program", sp->what);
        hkb_section(SG_SUITE, wname, what);
        double base_ms = 0, base_rss = 0;
        /* Repetitions interleave the tools (glibc, guard, sample, efence,
         * duma, valgrind, glibc, guard, ...) so load from other processes on
         * the machine hits every tool alike. A tool that fails once is out. */
        enum { SG_MAXREP = 16 };
        double ms[8][SG_MAXREP], rss[8][SG_MAXREP];
        int good[8] = {0}, failed[8] = {0}, treps[8];
        sg_result bad[8];
        memset(bad, 0, sizeof bad);
        int maxreps = 0;
        for (int ti = 0; ti < ntools; ti++) {
            int reps = ctx->reps;
            /* the slow peers get 3 repetitions (still medians) to keep the run short */
            if ((tools[ti].valgrind || ti >= 3) && reps > 3) reps = 3;
            if (reps > SG_MAXREP) reps = SG_MAXREP;
            treps[ti] = reps;
            if (reps > maxreps) maxreps = reps;
        }
        for (int r = 0; r < maxreps; r++) {
            for (int ti = 0; ti < ntools; ti++) {
                if (tools[ti].missing || failed[ti] || r >= treps[ti]) continue;
                sg_result res = sg_run(&tools[ti], sp->name, n, timeout);
                if (!res.ok) {
                    bad[ti] = res;
                    failed[ti] = 1;
                    continue;
                }
                ms[ti][good[ti]] = res.ms;
                rss[ti][good[ti]] = res.rss_kb;
                good[ti]++;
            }
        }
        for (int ti = 0; ti < ntools; ti++) {
            const sg_tool *t = &tools[ti];
            if (t->missing) {
                hkb_skip(SG_SUITE, wname, t->name, t->missing);
                continue;
            }
            int reps = treps[ti];
            if (failed[ti]) {
                hkb_skip(SG_SUITE, wname, t->name, bad[ti].why);
                continue;
            }
            double mt = hkb_median(ms[ti], good[ti]), mr = hkb_median(rss[ti], good[ti]);
            /* memory per live block: the slope between n and n/2 live blocks,
             * so fixed costs (libraries loaded, tables) do not count */
            double per_block = -1;
            if (strcmp(sp->name, "live") == 0) {
                double rh[16];
                int gh = 0;
                for (int r = 0; r < reps; r++) {
                    sg_result res = sg_run(t, sp->name, n / 2, timeout);
                    if (!res.ok) break;
                    rh[gh++] = res.rss_kb;
                }
                if (gh == reps) per_block = (mr - hkb_median(rh, gh)) * 1024.0 / (double)(n - n / 2);
            }
            hkb_record(SG_SUITE, wname, t->name, "wall_ms", mt, "ms (median)");
            hkb_record(SG_SUITE, wname, t->name, "peak_rss_kb", mr, "KiB (median)");
            if (ti == 0) {
                base_ms = mt;
                base_rss = mr;
            } else if (base_ms > 0) {
                hkb_record(SG_SUITE, wname, t->name, "ratio_vs_glibc", mt / base_ms, "x wall time");
                hkb_record(SG_SUITE, wname, t->name, "rss_ratio_vs_glibc", mr / base_rss, "x peak RSS");
            }
            if (per_block >= 0)
                hkb_record(SG_SUITE, wname, t->name, "bytes_per_live_block", per_block,
                           "bytes of peak RSS per extra live 64-byte block (slope n/2 -> n)");
        }
    }
}
