/*
 * bench/suite_hunk.c - the frame workload: each frame makes thousands of
 * small allocations of mixed sizes, writes a little into each (as code that
 * fills in a struct does), then everything from the frame is released at
 * once: free-to-mark for the hunk, reset for the bump pointer, one free per
 * block for malloc-style allocators.
 *
 * Metric: ns per allocation (allocation + its share of the release), the
 * median over ctx->reps runs, and each allocator's ratio to the hunk. The
 * row "hunk +CANARY" is the hunk with HK_FLAG_CANARY: what the trailing
 * canary costs (docs/hunk.md).
 */
#include "harness.h"
#include "heapkit/hunk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FRAME_ALLOCS 4000

static size_t g_sizes[FRAME_ALLOCS];
static void *g_ptrs[FRAME_ALLOCS];

/* 70% 16..128 bytes, 25% 128..1024, 5% 1 KiB..8 KiB. */
static void make_sizes(uint64_t seed) {
    uint64_t s = seed;
    for (int i = 0; i < FRAME_ALLOCS; i++) {
        uint64_t r = hkb_rand(&s);
        unsigned pick = (unsigned)(r % 100);
        size_t n;
        if (pick < 70)
            n = 16 + (size_t)((r >> 8) % 113);
        else if (pick < 95)
            n = 128 + (size_t)((r >> 8) % 897);
        else
            n = 1024 + (size_t)((r >> 8) % 7169);
        g_sizes[i] = n;
    }
}

/* What the program does with each block: 0 = a few field stores at its
 * start (the allocator's own cost dominates), 1 = fills the whole block (as
 * code loading data into it does). */
static int g_fill;

static inline void touch(void *p, size_t n) {
    if (g_fill) {
        memset(p, (int)(n & 0xff), n);
    } else {
        uint64_t *q = (uint64_t *)p;
        q[0] = n;
        q[1] = (uint64_t)(uintptr_t)p;
    }
    hkb_sink(p);
}

/* ---- raw bump pointer: the floor nothing can beat ----------------------- */

typedef struct bump {
    unsigned char *base, *top, *end;
} bump;

static inline void *bump_alloc(bump *b, size_t n) {
    uintptr_t p = ((uintptr_t)b->top + 15) & ~(uintptr_t)15;
    if (p + n > (uintptr_t)b->end) return NULL;
    b->top = (unsigned char *)(p + n);
    return (void *)p;
}

static double run_bump(int frames) {
    size_t cap = (size_t)64 << 20;
    bump b;
    b.base = malloc(cap);
    if (!b.base) return -1;
    b.end = b.base + cap;
    memset(b.base, 0, cap);
    uint64_t t0 = hkb_now_ns();
    for (int f = 0; f < frames; f++) {
        b.top = b.base;
        for (int i = 0; i < FRAME_ALLOCS; i++) {
            void *p = bump_alloc(&b, g_sizes[i]);
            if (!p) abort();
            touch(p, g_sizes[i]);
        }
    }
    uint64_t t1 = hkb_now_ns();
    free(b.base);
    return (double)(t1 - t0) / ((double)frames * FRAME_ALLOCS);
}

static double run_hunk(int frames, int high, uint32_t flags) {
    hk_hunk_desc d = {0};
    d.size = (size_t)64 << 20;
    d.flags = flags;
    hk_hunk *h = hk_hunk_create(&d);
    if (!h) return -1;
    /* Pre-touch the region, as the bump pointer's memset does. */
    void *start;
    size_t sz;
    hk_hunk_free_range(h, &start, &sz);
    memset(start, 0, sz);
    uint64_t t0 = hkb_now_ns();
    for (int f = 0; f < frames; f++) {
        hk_hunk_mark m = high ? hk_hunk_high_mark(h) : hk_hunk_low_mark(h);
        for (int i = 0; i < FRAME_ALLOCS; i++) {
            void *p =
                high ? hk_hunk_alloc_high(h, g_sizes[i], "frame") : hk_hunk_alloc(h, g_sizes[i], "frame");
            if (!p) abort();
            touch(p, g_sizes[i]);
        }
        if ((high ? hk_hunk_free_to_high_mark(h, m) : hk_hunk_free_to_low_mark(h, m)) != HK_OK) abort();
    }
    uint64_t t1 = hkb_now_ns();
    hk_hunk_destroy(h);
    return (double)(t1 - t0) / ((double)frames * FRAME_ALLOCS);
}

