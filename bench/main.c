/*
 * bench/main.c - heapkit-bench: runs the suites found in bench/suite_*.c.
 *
 *   heapkit-bench [--suite NAME]... [--quick] [--reps N] [--out FILE] [--list]
 */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int hkb__write_json(const char *path);

#define HKB_SUITE(name) void hkb_suite_##name(hkb_ctx *ctx);
#include "suites.inc"
#undef HKB_SUITE

typedef struct suite {
    const char *name;
    void (*run)(hkb_ctx *);
} suite;

static const suite k_suites[] = {
#define HKB_SUITE(name) {#name, hkb_suite_##name},
#include "suites.inc"
#undef HKB_SUITE
};

static void usage(void) {
    printf("usage: heapkit-bench [--suite NAME]... [--quick] [--reps N] [--out FILE] [--list]\n");
    printf("suites:");
    for (size_t i = 0; i < sizeof k_suites / sizeof k_suites[0]; i++) printf(" %s", k_suites[i].name);
    printf("\n");
}

/* jemalloc (and other peers built with initial-exec TLS) cannot be
 * dlopen'ed with glibc's default reserve of static TLS ("cannot allocate
 * memory in static TLS block"). Raise the reserve through the documented
 * glibc tunable and re-execute once, before anything is loaded. */
static void ensure_static_tls(char **argv) {
    const char *t = getenv("GLIBC_TUNABLES");
    if (getenv("HKB_REEXECED") || (t && strstr(t, "optional_static_tls"))) return;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s%sglibc.rtld.optional_static_tls=65536", t ? t : "", t ? ":" : "");
    setenv("GLIBC_TUNABLES", buf, 1);
    setenv("HKB_REEXECED", "1", 1);
    execv("/proc/self/exe", argv);
    /* exec failed: go on; the peer will be reported as skipped with the reason. */
}

int hkb_zone_latency_child(int argc, char **argv);
int hkb_threads_child(int argc, char **argv);
int hkb_zone_icount_child(int argc, char **argv);
int hkb_trim_child(int argc, char **argv);

int main(int argc, char **argv) {
    ensure_static_tls(argv);
    /* internal: one allocator's latency replays in a fresh process (see
     * bench/suite_zone.c, lat_subject_fresh) */
    if (argc > 1 && !strcmp(argv[1], "--zone-latency-child")) return hkb_zone_latency_child(argc, argv);
    /* internal: one run of suite threads in a fresh process (bench/suite_threads.c) */
    if (argc > 1 && !strcmp(argv[1], "--threads-child")) return hkb_threads_child(argc, argv);
    /* internal: one allocator's run of suite trim under its preload (bench/suite_trim.c) */
    if (argc > 1 && !strcmp(argv[1], "--trim-child")) return hkb_trim_child(argc, argv);
    /* internal: per-operation instruction counts under callgrind (bench/icount.sh) */
    if (argc > 1 && !strcmp(argv[1], "--icount-child")) return hkb_zone_icount_child(argc, argv);
    hkb_ctx ctx = {5, 0, 0x9E3779B97F4A7C15ull};
    const char *out = "results.json";
    const char *only[16];
    int nonly = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--suite") && i + 1 < argc && nonly < 16)
            only[nonly++] = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            ctx.quick = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            ctx.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--list")) {
            usage();
            return 0;
        } else {
            usage();
            return 2;
        }
    }
    if (ctx.quick && ctx.reps > 3) ctx.reps = 3;
    if (ctx.reps < 1) ctx.reps = 1;

    const hkb_allocator *peers;
    int np = hkb_peers(&peers);
    const char **miss, **why;
    int nm = hkb_missing_peers(&miss, &why);
    printf("heapkit-bench: %d repetitions per figure (medians), peers:", ctx.reps);
    for (int i = 0; i < np; i++) printf(" %s", peers[i].name);
    printf("\n");
    for (int i = 0; i < nm; i++) printf("  peer %s skipped: %s\n", miss[i], why[i]);

    int ran = 0;
    for (size_t i = 0; i < sizeof k_suites / sizeof k_suites[0]; i++) {
        int want = nonly == 0;
        for (int j = 0; j < nonly; j++)
            if (!strcmp(only[j], k_suites[i].name)) want = 1;
        if (!want) continue;
        printf("\n######## suite %s\n", k_suites[i].name);
        k_suites[i].run(&ctx);
        ran++;
    }
    if (ran == 0) {
        fprintf(stderr, "heapkit-bench: no suite matched\n");
        usage();
        return 2;
    }
    if (hkb__write_json(out) != 0) return 1;
    printf("\nresults written to %s\n", out);
    return 0;
}
