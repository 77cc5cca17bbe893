/*
 * bench/zone_icount.c - the instruction side of suite zone's latency: the
 * frame trace replayed on top of a heap already holding 1 MiB .. 1 GiB of
 * live blocks, under callgrind, each operation's instructions counted
 * (bench/icount.sh runs it and reads the counts).
 *
 *   valgrind --tool=callgrind --instr-atstart=no ... \
 *       heapkit-bench --icount-child ALLOCATOR HEAP_MIB OPS
 *
 * ALLOCATOR is zone (the growing zone as libheapkit-malloc.so makes it) or
 * glibc. The fill and the final frees run uninstrumented; around each of
 * the first OPS operations of the quick frame trace the costs are zeroed
 * and then dumped with the operation's kind as the dump's trigger
 * ("malloc", "free", "realloc"), so each dump holds exactly one operation
 * (plus the constant cost of the call through the allocator's function
 * pointer and of the client requests, the same for every allocator).
 *
 * Invariants: the sequence is deterministic for (HEAP_MIB, OPS): the same
 * fill (seeded) and the same trace for every allocator; every block is
 * freed before the child exits. Without valgrind's headers at build time the
 * mode reports that it cannot count and exits 2. The counting is
 * bench/icount.h's, shared with the worst-case drivers (bench/bounds_*.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "zone_bench.h"

#include "icount.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hkb_zone_icount_child(int argc, char **argv);
int hkb_zone_icount_child(int argc, char **argv) {
#if !ICOUNT_AVAILABLE
    (void)argc;
    (void)argv;
    fprintf(stderr, "heapkit-bench: built without <valgrind/callgrind.h>: cannot count instructions\n");
    return 2;
#else
    if (argc != 5) return 2;
    const char *name = argv[2];
    size_t heap = (size_t)strtoull(argv[3], NULL, 10) << 20;
    size_t limit = (size_t)strtoull(argv[4], NULL, 10);
    subject subj[10];
    int ns = subjects(subj, SUBJ_SET_PLAIN), s = 0;
    while (s < ns && strcmp(subj[s].a.name, name)) s++;
    if (s == ns) {
        fprintf(stderr, "heapkit-bench: no subject named %s\n", name);
        return 2;
    }
    const hkb_allocator *a = &subj[s].a;
    subject_open(&subj[s], heap * 2 + ((size_t)64 << 20));
    /* the fill: `heap` live bytes of 16 B - 64 KiB blocks */
    uint64_t r = 0x5EEDu + heap;
    size_t cap = heap / 4000 + 1024, nb = 0, live = 0;
    void **blk = malloc(cap * sizeof *blk);
    if (!blk) return 1;
    while (live < heap && nb < cap) {
        size_t n = (size_t)rnd_logu(&r, 16, 65536);
        blk[nb] = a->malloc(n);
        if (!blk[nb]) return 1;
        ((char *)blk[nb++])[0] = 1;
        live += n;
    }
    trace t;
    trace_make(&t, 1, 0x9E3779B97F4A7C15ull);
    if (limit > t.n) limit = t.n;
    void **slots = calloc(t.nslots, sizeof *slots);
    if (!slots) return 1;
    ICOUNT_ON();
    for (size_t i = 0; i < limit; i++) {
        const ev *e = &t.ev[i];
        if (e->op == EV_ALLOC) {
            ICOUNT("malloc", slots[e->slot] = a->malloc(e->size));
            if (!slots[e->slot]) return 1;
            ((char *)slots[e->slot])[0] = 1;
        } else if (e->op == EV_FREE) {
            ICOUNT("free", a->free(slots[e->slot]));
            slots[e->slot] = NULL;
        } else {
            ICOUNT("realloc", slots[e->slot] = a->realloc(slots[e->slot], e->size));
            if (!slots[e->slot]) return 1;
        }
    }
    ICOUNT_OFF();
    for (uint32_t i = 0; i < t.nslots; i++)
        if (slots[i]) a->free(slots[i]);
    for (size_t i = 0; i < nb; i++) a->free(blk[i]);
    subject_close(&subj[s]);
    free(slots);
    free(blk);
    free(t.ev);
    printf("icount: %s, %zu MiB live, %zu operations counted\n", name, heap >> 20, limit);
    return 0;
#endif
}
