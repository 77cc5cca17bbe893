/*
 * bench/bounds_hunk.c - the hunk's worst paths (docs/realtime.md).
 *
 * The hunk is filled from both ends with 64 KiB blocks up to about 7/8 of
 * its size (headers written, the blocks' bytes never touched), then each
 * call is counted on its dearest path: an allocation that must release the
 * temp block and retry, a new name when the name table is full (the table
 * is scanned), an aligned allocation that needs a padding block, a mark at
 * a new level (an entry pushed on the end's mark stack) and one whose entry
 * needs the next chunk of the stack committed, a free to a mark after a cut
 * above it and after hundreds of cuts at rising levels (the mark stack
 * decides in O(1)). A second hunk on caller memory (a fixed mark stack of
 * HUNK_MSTACK_FIXED levels per end, and a cut log) gives the same frees
 * decided by its fixed stack, and the free to a mark nested past those
 * levels after more cuts at rising levels than its cut log keeps: its
 * headers are walked (O(blocks below the mark), the unit of that row).
 *
 * Invariants: deterministic for the scale; the hunk passes check at the end.
 */
#include "bounds.h"

#include "heapkit/hunk.h"
#include "hunk_internal.h" /* the mark stacks' room and state, the cut log */

#include <stdlib.h>
#include <string.h>

enum { REPS = 8, FILL_BLOCK = 64 << 10 };

static void hunk_fill(hk_hunk *h, size_t bytes, int high, size_t *blocks) {
    for (size_t done = 0; done + FILL_BLOCK + 64 <= bytes; done += FILL_BLOCK + 16) {
        void *p = high ? hk_hunk_alloc_high(h, FILL_BLOCK, "fill") : hk_hunk_alloc(h, FILL_BLOCK, "fill");
        BD_REQUIRE(p);
        (*blocks)++;
    }
}

/* A hunk on caller memory has a fixed mark stack (HUNK_MSTACK_FIXED
 * entries per end) and keeps its cut log. A mark within the stack's levels
 * is decided from it after any number of cuts, the cut dropping the log's
 * entries above it (8 at most). Marks nested past the stack's levels get
 * no entry: more cuts at rising levels since such a mark than the log
 * keeps (8) make the free to it walk the end's headers from the bottom to
 * the mark. The memory is malloc's (mapped, its pages touched only where
 * headers are written). */
