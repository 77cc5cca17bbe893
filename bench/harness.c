/*
 * bench/harness.c - the benchmark driver: peers loaded with dlopen, timing,
 * medians, the results table and results.json.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "harness.h"

#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- peers ------------------------------------------------------------- */

static void *glibc_memalign(size_t a, size_t n) { return memalign(a, n); }

#define HKB_MAX_PEERS 8
static hkb_allocator g_peers[HKB_MAX_PEERS];
static int g_npeers;
static const char *g_missing[HKB_MAX_PEERS];
static const char *g_missing_why[HKB_MAX_PEERS];
static char g_missing_buf[HKB_MAX_PEERS][256];
static int g_nmissing;
static int g_loaded;

typedef struct peer_spec {
    const char *name;
    const char *libs[3];
    const char *sym_malloc, *sym_free, *sym_realloc, *sym_memalign, *sym_usable;
    const char *package;
} peer_spec;

static const peer_spec k_specs[] = {
    {"mimalloc",
     {"libmimalloc.so.2", "libmimalloc.so", NULL},
     "mi_malloc",
     "mi_free",
     "mi_realloc",
     "mi_malloc_aligned_swapped",
     "mi_usable_size",
     "libmimalloc-dev"},
    {"jemalloc",
     {"libjemalloc.so.2", "libjemalloc.so", NULL},
     "malloc",
     "free",
     "realloc",
     "memalign",
     "malloc_usable_size",
     "libjemalloc-dev"},
    {"tcmalloc",
     {"libtcmalloc_minimal.so.4", "libtcmalloc.so.4", NULL},
     "tc_malloc",
     "tc_free",
     "tc_realloc",
     "tc_memalign",
     "tc_malloc_size",
     "libgoogle-perftools-dev"},
};

/* mimalloc's aligned call takes (size, align); adapt to (align, size). */
static void *(*g_mi_malloc_aligned)(size_t, size_t);
static void *mi_memalign_adapter(size_t a, size_t n) { return g_mi_malloc_aligned(n, a); }

static void load_peers(void) {
    if (g_loaded) return;
    g_loaded = 1;
    g_peers[g_npeers++] = (hkb_allocator){"glibc", malloc, free, realloc, glibc_memalign, malloc_usable_size};
    for (size_t i = 0; i < sizeof k_specs / sizeof k_specs[0]; i++) {
        const peer_spec *s = &k_specs[i];
        void *h = NULL;
        char errbuf[160] = "";
        const char *err = NULL;
        for (int j = 0; j < 3 && s->libs[j] && !h; j++) {
            h = dlopen(s->libs[j], RTLD_NOW | RTLD_LOCAL);
            const char *e = h ? NULL : dlerror();
            if (e && !err) {
                snprintf(errbuf, sizeof errbuf, "%s", e);
                err = errbuf;
            }
        }
        if (!h) {
            snprintf(g_missing_buf[g_nmissing], sizeof g_missing_buf[0],
                     "%s could not be loaded (%s); bench/install-peers.sh installs %s", s->libs[0],
                     err ? err : "not found", s->package);
            g_missing[g_nmissing] = s->name;
            g_missing_why[g_nmissing] = g_missing_buf[g_nmissing];
            g_nmissing++;
            continue;
        }
        hkb_allocator a = {0};
        a.name = s->name;
        /* dlsym returns void*; converting it to a function pointer is what
         * POSIX requires to work. */
        *(void **)&a.malloc = dlsym(h, s->sym_malloc);
        *(void **)&a.free = dlsym(h, s->sym_free);
        *(void **)&a.realloc = dlsym(h, s->sym_realloc);
        if (strcmp(s->name, "mimalloc") == 0) {
            *(void **)&g_mi_malloc_aligned = dlsym(h, "mi_malloc_aligned");
            a.memalign = g_mi_malloc_aligned ? mi_memalign_adapter : NULL;
        } else {
            *(void **)&a.memalign = dlsym(h, s->sym_memalign);
        }
        *(void **)&a.usable_size = dlsym(h, s->sym_usable);
        if (!a.malloc || !a.free || !a.realloc) {
            snprintf(g_missing_buf[g_nmissing], sizeof g_missing_buf[0], "%s lacks %s/%s", s->libs[0],
                     s->sym_malloc, s->sym_free);
            g_missing[g_nmissing] = s->name;
            g_missing_why[g_nmissing] = g_missing_buf[g_nmissing];
            g_nmissing++;
            continue;
        }
        g_peers[g_npeers++] = a;
    }
}

const char *hkb_shim_path(void) {
    const char *e = getenv("HKB_HEAPKIT_MALLOC");
    if (e && *e) return e;
#ifdef HKB_HEAPKIT_MALLOC_SO
    return HKB_HEAPKIT_MALLOC_SO;
#else
    return NULL;
#endif
}

