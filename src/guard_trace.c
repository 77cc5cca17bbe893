/*
 * src/guard_trace.c - the guard heap's allocation and free stacks: capture
 * (through the host layer's one stack walker) and the trace depot, where
 * each distinct stack is stored once and named by a 32-bit id.
 *
 * Invariants: trace ids are 1..ntraces and never reused; record id-1 of
 * the trace region holds {next in hash chain, hash, depth} then depth
 * frames; buckets[h % nbuckets] heads the chain of traces with hash h, and
 * ntraces <= nbuckets until nbuckets is GUARD_TRACE_BUCKETS (the table
 * starts at one page and doubles, its chains rebuilt, so that a short run
 * faults in one page of it, not one per stack). Records are written under
 * the heap's lock; their hash, depth and frames never change afterwards,
 * so reports may read those without it (only the chain links, which
 * nothing but this file reads, are rebuilt).
 */
#include "guard_internal.h"

typedef struct guard_trace_hdr {
    uint32_t next; /* hash chain (trace id) */
    uint32_t hash;
    uint32_t depth;
    uint32_t pad;
} guard_trace_hdr;
_Static_assert(sizeof(guard_trace_hdr) == GUARD_TRACE_HDR, "trace_stride counts on it");

static _Thread_local bool guard_tl_alt __attribute__((tls_model("initial-exec")));

HK__NOINLINE int hk__guard_capture(const hk_guard *g, void **frames, int depth) {
    if (HK__UNLIKELY(!guard_tl_alt)) { /* first capture on this thread: its alternate signal stack */
        guard_tl_alt = true;
        if (g->core.flags & HK_GUARD_FAULT_HANDLER) hk_os_fault_thread_init();
    }
    if (g->core.flags & HK_GUARD_NO_TRACES) return 0;
    /* skip: this function and the heapkit frames above it */
    int n = hk_os_stack_capture(frames, g->frames, 1 + depth + g->skip,
                                (g->core.flags & HK_GUARD_EXACT_STACKS) ? HK_OS_STACK_EXACT : 0u);
    __asm__ volatile("" ::: "memory"); /* no tail call: the skip counts this frame */
    return n;
}

static const unsigned char *guard_trace_rec(const hk_guard *g, uint32_t id) {
    return guard_region_data(&g->trace_reg, g->page) + (size_t)(id - 1) * g->trace_stride;
}

const void *const *hk__guard_trace_get(const hk_guard *g, uint32_t id, int *n) {
    *n = 0;
    if (id == 0 || id > g->ntraces) return NULL;
    const unsigned char *rec = guard_trace_rec(g, id);
    const guard_trace_hdr *h = (const guard_trace_hdr *)(const void *)rec;
    *n = (int)h->depth;
    return (const void *const *)(const void *)(rec + sizeof *h);
}

/* Doubles the bucket table and rebuilds every chain (under the lock). */
static void guard_trace_grow(hk_guard *g) {
    uint32_t nb = g->nbuckets * 2;
    memset(g->buckets, 0, (size_t)nb * sizeof(uint32_t)); /* the old half was in use, the new one fresh */
    for (uint32_t id = 1; id <= g->ntraces; id++) {
        guard_trace_hdr *th = (guard_trace_hdr *)(void *)(uintptr_t)guard_trace_rec(g, id);
        uint32_t *b = &g->buckets[th->hash & (nb - 1)];
        th->next = *b;
        *b = id;
    }
    g->nbuckets = nb;
}

uint32_t hk__guard_trace_put(hk_guard *g, void *const *frames, int n) {
    if (n <= 0) return 0;
    uint64_t h64 = 0x51ed270b27a5c1d3ull;
    for (int i = 0; i < n; i++) h64 = guard_mix(h64 ^ (uint64_t)(uintptr_t)frames[i]);
    uint32_t h = (uint32_t)h64;
    uint32_t *bucket = &g->buckets[h & (g->nbuckets - 1)];
    for (uint32_t id = *bucket; id;) {
        const unsigned char *rec = guard_trace_rec(g, id);
        const guard_trace_hdr *th = (const guard_trace_hdr *)(const void *)rec;
        if (th->hash == h && th->depth == (uint32_t)n &&
            memcmp(rec + sizeof *th, frames, (size_t)n * sizeof(void *)) == 0)
            return id;
        id = th->next;
    }
    size_t need = (size_t)(g->ntraces + 1) * g->trace_stride;
    if (!guard_region_ensure(&g->trace_reg, need, g->page)) return 0;
    if (g->ntraces >= g->nbuckets && g->nbuckets < GUARD_TRACE_BUCKETS) {
        guard_trace_grow(g);
        bucket = &g->buckets[h & (g->nbuckets - 1)];
    }
    uint32_t id = ++g->ntraces;
    unsigned char *rec = (unsigned char *)(uintptr_t)guard_trace_rec(g, id);
    guard_trace_hdr *th = (guard_trace_hdr *)(void *)rec;
    th->next = *bucket;
    th->hash = h;
    th->depth = (uint32_t)n;
    th->pad = 0;
    memcpy(rec + sizeof *th, frames, (size_t)n * sizeof(void *));
    *bucket = id;
    return id;
}