static void bd_hunk_caller_memory(size_t heap) {
    void *mem = malloc(heap);
    BD_REQUIRE(mem);
    hk_hunk *h = hk_hunk_create(&(hk_hunk_desc){.memory = mem, .size = heap, .flags = HK_FLAG_QUIET});
    BD_REQUIRE(h);
    hk_hunk_info in;
    BD_REQUIRE(hk_hunk_get_info(h, &in) == HK_OK);
    size_t blocks = 0;
    hunk_fill(h, in.capacity / 2 - in.capacity / 16, 0, &blocks);
    hunk_fill(h, in.capacity / 2 - in.capacity / 16, 1, &blocks);
    hk_result res;
    for (int high = 0; high < 2; high++) {
        hk_hunk_mark m2 = high ? hk_hunk_high_mark(h) : hk_hunk_low_mark(h);
        for (int i = 0; i < 300; i++) { /* past the stack's levels: the log holds 8 rising cuts */
            BD_REQUIRE(high ? hk_hunk_alloc_high(h, 64, "fill") : hk_hunk_alloc(h, 64, "fill"));
            hk_hunk_mark m3 = high ? hk_hunk_high_mark(h) : hk_hunk_low_mark(h);
            BD_REQUIRE(high ? hk_hunk_alloc_high(h, 64, "fill") : hk_hunk_alloc(h, 64, "fill"));
            BD_REQUIRE((high ? hk_hunk_free_to_high_mark(h, m3) : hk_hunk_free_to_low_mark(h, m3)) == HK_OK);
        }
        BD_REQUIRE(h->mstack[high].full && h->cutlog[high].n == HUNK_CUT_LOG);
        ICOUNT_ON();
        if (high) {
            BD_COUNT("hunk.high_mark", "caller memory, its fixed mark stack full: no entry", 0,
                     (void)hk_hunk_high_mark(h));
            BD_COUNT("hunk.free_to_high_mark",
                     "caller memory, 300 cuts at rising levels since the mark: its fixed mark stack read, 8 "
                     "log entries dropped",
                     0, res = hk_hunk_free_to_high_mark(h, m2));
        } else {
            BD_COUNT("hunk.low_mark", "caller memory, its fixed mark stack full: no entry", 0,
                     (void)hk_hunk_low_mark(h));
            BD_COUNT("hunk.free_to_low_mark",
                     "caller memory, 300 cuts at rising levels since the mark: its fixed mark stack read, 8 "
                     "log entries dropped",
                     0, res = hk_hunk_free_to_low_mark(h, m2));
        }
        ICOUNT_OFF();
        BD_REQUIRE(res == HK_OK);
    }
    /* the low end's stack filled at the bottom, a mark above them all */
    hk_hunk_reset(h);
    blocks = 0;
    for (unsigned i = 0; i < HUNK_MSTACK_FIXED; i++) {
        BD_REQUIRE(hk_hunk_alloc(h, 16, "fill"));
        blocks++;
        BD_REQUIRE(hk_hunk_low_mark(h).end & HUNK_MARK_STACKED);
    }
    hunk_fill(h, in.capacity / 2 - in.capacity / 16, 0, &blocks);
    /* a mark past the stack's levels after 7 logged cuts below it and one
     * above: the log read through all 8 entries */
    for (int i = 0; i < HUNK_CUT_LOG - 1; i++) {
        BD_REQUIRE(hk_hunk_alloc(h, 64, "fill"));
        hk_hunk_mark m3 = hk_hunk_low_mark(h);
        BD_REQUIRE(hk_hunk_alloc(h, 64, "fill"));
        BD_REQUIRE(hk_hunk_free_to_low_mark(h, m3) == HK_OK);
    }
    BD_REQUIRE(hk_hunk_alloc(h, 64, "fill"));
    hk_hunk_mark m1 = hk_hunk_low_mark(h);
    BD_REQUIRE(hk_hunk_alloc(h, 64, "fill"));
    hk_hunk_mark above = hk_hunk_low_mark(h);
    BD_REQUIRE(hk_hunk_alloc(h, 64, "fill"));
    BD_REQUIRE(hk_hunk_free_to_low_mark(h, above) == HK_OK);
    BD_REQUIRE(h->cutlog[0].n == HUNK_CUT_LOG && !(m1.end & HUNK_MARK_STACKED));
    ICOUNT_ON();
    BD_COUNT(
        "hunk.free_to_low_mark",
        "caller memory, mark past its 32-level stack, a cut above it since: the cut log read (8 entries)", 0,
        res = hk_hunk_free_to_low_mark(h, m1));
    ICOUNT_OFF();
    BD_REQUIRE(res == HK_OK);
    hk_hunk_mark m2 = hk_hunk_low_mark(h);
    blocks = m2.blocks; /* the walk's unit: every block below the mark */
    BD_REQUIRE(!(m2.end & HUNK_MARK_STACKED));
    for (int i = 0; i < 9; i++) {
        BD_REQUIRE(hk_hunk_alloc(h, 64, "fill"));
        hk_hunk_mark m3 = hk_hunk_low_mark(h);
        BD_REQUIRE(hk_hunk_alloc(h, 64, "fill"));
        BD_REQUIRE(hk_hunk_free_to_low_mark(h, m3) == HK_OK);
    }
    ICOUNT_ON();
    BD_COUNT("hunk.free_to_low_mark",
             "caller memory, mark past its 32-level stack, more than 8 cuts at rising levels since: headers "
             "walked (units: blocks below the mark)",
             blocks, res = hk_hunk_free_to_low_mark(h, m2));
    ICOUNT_OFF();
    BD_REQUIRE(res == HK_OK);
    BD_REQUIRE(hk_hunk_check(h) == HK_OK);
    hk_hunk_destroy(h);
    free(mem);
}

