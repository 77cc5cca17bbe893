/*
 * tools/cmd_replay.c - `heapkit replay FILE [--allocators LIST]`: the trace
 * replayed on each allocator, each in a fresh child process (so no
 * allocator inherits another's heap and each peak RSS is its own), the
 * median of --reps runs, as a table and in the bench's JSON format.
 *
 * Invariant: an allocator that cannot be loaded is listed as skipped with
 * the reason, never left out or measured with a stand-in.
 */
#include "analysis.h"
#include "commands.h"
#include "replay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void hk_cmd_replay_help(FILE *out) {
    fprintf(out,
            "usage: heapkit replay FILE [options]\n"
            "\n"
            "Replays a trace from `heapkit record` on each allocator, with the recorded\n"
            "threads (a free waits for its block's allocation on another thread), every\n"
            "allocator in a fresh process, and prints per allocator: the time, ns per\n"
            "call, the peak resident memory the replay added, and that peak over the\n"
            "trace's peak live bytes (1.0 would be no overhead at all). Every page of a\n"
            "block is written once, calloc'ed blocks are zeroed. Allocators that are not\n"
            "installed are listed as skipped (bench/install-peers.sh installs them).\n"
            "\n"
            "options:\n"
            "  --allocators LIST  comma-separated, from zone,glibc,mimalloc,jemalloc,tcmalloc\n"
            "                     [all of them]\n"
            "  --reps N           runs per allocator, the median is shown [3]\n"
            "  --one-thread       replay every call on one thread, in the trace's order\n"
            "  --json FILE        also write the figures as the bench's results.json\n"
            "                     (suite \"replay\", workload = the trace's file name)\n"
            "  -h, --help         this text\n");
}

typedef struct row {
    char name[32];
    int skipped;
    char why[256];
    double time_ns, peak_rss, failed;
} row;

