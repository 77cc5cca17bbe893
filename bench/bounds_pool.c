/*
 * bench/bounds_pool.c - the pool's worst paths (docs/realtime.md), at 10^3
 * .. 10^6 objects of 64 bytes (index_bits 20: 1,048,575 fast slots at
 * most; the fast capacity is the scale's object count).
 *
 * The pool is filled to its capacity but one slot, every object on two
 * lists and under a parent (a tree of fan-out 8). Counted: allocation from
 * the free queue, and, with the fast slots all taken, on the overflow path
 * (backing allocation and two hash inserts, each with a bounded step of
 * the tables' incremental growth); get of fast and overflow IDs (the
 * longest hash probe among all live overflow IDs); frees of an object on
 * two lists with a parent, of a subtree (units: objects freed) and with
 * children detached (units: children); the free that retires a slot whose
 * generations ran out and, with HK_POOL_WRAP, the allocation that wraps
 * one; list insertion and removal; a live-list iteration step; a frame
 * list's step over dead entries (units: entries skipped), the bounded step
 * (hk_pool_fiter_next_within, 64 entries at most), the push, the first
 * push (the array allocated) and the pushes past 3/4 of the room, each of
 * which takes a bounded step of the array's growth;
 * defer_end (units: objects released).
 *
 * Invariants: deterministic for the scale (the overflow hashes mix the
 * objects' addresses, so probe lengths may vary with the address layout;
 * the bound's 10% margin covers it); the pool passes check at the end.
 */
#include "bounds.h"

#include "heapkit/pool.h"

#include <string.h>

enum { REPS = 8, ELEM = 64 };

static hk_pool *pool_make(uint32_t cap, uint32_t flags) {
    hk_pool_desc d;
    memset(&d, 0, sizeof d);
    d.elem_size = ELEM;
    d.capacity = cap;
    d.index_bits = 20;
    d.flags = flags | HK_FLAG_QUIET;
    d.max_lists = 64;
    d.name = "bounds";
    hk_pool *p = hk_pool_create(&d);
    BD_REQUIRE(p);
    return p;
}

