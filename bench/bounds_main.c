/*
 * bench/bounds_main.c - heapkit-bounds: the worst-case drivers of
 * docs/realtime.md, one allocator and one scale per run.
 *
 *   valgrind --tool=callgrind --instr-atstart=no ... heapkit-bounds DRIVER SCALE
 *   heapkit-bounds --list
 *
 * DRIVER is hunk, zone, cache, pool, gc or glibc; SCALE 1..4 (bench/bounds.h).
 * bench/bounds.sh runs every driver at every scale and reads the counts.
 * Run without valgrind, a driver does the same work and counts nothing (the
 * CTest smoke test).
 *
 * The library is compiled into this program (bench/bounds_lib.c) with
 * HK_NO_VALGRIND: under valgrind the library would otherwise announce blocks
 * to it, and the hunk walks the blocks it frees to do so, work a program
 * never pays when it does not run under valgrind.
 */
#include "bounds.h"

#include <string.h>

typedef struct driver {
    const char *name;
    void (*run)(int scale);
} driver;

static const driver k_drivers[] = {{"hunk", bd_hunk}, {"zone", bd_zone}, {"cache", bd_cache},
                                   {"pool", bd_pool}, {"gc", bd_gc},     {"glibc", bd_glibc}};

int main(int argc, char **argv) {
    size_t n = sizeof k_drivers / sizeof k_drivers[0];
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (size_t i = 0; i < n; i++) printf("%s\n", k_drivers[i].name);
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: heapkit-bounds DRIVER SCALE(1-4) | --list\n");
        return 2;
    }
    int scale = atoi(argv[2]);
    if (scale < 1 || scale > 4) {
        fprintf(stderr, "heapkit-bounds: scale must be 1..4\n");
        return 2;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(argv[1], k_drivers[i].name)) continue;
        /* the cost of counting nothing: the client requests themselves */
        ICOUNT_ON();
        for (int r = 0; r < 4; r++) BD_COUNT("(counting)", "an empty statement", 0, (void)0);
        ICOUNT_OFF();
        k_drivers[i].run(scale);
        printf("heapkit-bounds: %s at scale %d done%s\n", argv[1], scale,
               ICOUNT_AVAILABLE ? "" : " (built without callgrind.h: nothing counted)");
        return 0;
    }
    fprintf(stderr, "heapkit-bounds: no driver named %s\n", argv[1]);
    return 2;
}
