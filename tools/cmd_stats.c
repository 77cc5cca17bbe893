/*
 * tools/cmd_stats.c - `heapkit stats -- prog args`: the program on
 * libheapkit-malloc.so (every malloc served by a heapkit zone), with the
 * zone's statistics at exit (HEAPKIT_STATS=1) and a histogram of requested
 * sizes from libheapkit-stats.so in front of it.
 */
#include "commands.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void hk_cmd_stats_help(FILE *out) {
    fprintf(out,
            "usage: heapkit stats [options] -- program [args...]\n"
            "\n"
            "Runs the program with every malloc served by a heapkit zone\n"
            "(libheapkit-malloc.so) and prints to stderr at exit: the zone's statistics\n"
            "(allocations, frees, live blocks and bytes, peak, capacity, misuse reports)\n"
            "and a histogram of the sizes asked for (libheapkit-stats.so, which counts\n"
            "each call and forwards it).\n"
            "\n"
            "options:\n"
            "  --no-histogram  the zone statistics only (nothing in front of the zone)\n"
            "  --lib PATH      the malloc replacement      HEAPKIT_MALLOC_LIB\n"
            "  -h, --help      this text\n"
            "\n"
            "The exit status is the program's (128+N when signal N ended it).\n");
}

int hk_cmd_stats(int argc, char **argv) {
    const char *lib_opt = NULL;
    int hist = 1, i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-') break;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            hk_cmd_stats_help(stdout);
            return 0;
        } else if (!strcmp(a, "--no-histogram")) {
            hist = 0;
        } else if (!strcmp(a, "--lib") && i + 1 < argc) {
            lib_opt = argv[++i];
        } else {
            fprintf(stderr, "heapkit stats: unknown option or missing value '%s' (heapkit stats --help)\n", a);
            return 2;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "heapkit stats: no program given\n");
        return 2;
    }
    char prog[PATH_MAX], mlib[PATH_MAX], slib[PATH_MAX], libs[2 * PATH_MAX + 2];
    if (!hk_tool_check_program("stats", argv[i], prog, sizeof prog)) return 127;
    if (lib_opt) snprintf(mlib, sizeof mlib, "%s", lib_opt);
    if (lib_opt ? access(mlib, R_OK) != 0
                : !hk_tool_find_lib("libheapkit-malloc.so", "HEAPKIT_MALLOC_LIB", mlib, sizeof mlib)) {
        fprintf(stderr, "heapkit stats: libheapkit-malloc.so not found (set HEAPKIT_MALLOC_LIB or use --lib)\n");
        return 2;
    }
    if (hist && !hk_tool_find_lib("libheapkit-stats.so", "HEAPKIT_STATS_LIB", slib, sizeof slib)) {
        fprintf(stderr, "heapkit stats: libheapkit-stats.so not found: no size histogram\n");
        hist = 0;
    }
    if (hist)
        snprintf(libs, sizeof libs, "%s:%s", slib, mlib);
    else
        snprintf(libs, sizeof libs, "%s", mlib);
    const char *env[] = {"HEAPKIT_STATS=1", NULL};
    return hk_tool_run("stats", prog, &argv[i], libs, env);
}
