/*
 * bench/zone_bench.h - what suite zone's files share (bench/suite_zone.c,
 * bench/zone_common.c, bench/zone_latency.c): the subjects (the zone and its
 * variants, the peers, the Quake-style rover) and the game-frame trace.
 *
 * Invariants: one subject of each kind is open at a time through the
 * globals g_bz / g_br (subject_save / subject_restore switch between open
 * ones); every trace replay ends with no live block.
 */
#ifndef HEAPKIT_BENCH_ZONE_BENCH_H
#define HEAPKIT_BENCH_ZONE_BENCH_H

#include "harness.h"
#include "heapkit/zone.h"
#include "lib_zone_rover.h"

#include <stddef.h>
#include <stdint.h>

enum { SUBJ_PEER, SUBJ_ZONE, SUBJ_ZONE_LOCKED, SUBJ_ZONE_NR, SUBJ_ZONE_PF, SUBJ_ROVER };

int subj_is_zone(int kind);

/* Which zone variants a workload measures besides the zone itself. */
enum { SUBJ_SET_PLAIN, SUBJ_SET_FRAME /* +mutex, -noruns */, SUBJ_SET_LATENCY /* +prefault */ };

typedef struct subject {
    hkb_allocator a;
    int kind;
} subject;

/* The globals behind the zone and rover subjects, so that several
 * instances can be open at once (the frame workload interleaves them). */
typedef struct subject_state {
    hk_zone *bz;
    hkb_rover *br;
    void *br_mem;
    size_t br_size;
} subject_state;

enum { EV_ALLOC, EV_FREE, EV_REALLOC };

typedef struct ev {
    uint32_t slot;
    uint32_t size;
    uint32_t op;
} ev;

typedef struct trace {
    ev *ev;
    size_t n, cap;
    uint32_t nslots;
    size_t peak_live;
    size_t allocs;
} trace;

extern hk_zone *g_bz;
extern hkb_rover *g_br;
extern void *g_br_mem;
extern size_t g_br_size;
extern double g_replay_cpu; /* CPU ns per operation of the last trace_replay */

void *bz_malloc(size_t n);
void bz_free(void *p);
void *bz_realloc(void *p, size_t n);
void *bz_memalign(size_t a, size_t n);
size_t bz_usable(void *p);
void *br_malloc(size_t n);
void br_free(void *p);
void *br_realloc(void *p, size_t n);
size_t br_usable(void *p);

/* The zone as the preload configures it (1 MiB, growing), or the rover on
 * a `heap`-byte mapping; peers need nothing. */
void subject_open(const subject *s, size_t heap);
void subject_close(const subject *s);
subject_state subject_save(void);
void subject_restore(subject_state s);
/* The subjects of a workload: the zone, the variants of `set`, the peers,
 * the rover (HKB_ZONE_SUBJECTS=a,b keeps only those). Returns the count. */
int subjects(subject *out, int set);

double rnd_logu(uint64_t *r, double lo, double hi); /* log-uniform in [lo, hi) */
long lat_faults(void);                              /* page faults of this process so far */
void trace_make(trace *t, int quick, uint64_t seed);
double trace_replay(const hkb_allocator *a, const trace *t, void **slots, uintptr_t *top);

/* The latency workload (bench/zone_latency.c). */
void workload_latency(hkb_ctx *ctx);

#endif /* HEAPKIT_BENCH_ZONE_BENCH_H */