void bd_hunk(int scale) {
    size_t heap = bd_heap(scale);
    hk_hunk *h = hk_hunk_create(&(hk_hunk_desc){.size = heap, .flags = HK_FLAG_QUIET});
    BD_REQUIRE(h);
    hk_hunk_info in;
    BD_REQUIRE(hk_hunk_get_info(h, &in) == HK_OK);
    size_t cap = in.capacity, low_blocks = 0, high_blocks = 0;
    /* the name table full: HK_HUNK_NAMES distinct names in use */
    static char names[HK_HUNK_NAMES + REPS][16];
    for (int i = 0; i < HK_HUNK_NAMES + REPS; i++) snprintf(names[i], sizeof names[i], "name%03d", i);
    snprintf(names[0], sizeof names[0], "fill"); /* the fill's name is in the table */
    for (int i = 0; i < HK_HUNK_NAMES; i++) BD_REQUIRE(hk_hunk_alloc(h, 16, names[i]));
    low_blocks += HK_HUNK_NAMES;
    hunk_fill(h, cap / 2 - cap / 16, 0, &low_blocks);
    hunk_fill(h, cap / 2 - cap / 16, 1, &high_blocks);
    BD_REQUIRE(hk_hunk_get_info(h, &in) == HK_OK);
    void *p = NULL;
    ICOUNT_ON();
    for (int r = 0; r < REPS; r++) {
        BD_COUNT("hunk.alloc", "bump, name cached", 0, p = hk_hunk_alloc(h, 64, names[0]));
        BD_REQUIRE(p);
        BD_COUNT("hunk.alloc", "new name, name table full (scanned)", 0,
                 p = hk_hunk_alloc(h, 64, names[HK_HUNK_NAMES + r]));
        BD_REQUIRE(p);
        BD_REQUIRE(hk_hunk_alloc_temp(h, 4096));
        BD_COUNT("hunk.alloc_high", "temp block released first", 0, p = hk_hunk_alloc_high(h, 64, "fill"));
        BD_REQUIRE(p);
        BD_COUNT("hunk.alloc_aligned", "a padding block, its bytes filled (units: alignment bytes)", 4096,
                 p = hk_hunk_alloc_aligned(h, 4096, 64, "fill"));
        BD_REQUIRE(p);
        BD_COUNT("hunk.alloc_temp", "previous temp block released", 0, p = hk_hunk_alloc_temp(h, 4096));
        BD_REQUIRE(p);
        BD_COUNT("hunk.free_temp", "temp block present", 0, hk_hunk_free_temp(h));
        hk_hunk_mark m;
        BD_COUNT("hunk.low_mark", "a new level: an entry pushed", 0, m = hk_hunk_low_mark(h));
        BD_REQUIRE(hk_hunk_alloc(h, 64, "fill"));
        BD_COUNT("hunk.free_to_low_mark", "no cut since the mark", 0, (void)hk_hunk_free_to_low_mark(h, m));
        BD_REQUIRE(hk_hunk_alloc_temp(h, 4096));
        BD_COUNT("hunk.high_mark", "temp block released first, a new level: an entry pushed", 0,
                 m = hk_hunk_high_mark(h));
        BD_REQUIRE(hk_hunk_alloc_high(h, 64, "fill"));
        BD_COUNT("hunk.free_to_high_mark", "no cut since the mark", 0, (void)hk_hunk_free_to_high_mark(h, m));
    }
    /* a low allocation that fits only once the temp block is released */
    hk_hunk_get_info(h, &in);
    size_t room = in.capacity - in.low_used - in.high_used;
    for (int r = 0; r < REPS; r++) {
        BD_REQUIRE(hk_hunk_alloc_temp(h, room / 2));
        hk_hunk_mark m = hk_hunk_low_mark(h);
        BD_COUNT("hunk.alloc", "no room: temp block released, retried", 0,
                 p = hk_hunk_alloc(h, room - room / 4, "fill"));
        BD_REQUIRE(p);
        BD_REQUIRE(hk_hunk_free_to_low_mark(h, m) == HK_OK);
    }
    /* frees to a mark after a cut above it (nested marks freed inner
     * first): the end's mark stack decides, no header is read */
    for (int r = 0; r < 2; r++) {
        hk_hunk_mark m2 = hk_hunk_low_mark(h);
        BD_REQUIRE(hk_hunk_alloc(h, 64, "fill"));
        hk_hunk_mark m3 = hk_hunk_low_mark(h);
        BD_REQUIRE(hk_hunk_alloc(h, 64, "fill"));
        BD_REQUIRE(hk_hunk_free_to_low_mark(h, m3) == HK_OK); /* the cut */
        hk_result res;
        BD_COUNT("hunk.free_to_low_mark", "a cut above the mark since: the mark stack read", 0,
                 res = hk_hunk_free_to_low_mark(h, m2));
        BD_REQUIRE(res == HK_OK);
        m2 = hk_hunk_high_mark(h);
        BD_REQUIRE(hk_hunk_alloc_high(h, 64, "fill"));
        m3 = hk_hunk_high_mark(h);
        BD_REQUIRE(hk_hunk_alloc_high(h, 64, "fill"));
        BD_REQUIRE(hk_hunk_free_to_high_mark(h, m3) == HK_OK);
        BD_COUNT("hunk.free_to_high_mark", "a cut above the mark since: the mark stack read", 0,
                 res = hk_hunk_free_to_high_mark(h, m2));
        BD_REQUIRE(res == HK_OK);
    }
    /* hundreds of cuts at rising levels since the mark (a cut log would
     * have dropped the ones the mark needs): the mark stack decides, both
     * ends */
    for (int high = 0; high < 2; high++) {
        hk_hunk_mark m2 = high ? hk_hunk_high_mark(h) : hk_hunk_low_mark(h);
        ICOUNT_OFF();
        for (int i = 0; i < 300; i++) {
            BD_REQUIRE(high ? hk_hunk_alloc_high(h, 64, "fill") : hk_hunk_alloc(h, 64, "fill"));
            hk_hunk_mark m3 = high ? hk_hunk_high_mark(h) : hk_hunk_low_mark(h);
            BD_REQUIRE(high ? hk_hunk_alloc_high(h, 64, "fill") : hk_hunk_alloc(h, 64, "fill"));
            BD_REQUIRE((high ? hk_hunk_free_to_high_mark(h, m3) : hk_hunk_free_to_low_mark(h, m3)) == HK_OK);
        }
        ICOUNT_ON();
        hk_result res;
        if (high)
            BD_COUNT("hunk.free_to_high_mark",
                     "300 cuts at rising levels since the mark: the mark stack read", 0,
                     res = hk_hunk_free_to_high_mark(h, m2));
        else
            BD_COUNT("hunk.free_to_low_mark", "300 cuts at rising levels since the mark: the mark stack read",
                     0, res = hk_hunk_free_to_low_mark(h, m2));
        BD_REQUIRE(res == HK_OK);
    }
    /* marks nested until the low end's stack fills its committed room: the
     * next mark commits a chunk (an OS call, not counted) */
    {
        hk_hunk_mark base = hk_hunk_low_mark(h);
        ICOUNT_OFF();
        while (h->mstack[0].height < h->mstack[0].room) {
            BD_REQUIRE(hk_hunk_alloc(h, 16, "fill"));
            (void)hk_hunk_low_mark(h);
        }
        BD_REQUIRE(hk_hunk_alloc(h, 16, "fill"));
        ICOUNT_ON();
        BD_COUNT("hunk.low_mark",
                 "OS growth: a new level, the mark stack's next 16 KiB committed (plus mprotect)", 0,
                 (void)hk_hunk_low_mark(h));
        BD_REQUIRE(hk_hunk_free_to_low_mark(h, base) == HK_OK);
    }
    BD_COUNT("hunk.reset", "both ends full", 0, hk_hunk_reset(h));
    ICOUNT_OFF();
    BD_REQUIRE(hk_hunk_check(h) == HK_OK);
    hk_hunk_destroy(h);
    bd_hunk_caller_memory(heap);
}
