/*
 * bench/suite_doom.c - Chocolate Doom on heapkit's zone against the stock
 * engine (docs/doom.md): ports/doom/bench.sh builds both engines into the
 * build folder's doom/ (as make check-doom does), plays Freedoom's demos
 * with -timedemo, drawing on, at the default zone and at 4 MiB, and a level
 * change; this file runs it and records what it prints.
 *
 * Invariants of this file:
 *  - every figure comes from the script's "result" lines, recorded as
 *    they are (workload, engine as the allocator, metric, value, unit);
 *    "skip" lines (packages missing, an engine that did not build or play)
 *    are recorded as skipped with their reason, never left out;
 *  - ms_per_tic is the median over ctx->reps runs (3 with --quick, which
 *    also plays one demo per WAD instead of all eight), runs of the two
 *    engines interleaved; ratio_vs_stock = heapkit / stock (< 1: faster).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "harness.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SUITE "doom"

/* The build folder (the parent of bench/, where the executable is) and
 * the source tree (HKB_SOURCE_DIR, from bench/CMakeLists.txt). */
static int doom_dirs(char *build, size_t n) {
    ssize_t k = readlink("/proc/self/exe", build, n - 1);
    if (k <= 0) return 0;
    build[k] = '\0';
    for (int up = 0; up < 2; up++) {
        char *s = strrchr(build, '/');
        if (s == NULL) return 0;
        *s = '\0';
    }
    return 1;
}

static void record_ratio(const char *workload, double stock, double heapkit) {
    if (stock > 0 && heapkit > 0)
        hkb_record(SUITE, workload, "heapkit", "ratio_vs_stock", heapkit / stock, "x");
}

void hkb_suite_doom(hkb_ctx *ctx) {
#ifndef HKB_SOURCE_DIR
    hkb_skip(SUITE, "all", "all", "bench built without HKB_SOURCE_DIR (bench/CMakeLists.txt defines it)");
    (void)ctx;
#else
    char build[PATH_MAX], cmd[3 * PATH_MAX], line[1024];
    if (!doom_dirs(build, sizeof build)) {
        hkb_skip(SUITE, "all", "all", "cannot read /proc/self/exe");
        return;
    }
    snprintf(cmd, sizeof cmd, "'%s/ports/doom/bench.sh' '%s/doom' %d %s 2>/dev/null", HKB_SOURCE_DIR, build,
             ctx->reps, ctx->quick ? "quick" : "");
    FILE *p = popen(cmd, "r");
    if (p == NULL) {
        hkb_skip(SUITE, "all", "all", "cannot run ports/doom/bench.sh");
        return;
    }
    char last[128] = "";
    double stock_ms = 0;
    int n = 0;
    hkb_section(SUITE, "demos", "Chocolate Doom, -timedemo with drawing on: stock zone vs heapkit's");
    while (fgets(line, sizeof line, p) != NULL) {
        char wl[128], who[32], metric[64], unit[32];
        double v;
        line[strcspn(line, "\n")] = '\0';
        if (!strncmp(line, "skip ", 5)) {
            if (sscanf(line + 5, "%127s %31s", wl, who) == 2) {
                const char *why = line + 5 + strlen(wl) + 1 + strlen(who);
                hkb_skip(SUITE, wl, who, *why ? why + 1 : "?");
                n++;
            }
            continue;
        }
        if (sscanf(line, "result %127s %31s %63s %lf %31s", wl, who, metric, &v, unit) != 5) continue;
        hkb_record(SUITE, wl, who, metric, v, unit);
        n++;
        int timing = !strcmp(metric, "ms_per_tic") || !strcmp(metric, "freetags_ms");
        if (timing && !strcmp(who, "stock")) {
            snprintf(last, sizeof last, "%s", wl);
            stock_ms = v;
        } else if (timing && !strcmp(who, "heapkit") && !strcmp(last, wl)) {
            record_ratio(wl, stock_ms, v);
        }
    }
    int rc = pclose(p);
    if (n == 0) hkb_skip(SUITE, "all", "all", rc != 0 ? "ports/doom/bench.sh failed" : "no figures");
#endif
}