static double run_malloc(const hkb_allocator *a, int frames) {
    /* One warm-up frame so first-touch page faults are not counted. */
    for (int i = 0; i < FRAME_ALLOCS; i++) g_ptrs[i] = a->malloc(g_sizes[i]);
    for (int i = 0; i < FRAME_ALLOCS; i++) a->free(g_ptrs[i]);
    uint64_t t0 = hkb_now_ns();
    for (int f = 0; f < frames; f++) {
        for (int i = 0; i < FRAME_ALLOCS; i++) {
            void *p = a->malloc(g_sizes[i]);
            if (!p) abort();
            touch(p, g_sizes[i]);
            g_ptrs[i] = p;
        }
        for (int i = 0; i < FRAME_ALLOCS; i++) a->free(g_ptrs[i]);
    }
    uint64_t t1 = hkb_now_ns();
    return (double)(t1 - t0) / ((double)frames * FRAME_ALLOCS);
}

static void run_workload(hkb_ctx *ctx, const char *W, const char *what, int fill) {
    const char *S = "hunk";
    int frames = ctx->quick ? 40 : 250;
    g_fill = fill;
    hkb_section(S, W, what);

    const hkb_allocator *peers;
    int np = hkb_peers(&peers);
    enum { MAXA = 16 };
    double v[MAXA][32];
    const char *names[MAXA];
    int na = 0;
    names[na++] = "hunk";
    names[na++] = "hunk (high end)";
    names[na++] = "bump pointer";
    names[na++] = "hunk +CANARY";
    for (int i = 0; i < np && na < MAXA; i++) names[na++] = peers[i].name;
    int reps = ctx->reps > 32 ? 32 : ctx->reps;
    /* Interleave allocators inside each repetition so drifts in machine
     * load hit all of them alike. */
    for (int r = 0; r < reps; r++) {
        int k = 0;
        v[k++][r] = run_hunk(frames, 0, 0);
        v[k++][r] = run_hunk(frames, 1, 0);
        v[k++][r] = run_bump(frames);
        v[k++][r] = run_hunk(frames, 0, HK_FLAG_CANARY);
        for (int i = 0; i < np; i++) v[k++][r] = run_malloc(&peers[i], frames);
    }
    double med[MAXA];
    for (int k = 0; k < na; k++) {
        med[k] = hkb_median(v[k], reps);
        hkb_record(S, W, names[k], "ns_per_alloc", med[k], "ns");
    }
    for (int k = 1; k < na; k++) hkb_record(S, W, names[k], "ratio_vs_hunk", med[k] / med[0], "x");
    hkb_record(S, W, "hunk", "ratio_vs_bump", med[0] / med[2], "x");
    hkb_skip_missing(S, W);
    printf("   targets: hunk / bump pointer <= 1.3 (measured %.2f); glibc / hunk >= 10 (measured %.2f)\n",
           med[0] / med[2], med[4] / med[0]);
}

void hkb_suite_hunk(hkb_ctx *ctx);
void hkb_suite_hunk(hkb_ctx *ctx) {
    make_sizes(ctx->seed);
    run_workload(
        ctx, "frame",
        "4000 mixed-size allocations per frame (16 B - 8 KiB), 16 bytes written to each, released at "
        "frame end; ns per allocation",
        0);
    run_workload(ctx, "frame-fill",
                 "the same frames, each block filled entirely by its user; ns per allocation", 1);
}
