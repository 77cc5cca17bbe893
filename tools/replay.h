/*
 * tools/replay.h - plays a trace's allocation calls against an allocator:
 * with the recorded threads (each thread's calls in its order; a free
 * waits until the block it frees exists), or all on one thread in the
 * trace's order; and, for heap maps, on a heapkit zone up to an event.
 */
#ifndef HEAPKIT_TOOLS_REPLAY_H
#define HEAPKIT_TOOLS_REPLAY_H

#include "harness.h"
#include "trace.h"

#include <heapkit/zone.h>

typedef struct hkr_result {
    uint64_t time_ns;  /* wall time of the replay */
    uint64_t ops;      /* calls made */
    uint64_t failed;   /* allocations that returned NULL */
    uint64_t peak_rss; /* peak resident bytes added by the replay (0 if unknown) */
} hkr_result;

/* Replays the whole trace on `a` in this process. Every block gets a write
 * to each of its pages (as a program would), calloc'ed blocks are zeroed.
 * peak_rss is measured by resetting the kernel's high-water mark
 * (/proc/self/clear_refs), so run one allocator per process. Returns 0, or
 * -1 when out of memory (for the replay's own tables) or threads fail. */
int hkr_replay(const hkt_trace *t, const hkb_allocator *a, int one_thread, hkr_result *out);

/* The allocator named `name` ("zone" is a heapkit zone set up as
 * libheapkit-malloc.so sets it up; the others come from hkb_peers). Returns
 * 0, or -1 with the reason in why (a peer that is not installed). */
int hkr_allocator(const char *name, hkb_allocator *out, char *why, size_t whyn);

/* Replays events [0, upto) on one thread onto the zone z (for a heap map at
 * a moment of the trace). Blocks still live are left in z. */
void hkr_zone_until(const hkt_trace *t, size_t upto, hk_zone *z);

#endif /* HEAPKIT_TOOLS_REPLAY_H */
