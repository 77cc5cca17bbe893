/*
 * bench/bounds_gc.c - the gc's worst paths (docs/realtime.md), at 10^3 ..
 * 10^6 objects of a type holding 4 references (48 data bytes), on a
 * simulated clock (a counter: no clock in a counted path) with a per-step
 * cap of 64 objects: the cap, not the clock, bounds a step.
 *
 * Counted: allocations (from a free header slot; with no slot free, the one
 * that makes 64 more of the last chunk free, the one that allocates a new
 * header chunk, and the one that also commits reference-table pages: an
 * OS call, once per 16,384 objects), retain, release to a non-zero count (the object becomes a
 * cycle candidate) and to zero (queued), assign; hk_gc_step over a backlog
 * of garbage trees (each object examined releases 4 children, which join
 * the backlog: the worst work per object); hk_gc_collect over a heap whose
 * garbage is all in cycles (units: objects reclaimed; the full pass is
 * O(objects) by design: frames use hk_gc_step and hk_gc_collect_step, level
 * loads hk_gc_collect); hk_gc_collect_step, the cycle pass in slices of 64
 * objects, over garbage 2-cycles and over a ring of
 * 1000 objects, which a slice counts and defers. The allocations that grow
 * the reference table again on a collector whose table could not reserve
 * its address space (the OS refused, as on a 32-bit host: forced through
 * the OS failure point): chunked storage, a chunk per 4096 slots.
 *
 * Invariants: deterministic for the scale; the collector passes check and
 * is destroyed at the end.
 */
#include "bounds.h"

#include "gc_internal.h" /* the table's room and ring: which growth an allocation made */
#include "heapkit/gc.h"

#include <string.h>

enum { REFS = 4, STEP_MAX = 64 };

typedef struct node {
    hk_gc_obj *ref[REFS];
    uint64_t pad[2];
} node;

static void node_trace(void *data, size_t size, hk_gc_visit_fn visit, void *ctx, void *user) {
    (void)size;
    (void)user;
    node *n = data;
    for (int i = 0; i < REFS; i++) visit(n->ref[i], ctx);
}

static const hk_gc_type k_node = {"node", sizeof(node), node_trace, NULL, NULL};

static uint64_t g_ticks;
static uint64_t sim_clock(void *user) {
    (void)user;
    return g_ticks; /* never advances: steps end by their object cap */
}

static hk_gc *gc_make(void) {
    hk_gc_desc d;
    memset(&d, 0, sizeof d);
    d.flags = HK_FLAG_QUIET;
    d.name = "bounds";
    d.clock = sim_clock;
    d.step_max_objects = STEP_MAX;
    hk_gc *gc = hk_gc_create(&d);
    BD_REQUIRE(gc);
    return gc;
}

/* Is allocation i (0-based) one to count: the first ones, the first of
 * every 64-slot group up to 4096, those around a header chunk's start (the
 * table commits pages every 16 chunks) and around a power of two? */
static int gc_counted(uint32_t i) {
    if (i < 64 || (i < 4096 && i % 64 == 0)) return 1;
    if (i % HK_GC_CHUNK_OBJECTS <= 1 && (i / HK_GC_CHUNK_OBJECTS) % 16 <= 1) return 1;
    uint32_t j = i + 1;
    return (i & (i - 1)) == 0 || (j & (j - 1)) == 0;
}