static void pool_main(int scale) {
    uint32_t n = bd_objects(scale);
    hk_pool *p = pool_make(n, 0);
    hk_pool_list la = hk_pool_list_create(p, 0, "tick"), lb = hk_pool_list_create(p, 1, "draw");
    BD_REQUIRE(la.value && lb.value);
    hk_pool_id *ids = calloc(n + 8192u, sizeof *ids);
    BD_REQUIRE(ids);
    void *obj = NULL;
    for (uint32_t i = 0; i + 1 < n; i++) {
        ids[i] = i ? hk_pool_alloc_child(p, ids[(i - 1) / 8], &obj) : hk_pool_alloc(p, &obj);
        BD_REQUIRE(ids[i].value);
        BD_REQUIRE(hk_pool_list_push_back(p, la, ids[i]) == HK_OK);
        BD_REQUIRE(hk_pool_list_push_back(p, lb, ids[i]) == HK_OK);
    }
    char lbl[160];
    hk_pool_id x = {0};
    hk_result r = HK_OK;
    ICOUNT_ON();
    for (int k = 0; k < REPS; k++) {
        /* one slot free: the alloc takes it, the free gives it back */
        BD_COUNT("pool.alloc", "fast slot from the free queue", 0, x = hk_pool_alloc(p, &obj));
        BD_REQUIRE(x.value);
        BD_COUNT("pool.get", "fast slot", 0, obj = hk_pool_get(p, ids[(uint32_t)k * 977u % (n - 1)]));
        BD_REQUIRE(obj);
        BD_COUNT("pool.list_push_back", "any", 0, r = hk_pool_list_push_back(p, la, x));
        BD_COUNT("pool.list_remove", "any", 0, r = hk_pool_list_remove(p, la, x));
        BD_REQUIRE(hk_pool_list_push_back(p, la, x) == HK_OK && hk_pool_list_push_back(p, lb, x) == HK_OK);
        BD_REQUIRE(hk_pool_set_parent(p, x, ids[0]) == HK_OK);
        BD_COUNT("pool.free", "leaf on two lists with a parent", 0,
                 r = hk_pool_free(p, x, HK_POOL_FREE_SUBTREE));
        BD_REQUIRE(r == HK_OK);
    }
    /* set_parent checks for a cycle up the new parent's chain (units: its
     * depth: the deepest object of the tree); list walking by hand; a stale ID */
    {
        uint32_t deep = n - 2, depth = 0;
        for (uint32_t k = deep; k; k = (k - 1) / 8) depth++;
        hk_pool_id leaf = ids[n / 8 + 1 < n - 2 ? n / 8 + 1 : 1];
        for (int k = 0; k < 4; k++) {
            BD_COUNT("pool.set_parent", "cycle check up the parent's chain (units: its depth)", depth,
                     r = hk_pool_set_parent(p, leaf, ids[deep - (uint32_t)k]));
            BD_REQUIRE(r == HK_OK);
        }
        hk_pool_id f = {0};
        BD_COUNT("pool.list_first", "any", 0, f = hk_pool_list_first(p, la));
        for (int k = 0; k < 4 && f.value; k++)
            BD_COUNT("pool.list_next", "any", 0, f = hk_pool_list_next(p, la, f));
        hk_pool_id stale = x; /* freed above: its slot's generation moved on */
        BD_COUNT("pool.get", "stale ID (NULL, reported)", 0, obj = hk_pool_get(p, stale));
        BD_REQUIRE(!obj);
    }
    /* live-list iteration: the steps of a whole pass (first and last out of line) */
    {
        hk_pool_iter it = hk_pool_iter_begin(p, la);
        uint32_t steps = 0;
        for (;;) {
            void *o;
            ICOUNT(steps < 4 || steps + 4 > n ? "pool.iter_next|live list step (first and last out of line)|0"
                                              : "pool.iter_next|live list step|0",
                   o = hk_pool_iter_next(&it));
            if (!o) break;
            steps++;
            if (steps == 64 && n > 256) { /* the middle is the same step: skip to the end uncounted */
                ICOUNT_OFF();
                while (steps + 4 < n - 1 && hk_pool_iter_next(&it)) steps++;
                ICOUNT_ON();
            }
        }
    }
    /* overflow: the fast slots all taken (one left: fill it) */
    x = hk_pool_alloc(p, &obj);
    BD_REQUIRE(x.value);
    uint32_t nov = n / 10 < 4000 ? n / 10 : 4000, novf = 0;
    hk_pool_info b;
    for (uint32_t i = 0; i < nov; i++) {
        /* the hash tables grow a step per insert (a table of twice the
         * size zeroed, then the old one moved) and the overflow slots a
         * segment at a time: the first 256 and every 4th are counted */
        if (i >= 256 && i % 4) {
            ids[n + i] = hk_pool_alloc(p, &obj);
            BD_REQUIRE(ids[n + i].value);
            novf++;
            continue;
        }
        BD_COUNT("pool.alloc", "overflow: backing allocation, two hash inserts, a step of table growth", 0,
                 ids[n + i] = hk_pool_alloc(p, &obj));
        BD_REQUIRE(ids[n + i].value);
        novf++;
    }
    for (uint32_t i = 0; i < novf; i++)
        BD_COUNT("pool.get", "overflow ID (hash probe)", 0, obj = hk_pool_get(p, ids[n + i]));
    for (uint32_t i = 0; i < novf && i < 64; i++)
        BD_COUNT("pool.free", "overflow object", 0, r = hk_pool_free(p, ids[n + i], HK_POOL_FREE_SUBTREE));
    /* a subtree: ids[1] and its descendants (fan-out 8) */
    ICOUNT_OFF();
    hk_pool_info before;
    BD_REQUIRE(hk_pool_get_info(p, &before) == HK_OK);
    ICOUNT_ON();
    BD_COUNT("pool.free", "?", 0, r = hk_pool_free(p, ids[1], HK_POOL_FREE_SUBTREE));
    BD_REQUIRE(r == HK_OK && hk_pool_get_info(p, &b) == HK_OK);
    ICOUNT_RELABEL(lbl, "pool.free", "subtree (units: objects freed)", before.live - b.live);
    BD_COUNT("pool.free", "children detached (units: children)", hk_pool_child_count(p, ids[2]),
             r = hk_pool_free(p, ids[2], HK_POOL_DETACH));
    /* a frame list whose entries are all dead but the last: one step skips them */
    hk_pool_flist fl = hk_pool_flist_create(p, 0, "layer");
    BD_REQUIRE(fl.value);
    uint32_t nf = 0, counted = 0;
    hk_pool_id *pushed = calloc(n / 4 + 1, sizeof *pushed);
    BD_REQUIRE(pushed);
    for (uint32_t i = 0; i < n / 2 && nf < n / 4; i++) {
        hk_pool_id id = ids[n - 2 - i];
        if (!hk_pool_get(p, id)) continue;
        /* the array (64 entries first) grows from 3/4 of its room on: each
         * push there copies 4 entries to the next array (the first one
         * allocates it, the last one switches) */
        uint32_t room = 64;
        while (nf >= room) room *= 2;
        uint32_t c0 = room - room / 4, sw = c0 + (c0 - 4 + 2) / 3; /* growth starts at c0, switches at sw */
        if (nf == 0)
            BD_COUNT("pool.flist_push", "first push: the array allocated", 0,
                     r = hk_pool_flist_push(p, fl, id));
        else if (nf == c0)
            BD_COUNT("pool.flist_push", "3/4 of the room: the next array allocated, 4 entries copied", 0,
                     r = hk_pool_flist_push(p, fl, id));
        else if (nf == sw)
            BD_COUNT("pool.flist_push", "the last entries copied: the list switches, the old array freed", 0,
                     r = hk_pool_flist_push(p, fl, id));
        else if (nf > c0 && nf < sw && (nf < 1024 || nf % 16 == 0))
            BD_COUNT("pool.flist_push", "past 3/4 of the room: 4 entries copied", 0,
                     r = hk_pool_flist_push(p, fl, id));
        else if (nf < room - room / 4 && counted++ < 64)
            BD_COUNT("pool.flist_push", "live fast ID", 0, r = hk_pool_flist_push(p, fl, id));
        else
            r = hk_pool_flist_push(p, fl, id);
        BD_REQUIRE(r == HK_OK);
        pushed[nf++] = id;
    }
    BD_REQUIRE(nf > 64);
    ICOUNT_OFF();
    for (uint32_t i = 0; i + 1 < nf; i++) (void)hk_pool_free(p, pushed[i], HK_POOL_DETACH);
    ICOUNT_ON();
    {
        hk_pool_fiter it = hk_pool_fiter_begin(p, fl);
        void *o;
        BD_COUNT("pool.fiter_next", "dead entries skipped (units: entries)", nf - 1,
                 o = hk_pool_fiter_next(&it));
        BD_REQUIRE(o && hk_pool_id_of(p, o).value == pushed[nf - 1].value);
        BD_COUNT("pool.fiter_next", "last step (scope closed)", 0, o = hk_pool_fiter_next(&it));
        BD_REQUIRE(!o);
        /* the bounded step over the same entries: 64 at most per call */
        it = hk_pool_fiter_begin(p, fl);
        for (int k = 0; k < 8 && !hk_pool_fiter_done(&it); k++)
            BD_COUNT("pool.fiter_next_within", "dead entries skipped, 64 at most (units: entries)", 64,
                     o = hk_pool_fiter_next_within(&it, 64));
        hk_pool_fiter_end(&it);
    }
    free(pushed);
    /* defer_end releasing objects freed inside the scope */
    {
        hk_pool_defer_begin(p);
        uint32_t nd = 0;
        for (uint32_t i = n / 8 + 1; i < n / 4; i++) { /* leaves outside the frame list's range */
            hk_pool_id id = ids[i];
            if (hk_pool_get(p, id) && hk_pool_child_count(p, id) == 0) {
                BD_REQUIRE(hk_pool_free(p, id, HK_POOL_DETACH) == HK_OK);
                nd++;
            }
        }
        BD_COUNT("pool.defer_end", "objects released (units: objects)", nd, r = hk_pool_defer_end(p));
        BD_REQUIRE(r == HK_OK);
    }
    ICOUNT_OFF();
    BD_REQUIRE(hk_pool_check(p) == HK_OK);
    hk_pool_destroy(p);
    free(ids);
}