int hkb_peers(const hkb_allocator **out) {
    load_peers();
    *out = g_peers;
    return g_npeers;
}

int hkb_missing_peers(const char ***names, const char ***reasons) {
    load_peers();
    *names = g_missing;
    *reasons = g_missing_why;
    return g_nmissing;
}

void hkb_skip_missing(const char *suite, const char *workload) {
    load_peers();
    for (int i = 0; i < g_nmissing; i++) hkb_skip(suite, workload, g_missing[i], g_missing_why[i]);
}

/* ---- timing -------------------------------------------------------------- */

uint64_t hkb_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double hkb_median(double *v, int n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return (n & 1) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double hkb_percentile(double *v, size_t n, double p) {
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, cmp_double);
    double rank = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)rank;
    if (lo + 1 >= n) return v[n - 1];
    double frac = rank - (double)lo;
    return v[lo] + (v[lo + 1] - v[lo]) * frac;
}

/* ---- results ------------------------------------------------------------- */

typedef struct rec {
    char suite[32], workload[64], allocator[48], metric[48], unit[64];
    double value;
    int skipped;
    char why[200];
} rec;

static rec *g_recs;
static size_t g_nrecs, g_caprecs;

static rec *new_rec(void) {
    if (g_nrecs == g_caprecs) {
        g_caprecs = g_caprecs ? g_caprecs * 2 : 256;
        g_recs = realloc(g_recs, g_caprecs * sizeof *g_recs);
        if (!g_recs) {
            fprintf(stderr, "bench: out of memory for results\n");
            exit(1);
        }
    }
    rec *r = &g_recs[g_nrecs++];
    memset(r, 0, sizeof *r);
    return r;
}

void hkb_section(const char *suite, const char *workload, const char *what) {
    printf("\n== %s / %s: %s\n", suite, workload, what);
    printf("   %-22s %-26s %14s  %s\n", "allocator", "metric", "value", "unit");
    fflush(stdout);
}

void hkb_record(const char *suite, const char *workload, const char *allocator, const char *metric,
                double value, const char *unit) {
    rec *r = new_rec();
    snprintf(r->suite, sizeof r->suite, "%s", suite);
    snprintf(r->workload, sizeof r->workload, "%s", workload);
    snprintf(r->allocator, sizeof r->allocator, "%s", allocator);
    snprintf(r->metric, sizeof r->metric, "%s", metric);
    snprintf(r->unit, sizeof r->unit, "%s", unit);
    r->value = value;
    printf("   %-22s %-26s %14.3f  %s\n", allocator, metric, value, unit);
    fflush(stdout);
}

void hkb_skip(const char *suite, const char *workload, const char *allocator, const char *why) {
    rec *r = new_rec();
    snprintf(r->suite, sizeof r->suite, "%s", suite);
    snprintf(r->workload, sizeof r->workload, "%s", workload);
    snprintf(r->allocator, sizeof r->allocator, "%s", allocator);
    snprintf(r->metric, sizeof r->metric, "skipped");
    snprintf(r->why, sizeof r->why, "%s", why);
    r->skipped = 1;
    printf("   %-22s SKIPPED: %s\n", allocator, why);
    fflush(stdout);
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

int hkb__write_json(const char *path);
int hkb__write_json(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    fprintf(f, "[\n");
    for (size_t i = 0; i < g_nrecs; i++) {
        rec *r = &g_recs[i];
        fprintf(f, "  {\"suite\": ");
        json_str(f, r->suite);
        fprintf(f, ", \"workload\": ");
        json_str(f, r->workload);
        fprintf(f, ", \"allocator\": ");
        json_str(f, r->allocator);
        fprintf(f, ", \"metric\": ");
        json_str(f, r->metric);
        if (r->skipped) {
            fprintf(f, ", \"value\": null, \"unit\": \"\", \"note\": ");
            json_str(f, r->why);
        } else {
            fprintf(f, ", \"value\": %.6g, \"unit\": ", r->value);
            json_str(f, r->unit);
        }
        fprintf(f, "}%s\n", i + 1 < g_nrecs ? "," : "");
    }
    fprintf(f, "]\n");
    fclose(f);
    return 0;
}

int hkb_run_child(char **argv, int pfd[2], const char *preload, void *out, size_t n) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return 0;
    }
    if (pid == 0) {
        close(pfd[0]);
        if (preload) setenv("LD_PRELOAD", preload, 1);
        FILE *nul = freopen("/dev/null", "w", stdout); /* the parent prints the figures */
        (void)nul;
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(pfd[1]);
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(pfd[0], (char *)out + got, n - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return got == n && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}