static void gc_main(int scale) {
    uint32_t n = bd_objects(scale);
    hk_gc *gc = gc_make();
    hk_gc_obj **o = calloc(n, sizeof *o);
    BD_REQUIRE(o);
    char lbl[160];
    hk_stats a = {.size = sizeof a}, b = {.size = sizeof b};
    for (uint32_t i = 0; i < n; i++) {
        if (!gc_counted(i)) {
            o[i] = hk_gc_alloc(gc, &k_node);
            BD_REQUIRE(o[i]);
            continue;
        }
        BD_REQUIRE(hk_gc_stats(gc, &a) == HK_OK);
        ICOUNT_ON();
        ICOUNT("gc.alloc|?|0", o[i] = hk_gc_alloc(gc, &k_node));
        BD_REQUIRE(o[i] && hk_gc_stats(gc, &b) == HK_OK);
        /* a chunk shows in the capacity (its headers), committed table
         * pages in the overhead beyond the chunk */
        size_t chunk = b.capacity - b.used - (a.capacity - a.used);
        int committed = b.overhead - a.overhead > chunk;
        if (a.free_blocks)
            ICOUNT_RELABEL(lbl, "gc.alloc", "free header slot", 0);
        else if (committed)
            ICOUNT_RELABEL(lbl, "gc.alloc",
                           "OS growth: a header chunk and reference-table pages (plus 3 mprotect)", 0);
        else if (chunk)
            ICOUNT_RELABEL(lbl, "gc.alloc", "no free slot: a header chunk allocated, 64 slots made free", 0);
        else
            ICOUNT_RELABEL(lbl, "gc.alloc", "no free slot: 64 slots of the last chunk made free", 0);
        ICOUNT_OFF();
    }
    /* trees of fan-out 4: object i holds i*4+1 .. i*4+4 (one count each) */
    for (uint32_t i = 0; i < n; i++) {
        node *d = hk_gc_data(gc, o[i]);
        for (uint32_t k = 0; k < REFS; k++) {
            uint32_t c = i * REFS + 1 + k;
            if (c < n) {
                d->ref[k] = o[c];
            }
        }
    }
    /* the children's caller counts move into their parents */
    hk_result r = HK_OK;
    ICOUNT_ON();
    for (uint32_t i = 1; i < n; i++) {
        if (i < 16) {
            BD_COUNT("gc.retain", "any", 0, r = hk_gc_retain(gc, o[i]));
            BD_COUNT("gc.release", "to a non-zero count: a cycle candidate", 0, r = hk_gc_release(gc, o[i]));
        } else if (i == 16) {
            ICOUNT_OFF();
        }
    }
    /* (the data's references are counted by the objects' own caller counts:
     * each non-root object keeps exactly the count its parent holds) */
    ICOUNT_ON();
    for (int k = 0; k < 8; k++) {
        hk_gc_obj *field = NULL;
        hk_gc_obj *t = hk_gc_alloc(gc, &k_node);
        BD_REQUIRE(t);
        BD_COUNT("gc.assign", "store into an empty field", 0, r = hk_gc_assign(gc, &field, o[0]));
        BD_COUNT("gc.assign", "replace: old value released", 0, r = hk_gc_assign(gc, &field, t));
        BD_REQUIRE(hk_gc_release(gc, t) == HK_OK);
        BD_COUNT("gc.assign", "clear: last reference released (queued)", 0,
                 r = hk_gc_assign(gc, &field, NULL));
    }
    for (int k = 0; k < 4; k++) {
        void *dp = NULL;
        uint32_t rc = 0;
        BD_COUNT("gc.data", "live object", 0, dp = hk_gc_data(gc, o[k]));
        BD_COUNT("gc.refcount", "live object", 0, rc = hk_gc_refcount(gc, o[k]));
        BD_REQUIRE(dp && rc);
    }
    /* the root released: the whole tree is garbage, reclaimed by steps */
    BD_COUNT("gc.release", "to zero: queued", 0, r = hk_gc_release(gc, o[0]));
    BD_REQUIRE(r == HK_OK);
    size_t got = 0, first = 0;
    for (int k = 0; k < 12; k++) {
        BD_COUNT("gc.step", "backlog of garbage trees: 64 objects with 4 references each (units: objects)",
                 STEP_MAX, got = hk_gc_step(gc, 1000000));
        if (!k) first = got;
    }
    ICOUNT_OFF();
    BD_REQUIRE(first == STEP_MAX);
    while (hk_gc_step(gc, 0) > 0) continue;
    BD_REQUIRE(hk_gc_check(gc) == HK_OK);
    hk_gc_destroy(gc);
    free(o);
}