/* Generation wrap: one free slot reused until its generations run out. */
static void pool_wrap(int scale, uint32_t flags) {
    uint32_t n = bd_objects(scale);
    hk_pool *p = pool_make(n, flags);
    void *obj;
    for (uint32_t i = 0; i + 1 < n; i++) BD_REQUIRE(hk_pool_alloc(p, &obj).value);
    hk_pool_info in;
    BD_REQUIRE(hk_pool_get_info(p, &in) == HK_OK);
    uint32_t uses = in.slot_uses;
    hk_pool_id x;
    for (uint32_t u = 0; u + 1 < uses; u++) {
        x = hk_pool_alloc(p, &obj);
        BD_REQUIRE(x.value);
        BD_REQUIRE(hk_pool_free(p, x, HK_POOL_DETACH) == HK_OK);
    }
    hk_result r;
    ICOUNT_ON();
    BD_COUNT("pool.alloc", "fast slot, its last generation", 0, x = hk_pool_alloc(p, &obj));
    BD_REQUIRE(x.value);
    if (flags & HK_POOL_WRAP) {
        BD_COUNT("pool.free", "generation wraps (HK_POOL_WRAP)", 0, r = hk_pool_free(p, x, HK_POOL_DETACH));
        BD_COUNT("pool.alloc", "after a generation wrap (HK_POOL_WRAP)", 0, x = hk_pool_alloc(p, &obj));
        BD_REQUIRE(x.value);
    } else {
        BD_COUNT("pool.free", "slot retired (generations used up)", 0,
                 r = hk_pool_free(p, x, HK_POOL_DETACH));
        BD_REQUIRE(r == HK_OK);
        BD_COUNT("pool.alloc", "no fast slot left: overflow after a retirement", 0,
                 x = hk_pool_alloc(p, &obj));
    }
    ICOUNT_OFF();
    BD_REQUIRE(hk_pool_check(p) == HK_OK);
    hk_pool_destroy(p);
}

void bd_pool(int scale) {
    pool_main(scale);
    pool_wrap(scale, 0);
    pool_wrap(scale, HK_POOL_WRAP);
}