/* One replay in a child; 0 with *res filled, or -1 with why. */
static int run_child(const hkt_trace *t, const char *name, int one_thread, hkr_result *res, char *why,
                     size_t whyn) {
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(why, whyn, "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        snprintf(why, whyn, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        struct {
            int ok;
            hkr_result r;
            char why[200];
        } msg;
        memset(&msg, 0, sizeof msg);
        hkb_allocator a;
        if (hkr_allocator(name, &a, msg.why, sizeof msg.why) == 0) {
            if (hkr_replay(t, &a, one_thread, &msg.r) == 0)
                msg.ok = 1;
            else
                snprintf(msg.why, sizeof msg.why, "the replay could not run (memory or threads)");
        }
        ssize_t w = write(fds[1], &msg, sizeof msg);
        (void)w;
        _exit(0);
    }
    close(fds[1]);
    struct {
        int ok;
        hkr_result r;
        char why[200];
    } msg;
    memset(&msg, 0, sizeof msg);
    size_t got = 0;
    while (got < sizeof msg) {
        ssize_t n = read(fds[0], (char *)&msg + got, sizeof msg - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fds[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (got != sizeof msg) {
        if (WIFSIGNALED(st))
            snprintf(why, whyn, "the replay died of signal %d", WTERMSIG(st));
        else
            snprintf(why, whyn, "the replay process ended without a result");
        return -1;
    }
    if (!msg.ok) {
        snprintf(why, whyn, "%s", msg.why);
        return -1;
    }
    *res = msg.r;
    return 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static void json_rec(FILE *f, int *first, const char *workload, const row *r, const char *metric, double v,
                     const char *unit) {
    fprintf(f, "%s  {\"suite\": \"replay\", \"workload\": ", *first ? "" : ",\n");
    *first = 0;
    json_str(f, workload);
    fprintf(f, ", \"allocator\": ");
    json_str(f, r->name);
    fprintf(f, ", \"metric\": ");
    json_str(f, metric);
    if (r->skipped) {
        fprintf(f, ", \"value\": null, \"unit\": \"\", \"note\": ");
        json_str(f, r->why);
    } else {
        fprintf(f, ", \"value\": %.6g, \"unit\": ", v);
        json_str(f, unit);
    }
    fprintf(f, "}");
}

/* jemalloc and other peers built with initial-exec TLS cannot be dlopen'ed
 * with glibc's default static TLS reserve: raise it (a documented glibc
 * tunable) and run again, once, as bench/main.c does. */
static void ensure_static_tls(char **main_argv) {
    const char *t = getenv("GLIBC_TUNABLES");
    if (getenv("HEAPKIT_REEXECED") || (t && strstr(t, "optional_static_tls"))) return;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s%sglibc.rtld.optional_static_tls=65536", t ? t : "", t ? ":" : "");
    setenv("GLIBC_TUNABLES", buf, 1);
    setenv("HEAPKIT_REEXECED", "1", 1);
    execv("/proc/self/exe", main_argv);
}

int hk_cmd_replay(int argc, char **argv) {
    const char *file = NULL, *list = "zone,glibc,mimalloc,jemalloc,tcmalloc", *json = NULL;
    int reps = 3, one_thread = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            hk_cmd_replay_help(stdout);
            return 0;
        } else if (!strcmp(a, "--allocators") && i + 1 < argc) {
            list = argv[++i];
        } else if (!strcmp(a, "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
            if (reps < 1 || reps > 100) {
                fprintf(stderr, "heapkit replay: --reps wants 1..100\n");
                return 2;
            }
        } else if (!strcmp(a, "--json") && i + 1 < argc) {
            json = argv[++i];
        } else if (!strcmp(a, "--one-thread")) {
            one_thread = 1;
        } else if (a[0] == '-' || file) {
            fprintf(stderr, "heapkit replay: unexpected '%s' (heapkit replay --help)\n", a);
            return 2;
        } else {
            file = a;
        }
    }
    if (!file) {
        fprintf(stderr, "heapkit replay: no trace given\n");
        return 2;
    }
    ensure_static_tls(argv - 1);
    hkt_trace t;
    char err[512];
    if (hkt_read_file(file, &t, err, sizeof err) != 0) {
        fprintf(stderr, "heapkit replay: %s\n", err);
        return 1;
    }
    hka an;
    if (hka_analyze(&t, &an) != 0) {
        fprintf(stderr, "heapkit replay: out of memory\n");
        hkt_free(&t);
        return 1;
    }
    char b1[32], b2[32];
    printf("heapkit replay: %s: %zu calls in %u thread%s%s, peak %s live; median of %d run%s\n", file, t.nevents,
           one_thread ? 1 : t.nthreads, (one_thread ? 1 : t.nthreads) == 1 ? "" : "s",
           one_thread ? " (--one-thread)" : "", hka_bytes(an.peak_live, b1, sizeof b1), reps, reps == 1 ? "" : "s");
    printf("  %-10s %12s %10s %12s %14s %10s\n", "allocator", "time ms", "ns/call", "peak RSS", "RSS/peak live",
           "time/glibc");
    row rows[16];
    int nrows = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *name = strtok_r(buf, ",", &save); name && nrows < 16;
         name = strtok_r(NULL, ",", &save)) {
        row *r = &rows[nrows++];
        memset(r, 0, sizeof *r);
        snprintf(r->name, sizeof r->name, "%s", name);
        double tv[100], rv[100];
        int n = 0;
        for (int k = 0; k < reps; k++) {
            hkr_result res;
            if (run_child(&t, name, one_thread, &res, r->why, sizeof r->why) != 0) break;
            tv[n] = (double)res.time_ns;
            rv[n] = (double)res.peak_rss;
            r->failed = (double)res.failed;
            n++;
        }
        if (n < reps) {
            r->skipped = 1;
            printf("  %-10s skipped: %s\n", r->name, r->why);
            continue;
        }
        r->time_ns = median(tv, n);
        r->peak_rss = median(rv, n);
    }
    double glibc_ns = 0;
    for (int i = 0; i < nrows; i++)
        if (!rows[i].skipped && !strcmp(rows[i].name, "glibc")) glibc_ns = rows[i].time_ns;
    for (int i = 0; i < nrows; i++) {
        row *r = &rows[i];
        if (r->skipped) continue;
        char ratio[32] = "-", foot[32] = "-";
        if (glibc_ns > 0) snprintf(ratio, sizeof ratio, "%.2fx", r->time_ns / glibc_ns);
        if (an.peak_live && r->peak_rss > 0) snprintf(foot, sizeof foot, "%.2f", r->peak_rss / (double)an.peak_live);
        printf("  %-10s %12.2f %10.1f %12s %14s %10s%s\n", r->name, r->time_ns / 1e6,
               t.nevents ? r->time_ns / (double)t.nevents : 0, hka_bytes((uint64_t)r->peak_rss, b2, sizeof b2), foot,
               ratio, r->failed > 0 ? "  (some allocations failed)" : "");
    }
    int rc = 0;
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f) {
            fprintf(stderr, "heapkit replay: cannot write %s: %s\n", json, strerror(errno));
            rc = 1;
        } else {
            const char *base = strrchr(file, '/');
            base = base ? base + 1 : file;
            int first = 1;
            fprintf(f, "[\n");
            for (int i = 0; i < nrows; i++) {
                row *r = &rows[i];
                if (r->skipped) {
                    json_rec(f, &first, base, r, "skipped", 0, "");
                    continue;
                }
                json_rec(f, &first, base, r, "time", r->time_ns / 1e6, "ms");
                json_rec(f, &first, base, r, "ns_per_call", t.nevents ? r->time_ns / (double)t.nevents : 0, "ns");
                json_rec(f, &first, base, r, "peak_rss", r->peak_rss, "bytes");
                if (an.peak_live)
                    json_rec(f, &first, base, r, "rss_over_peak_live", r->peak_rss / (double)an.peak_live, "ratio");
                if (glibc_ns > 0) json_rec(f, &first, base, r, "ratio_vs_glibc", r->time_ns / glibc_ns, "ratio");
            }
            fprintf(f, "\n]\n");
            fclose(f);
        }
    }
    hka_free(&an);
    hkt_free(&t);
    return rc;
}