/* Garbage in cycles only: the full pass. */
static void gc_cycles(int scale) {
    uint32_t n = bd_objects(scale) / 2 * 2;
    hk_gc *gc = gc_make();
    hk_gc_obj **o = calloc(n, sizeof *o);
    BD_REQUIRE(o);
    for (uint32_t i = 0; i < n; i++) BD_REQUIRE((o[i] = hk_gc_alloc(gc, &k_node)) != NULL);
    for (uint32_t i = 0; i < n; i += 2) {
        BD_REQUIRE(hk_gc_assign(gc, &((node *)hk_gc_data(gc, o[i]))->ref[0], o[i + 1]) == HK_OK);
        BD_REQUIRE(hk_gc_assign(gc, &((node *)hk_gc_data(gc, o[i + 1]))->ref[0], o[i]) == HK_OK);
    }
    for (uint32_t i = 0; i < n; i++) BD_REQUIRE(hk_gc_release(gc, o[i]) == HK_OK);
    size_t got = 0, sliced = 0;
    int more = 0;
    ICOUNT_ON();
    /* slices first: each reclaims pairs within its budget of 64 objects */
    for (int k = 0; k < 8; k++) {
        BD_COUNT("gc.collect_step", "garbage 2-cycles, 64 objects budget (units: objects)", STEP_MAX,
                 got = hk_gc_collect_step(gc, STEP_MAX, &more));
        sliced += got;
    }
    BD_REQUIRE(sliced > 0 && sliced < n);
    BD_COUNT("gc.collect", "full pass: every object in a garbage cycle (units: objects)", n - sliced,
             got = hk_gc_collect(gc));
    ICOUNT_OFF();
    BD_REQUIRE(got == n - sliced);
    /* a garbage ring of 1000 objects: larger than a step */
    enum { RING = 1000 };
    hk_gc_obj *first = hk_gc_alloc(gc, &k_node), *cur = first;
    BD_REQUIRE(first);
    for (int i = 1; i < RING; i++) {
        hk_gc_obj *nx = hk_gc_alloc(gc, &k_node);
        BD_REQUIRE(nx && hk_gc_assign(gc, &((node *)hk_gc_data(gc, cur))->ref[0], nx) == HK_OK);
        BD_REQUIRE(hk_gc_release(gc, nx) == HK_OK);
        cur = nx;
    }
    BD_REQUIRE(hk_gc_assign(gc, &((node *)hk_gc_data(gc, cur))->ref[0], first) == HK_OK);
    BD_REQUIRE(hk_gc_release(gc, first) == HK_OK);
    ICOUNT_ON();
    for (int k = 0; k < 4; k++)
        BD_COUNT("gc.collect_step", "a subgraph larger than the step: counted and deferred (units: objects)",
                 STEP_MAX, got = hk_gc_collect_step(gc, STEP_MAX, &more));
    ICOUNT_OFF();
    BD_REQUIRE(got == 0 && more);
    BD_REQUIRE(hk_gc_collect(gc) == RING);
    BD_REQUIRE(hk_gc_check(gc) == HK_OK);
    hk_gc_destroy(gc);
    free(o);
}

/* The table's fallback (chunked storage): the allocations that find no
 * free slot, labelled by what they grew. */
static void gc_fallback(int scale) {
    uint32_t n = bd_objects(scale);
    hk_os_fail_after(1, false); /* the table's reservation, the create's first OS call */
    hk_gc *gc = gc_make();
    hk_os_fail_after(0, false);
    BD_REQUIRE(gc->ht.wdir != NULL);
    hk_gc_obj **o = calloc(n, sizeof *o);
    BD_REQUIRE(o);
    char lbl[160];
    for (uint32_t i = 0; i < n; i++) {
        if (hk__ht_nfree(&gc->ht) || !gc_counted(i)) {
            o[i] = hk_gc_alloc(gc, &k_node);
            BD_REQUIRE(o[i]);
            continue;
        }
        uint32_t room = gc->ht.room, ring = gc->ht.ring_mask;
        size_t chunks = gc->nchunks;
        ICOUNT_ON();
        ICOUNT("gc.alloc|?|0", o[i] = hk_gc_alloc(gc, &k_node));
        BD_REQUIRE(o[i]);
        if (gc->ht.ring_mask != ring)
            ICOUNT_RELABEL(lbl, "gc.alloc",
                           "chunked table (no reservation), no free slot: a table chunk and a ring of twice "
                           "the entries allocated (malloc may mmap)",
                           0);
        else if (gc->ht.room != room)
            ICOUNT_RELABEL(lbl, "gc.alloc",
                           "chunked table (no reservation), no free slot: a table chunk allocated", 0);
        else if (gc->nchunks != chunks)
            ICOUNT_RELABEL(
                lbl, "gc.alloc",
                "chunked table (no reservation), no free slot: a header chunk allocated, 64 slots made free",
                0);
        else
            ICOUNT_RELABEL(lbl, "gc.alloc",
                           "chunked table (no reservation), no free slot: 64 slots made free", 0);
        ICOUNT_OFF();
    }
    for (uint32_t i = 0; i < n; i++) BD_REQUIRE(hk_gc_release(gc, o[i]) == HK_OK);
    BD_REQUIRE(hk_gc_check(gc) == HK_OK);
    hk_gc_destroy(gc);
    free(o);
}

void bd_gc(int scale) {
    gc_main(scale);
    gc_fallback(scale);
    gc_cycles(scale);
}
