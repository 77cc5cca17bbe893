/*
 * bench/suite_trim.c - memory given back to the OS (issue 21 §4): for each
 * allocator, as the process's malloc, allocate 3 million 64-byte blocks
 * (about 260 MiB resident), free them all, idle one second making a small
 * malloc/free every 50 ms, call malloc_trim(0), then place four 40 MiB
 * blocks (the scenario is bench/rss_scenario.h, shared with the preload
 * test tests/zone_trim_prog.c). Figures, as percentages of the peak
 * resident size: `idle_pct` (after the idle second), `trim_pct` (after
 * malloc_trim), `big4_pct` (with the four large blocks written; at most
 * 100 means they fit without growing past the peak); and `peak_MiB`.
 * Targets for heapkit-malloc.so: <= 15, <= 10, <= 100.
 *
 * Invariants of this file:
 *  - every (allocator, repetition) runs in a process of its own (this
 *    program again with --trim-child under LD_PRELOAD), so each figure is
 *    that allocator's alone; glibc runs without a preload, heapkit as
 *    libheapkit-malloc.so, mimalloc, jemalloc and tcmalloc as their
 *    preload libraries (the ones bench/install-peers.sh installs); a peer
 *    that is not installed is recorded as skipped with the reason;
 *  - the child verifies that malloc is the intended library's (dladdr),
 *    so a preload that did not take effect fails instead of measuring
 *    glibc;
 *  - repetitions are interleaved and medians recorded; --quick shrinks the
 *    block count (the idle second stays).
 */
#include "rss_scenario.h"

#include "harness.h"

#include <dlfcn.h>
#include <sys/stat.h>

#define SUITE "trim"
#define WL    "rss_return"

typedef struct trim_out {
    rss_result r;
    int ok;
} trim_out;

int hkb_trim_child(int argc, char **argv);
int hkb_trim_child(int argc, char **argv) {
    /* --trim-child FD LIBNAME COUNT SIZE IDLE_MS BIG */
    if (argc != 8) return 2;
    int fd = atoi(argv[2]);
    trim_out o;
    memset(&o, 0, sizeof o);
    Dl_info di;
    void *m = dlsym(RTLD_DEFAULT, "malloc");
    if (!m || !dladdr(m, &di) || !di.dli_fname || !strstr(di.dli_fname, argv[3])) {
        fprintf(stderr, "trim bench: malloc comes from %s, not %s\n", m && di.dli_fname ? di.dli_fname : "?",
                argv[3]);
        return 1;
    }
    rss_params p = {strtoul(argv[4], NULL, 10), strtoul(argv[5], NULL, 10), (unsigned)atoi(argv[6]),
                    strtoul(argv[7], NULL, 10)};
    rss_scenario(&p, &o.r);
    o.ok = o.r.ok;
    if (write(fd, &o, sizeof o) != (ssize_t)sizeof o) return 1;
    return o.ok ? 0 : 1;
}

typedef struct subject {
    const char *name, *preload, *libname; /* libname: what malloc's library path contains */
} subject;

#define MAXS    8
#define MAXREPS 5

void hkb_suite_trim(hkb_ctx *ctx);
void hkb_suite_trim(hkb_ctx *ctx) {
    subject s[MAXS];
    int ns = 0;
    s[ns++] = (subject){"glibc", NULL, "libc.so"};
    const char *sp = hkb_shim_path();
    struct stat st;
    if (sp && stat(sp, &st) == 0)
        s[ns++] = (subject){"heapkit-malloc.so", sp, "libheapkit-malloc"};
    else
        hkb_skip(SUITE, WL, "heapkit-malloc.so", "libheapkit-malloc.so not built (set HKB_HEAPKIT_MALLOC)");
    static const subject k_peer[] = {{"mimalloc", "libmimalloc.so.2", "libmimalloc"},
                                     {"jemalloc", "libjemalloc.so.2", "libjemalloc"},
                                     {"tcmalloc", "libtcmalloc_minimal.so.4", "libtcmalloc"}};
    const hkb_allocator *peers;
    int np = hkb_peers(&peers);
    for (size_t i = 0; i < sizeof k_peer / sizeof k_peer[0]; i++)
        for (int j = 0; j < np; j++)
            if (!strcmp(peers[j].name, k_peer[i].name)) s[ns++] = k_peer[i];
    hkb_skip_missing(SUITE, WL);

    size_t count = ctx->quick ? 300000 : 3000000, big = ctx->quick ? ((size_t)4 << 20) : ((size_t)40 << 20);
    int reps = ctx->reps < MAXREPS ? ctx->reps : MAXREPS;
    if (ctx->quick && reps > 1) reps = 1;
    char what[200];
    snprintf(
        what, sizeof what,
        "%zu blocks of 64 B freed; resident %% of the peak after 1 s idle, after malloc_trim(0), with 4 x "
        "%zu MiB placed",
        count, big >> 20);
    hkb_section(SUITE, WL, what);
    static double fig[MAXS][4][MAXREPS];
    int got[MAXS] = {0};
    for (int k = 0; k < reps; k++) {
        for (int i = 0; i < ns; i++) {
            int pfd[2];
            if (pipe(pfd) != 0) continue;
            char a_fd[16], a_n[32], a_idle[16], a_big[32];
            snprintf(a_fd, sizeof a_fd, "%d", pfd[1]);
            snprintf(a_n, sizeof a_n, "%zu", count);
            snprintf(a_idle, sizeof a_idle, "%d", 1000);
            snprintf(a_big, sizeof a_big, "%zu", big);
            char *argv[] = {"heapkit-bench", "--trim-child", a_fd, (char *)s[i].libname, a_n, "64",
                            a_idle,          a_big,          NULL};
            trim_out o;
            if (!hkb_run_child(argv, pfd, s[i].preload, &o, sizeof o) || !o.ok) continue;
            fig[i][0][got[i]] = o.r.idle_pct;
            fig[i][1][got[i]] = o.r.trim_pct;
            fig[i][2][got[i]] = o.r.big_pct;
            fig[i][3][got[i]] = o.r.peak_kib / 1024.0;
            got[i]++;
        }
    }
    for (int i = 0; i < ns; i++) {
        if (got[i] < reps) {
            hkb_skip(SUITE, WL, s[i].name, "SKIPPED: the child process failed (see its stderr)");
            continue;
        }
        hkb_record(SUITE, WL, s[i].name, "idle_pct", hkb_median(fig[i][0], got[i]), "%");
        hkb_record(SUITE, WL, s[i].name, "trim_pct", hkb_median(fig[i][1], got[i]), "%");
        hkb_record(SUITE, WL, s[i].name, "big4_pct", hkb_median(fig[i][2], got[i]), "%");
        hkb_record(SUITE, WL, s[i].name, "peak_MiB", hkb_median(fig[i][3], got[i]), "MiB");
    }
}
