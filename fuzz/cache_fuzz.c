/*
 * fuzz/cache_fuzz.c - random operation sequences on a cache, alone (caller
 * memory) or living in a hunk's free middle (the first input byte says
 * which), decoded from the input (3 bytes an operation), against a model:
 * every handle with its size, fill byte, purgeable flag and lock count,
 * whether it is empty (purged), and where a locked block sits; in a hunk,
 * the hunk's own blocks too.
 * After every operation: every resident block holds its bytes at the
 * address deref gives (a locked one where it was locked), every empty
 * handle is empty and was purgeable and unlocked when it was emptied
 * (unless purged on request), stats count the resident blocks, and
 * hk_cache_check (and hk_hunk_check) pass.
 * Misuse fed on purpose: freed handles (double free, stale use), another
 * cache's handles, the none handle, unlock below zero, absurd sizes.
 */
#include "heapkit/cache.h"
#include "heapkit/hunk.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CF_MAX_OPS 250
#define CF_SLOTS   40
#define CF_HUNK    24

typedef struct cf_ent {
    uint32_t h; /* 0: slot unused */
    size_t n;
    unsigned char fill;
    int purgeable;
    unsigned locks;
    int empty;
    void *pinned; /* address while locked and resident */
} cf_ent;

typedef struct cf_hblk {
    unsigned char *p;
    size_t n;
    unsigned char fill;
} cf_hblk;

static int cf_reports;
static void cf_on_error(const hk_error *e, void *user) {
    (void)e;
    (void)user;
    cf_reports++;
}

static void cf_fail(const char *what, int op) {
    fprintf(stderr, "cache_fuzz: %s (operation %d)\n", what, op);
    abort();
}

static size_t cf_opaque(size_t n) {
    __asm__ volatile("" : "+r"(n));
    return n;
}

static void cf_paint(unsigned char *p, size_t n, unsigned char fill) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(fill + i);
}
static int cf_intact(const unsigned char *p, size_t n, unsigned char fill) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(fill + i)) return 0;
    return 1;
}

/* Handles the cache emptied by itself must have been purgeable and unlocked. */
static void cf_sync_purged(hk_cache *c, cf_ent *e, int op) {
    for (int k = 0; k < CF_SLOTS; k++) {
        if (!e[k].h || e[k].empty) continue;
        if (hk_cache_is_purged(c, (hk_cache_handle){e[k].h})) {
            if (!e[k].purgeable || e[k].locks) cf_fail("a locked or non-purgeable block was purged", op);
            e[k].empty = 1;
        }
    }
}

static void cf_verify(hk_cache *c, hk_hunk *hk, cf_ent *e, cf_hblk *hb, int nhb, int op) {
    size_t resident = 0;
    for (int k = 0; k < CF_SLOTS; k++) {
        if (!e[k].h) continue;
        hk_cache_handle h = {e[k].h};
        if (e[k].empty) {
            if (!hk_cache_is_purged(c, h)) cf_fail("an empty handle has a block", op);
            if (hk_cache_deref(c, h)) cf_fail("deref of an empty handle", op);
            continue;
        }
        resident++;
        unsigned char *p = (unsigned char *)hk_cache_deref(c, h);
        if (!p) cf_fail("deref of a resident block is NULL", op);
        if ((uintptr_t)p & 15) cf_fail("block not 16-aligned", op);
        if (hk_cache_size(c, h) != e[k].n) cf_fail("size differs from the model", op);
        if (!cf_intact(p, e[k].n, e[k].fill)) cf_fail("block contents changed", op);
        if (e[k].locks && e[k].pinned && p != e[k].pinned) cf_fail("a locked block moved", op);
        if (hk_cache_lock_count(c, h) != e[k].locks) cf_fail("lock count differs", op);
    }
    hk_stats st;
    hk_cache_stats(c, &st);
    if (st.live_blocks != resident) cf_fail("stats: resident blocks differ from the model", op);
    if (hk_cache_check(c) != HK_OK) cf_fail("cache check failed", op);
    if (hk) {
        for (int k = 0; k < nhb; k++)
            if (!cf_intact(hb[k].p, hb[k].n, hb[k].fill)) cf_fail("hunk block contents changed", op);
        if (hk_hunk_check(hk) != HK_OK) cf_fail("hunk check failed", op);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static unsigned char mem[64 << 10] __attribute__((aligned(64)));
    static unsigned char hunk_mem[64 << 10] __attribute__((aligned(64)));
    static unsigned char other_mem[8 << 10] __attribute__((aligned(64)));
    static cf_ent e[CF_SLOTS];
    static cf_hblk hb[CF_HUNK];
    static uint32_t freed[16];
    if (size < 1) return 0;
    int in_hunk = data[0] & 1;
    static const uint32_t flagsets[4] = {0, HK_FLAG_FILL, HK_FLAG_ZERO | HK_CACHE_SCRAMBLE, HK_FLAG_PARANOID};
    hk_hunk *hk = NULL;
    hk_cache_desc d;
    memset(&d, 0, sizeof d);
    d.flags = flagsets[(data[0] >> 1) & 3];
    d.on_error = cf_on_error;
    d.max_handles = 64;
    if (in_hunk) {
        hk_hunk_desc hd;
        memset(&hd, 0, sizeof hd);
        hd.memory = hunk_mem;
        hd.size = (size_t)(16 << 10) + (size_t)(data[0] >> 3) * 1024;
        hd.on_error = cf_on_error;
        hk = hk_hunk_create(&hd);
        if (!hk) cf_fail("hunk create failed", -1);
        d.hunk = hk;
        d.memory = mem; /* the control block and table */
        d.size = sizeof mem;
    } else {
        d.memory = mem;
        d.size = (size_t)(8 << 10) + (size_t)(data[0] >> 3) * 1024;
    }
    hk_cache *c = hk_cache_create(&d);
    hk_cache_desc od;
    memset(&od, 0, sizeof od);
    od.memory = other_mem;
    od.size = sizeof other_mem;
    od.on_error = cf_on_error;
    hk_cache *other = hk_cache_create(&od);
    if (!c || !other) cf_fail("create failed", -1);
    hk_cache_handle foreign = hk_cache_alloc(other, 32, "other");
    hk_hunk_mark hbase;
    memset(&hbase, 0, sizeof hbase);
    if (hk) hbase = hk_hunk_low_mark(hk);
    int nhb = 0, nfreed = 0;
    memset(e, 0, sizeof e);
    memset(freed, 0, sizeof freed);
    if (size > 1 + 3 * CF_MAX_OPS) size = 1 + 3 * CF_MAX_OPS;
    int op = 0;
    for (size_t i = 1; i + 3 <= size; i += 3, op++) {
        unsigned kind = data[i] % 24, a = data[i + 1], b = data[i + 2];
        cf_ent *s = &e[a % CF_SLOTS];
        hk_cache_handle h = {s->h};
        size_t n = (size_t)b * ((a & 0x80) ? 24u : 1u);
        int before = cf_reports;
        hk_result r;
        if (!s->h && kind < 20) { /* an unused slot: allocate */
            hk_cache_handle nh = hk_cache_alloc(c, n, "fz");
            cf_sync_purged(c, e, op);
            if (!nh.value) {
                if (cf_reports == before) cf_fail("failed allocation not reported", op);
            } else {
                memset(s, 0, sizeof *s);
                s->h = nh.value;
                s->n = n;
                s->fill = (unsigned char)(a + b);
                unsigned char *p = (unsigned char *)hk_cache_deref(c, nh);
                if (!p) cf_fail("fresh block has no address", op);
                if ((d.flags & HK_FLAG_ZERO))
                    for (size_t k = 0; k < n; k++)
                        if (p[k]) cf_fail("HK_FLAG_ZERO block not zero", op);
                cf_paint(p, n, s->fill);
            }
        } else if (kind < 20) {
            switch (kind) {
            case 0:
            case 1: /* free */
                r = hk_cache_free(c, h);
                if (s->locks) {
                    if (r != HK_ERR_LOCKED) cf_fail("free of a locked block not refused", op);
                    break;
                }
                if (r != HK_OK) cf_fail("free failed", op);
                freed[nfreed++ % 16] = s->h;
                s->h = 0;
                break;
            case 2: /* lock */
                if (s->locks > 4) break;
                if (hk_cache_lock(c, h) != HK_OK) cf_fail("lock failed", op);
                s->locks++;
                if (!s->empty) s->pinned = hk_cache_deref(c, h);
                break;
            case 3: /* unlock, below zero too */
                r = hk_cache_unlock(c, h);
                if (s->locks) {
                    if (r != HK_OK) cf_fail("unlock failed", op);
                    if (--s->locks == 0) s->pinned = NULL;
                } else if (r == HK_OK || cf_reports == before) {
                    cf_fail("unlock below zero accepted or not reported", op);
                }
                break;
            case 4:
            case 5: /* purgeable flag */
                if (hk_cache_set_purgeable(c, h, kind == 4) != HK_OK) cf_fail("set_purgeable failed", op);
                s->purgeable = kind == 4;
                break;
            case 6: /* purge on request */
                r = hk_cache_purge(c, h);
                if (s->locks && !s->empty) {
                    if (r != HK_ERR_LOCKED) cf_fail("purge of a locked block not refused", op);
                } else {
                    if (r != HK_OK) cf_fail("purge failed", op);
                    s->empty = 1;
                }
                break;
            case 7: { /* resize */
                unsigned char *old = s->empty ? NULL : (unsigned char *)hk_cache_deref(c, h);
                r = hk_cache_resize(c, h, n);
                cf_sync_purged(c, e, op);
                if (s->empty) {
                    if (r == HK_OK) cf_fail("resize of an empty handle accepted", op);
                    break;
                }
                (void)old;
                if (r == HK_OK) {
                    unsigned char *p = (unsigned char *)hk_cache_deref(c, h);
                    size_t keep = n < s->n ? n : s->n;
                    if (!cf_intact(p, keep, s->fill)) cf_fail("resize lost bytes", op);
                    s->n = n;
                    cf_paint(p, n, s->fill);
                    if (s->locks) s->pinned = p;
                } else if (cf_reports == before) {
                    cf_fail("failed resize not reported", op);
                }
                break;
            }
            case 8: /* reallocate (refills an empty handle) */
                r = hk_cache_reallocate(c, h, n);
                if (r == HK_ERR_LOCKED) {
                    if (!s->locks || s->empty) cf_fail("reallocate refused a block it may replace", op);
                    break;
                }
                if (r == HK_OK) {
                    unsigned char *p = (unsigned char *)hk_cache_deref(c, h);
                    s->empty = 0;
                    s->n = n;
                    cf_paint(p, n, s->fill);
                    if (s->locks) s->pinned = p;
                } else {
                    if (cf_reports == before) cf_fail("failed reallocate not reported", op);
                    s->empty = 1;
                    s->pinned = NULL;
                }
                cf_sync_purged(c, e, op); /* others it may have purged */
                break;
            case 10: /* lock high: move high when it can, then lock (an empty or locked handle just locks) */
                if (s->locks > 4) break;
                if (hk_cache_lock_high(c, h) != HK_OK) cf_fail("lock_high failed", op);
                s->locks++;
                if (!s->empty) s->pinned = hk_cache_deref(c, h);
                break;
            case 9: /* move high */
                r = hk_cache_move_high(c, h);
                if (s->empty) {
                    if (r == HK_OK) cf_fail("move_high of an empty handle accepted", op);
                } else if (s->locks) {
                    if (r != HK_ERR_LOCKED) cf_fail("move_high of a locked block not refused", op);
                } else if (r != HK_OK) {
                    cf_fail("move_high failed", op);
                }
                break;
            case 11: { /* purge all */
                size_t expect = 0;
                for (int k = 0; k < CF_SLOTS; k++)
                    if (e[k].h && !e[k].empty && e[k].purgeable && !e[k].locks) expect++;
                if (hk_cache_purge_all(c) != expect) cf_fail("purge_all count", op);
                for (int k = 0; k < CF_SLOTS; k++)
                    if (e[k].h && !e[k].empty && e[k].purgeable && !e[k].locks) e[k].empty = 1;
                break;
            }
            case 12:
                if (hk_cache_compact(c) != HK_OK) cf_fail("compact failed", op);
                break;
            case 13: (void)hk_cache_compact_step(c, (size_t)b * 16, 0, NULL); break;
            case 14: { /* interior and wild addresses: where */
                hk_block_info info;
                if (!s->empty) {
                    unsigned char *p = (unsigned char *)hk_cache_deref(c, h);
                    if (hk_cache_where(c, p + (s->n ? b % s->n : 0), &info) != HK_OK)
                        cf_fail("where() misses", op);
                }
                if (hk_cache_where(c, (const void *)(uintptr_t)(b + 1), &info) == HK_OK)
                    cf_fail("where() wild", op);
                break;
            }
            case 15: { /* absurd sizes */
                hk_cache_handle nh = hk_cache_alloc(c, cf_opaque(SIZE_MAX - b), "huge");
                cf_sync_purged(c, e, op);
                if (nh.value || cf_reports == before)
                    cf_fail("absurd allocation accepted or not reported", op);
                break;
            }
            default: /* touch */
                if (hk_cache_touch(c, h) != HK_OK) cf_fail("touch failed", op);
                break;
            }
        } else if (kind == 20) { /* misuse: freed handles */
            uint32_t f = freed[a % 16];
            if (!f) continue;
            int is_live = 0;
            for (int k = 0; k < CF_SLOTS; k++) is_live |= e[k].h == f;
            if (is_live) continue; /* the slot was reused and the very value came back: live again */
            r = hk_cache_free(c, (hk_cache_handle){f});
            if (r == HK_OK || cf_reports == before) cf_fail("free of a freed handle accepted", op);
            if (r != HK_ERR_DOUBLE_FREE && r != HK_ERR_STALE)
                cf_fail("free of a freed handle: wrong verdict", op);
            if (hk_cache_deref(c, (hk_cache_handle){f})) cf_fail("deref of a freed handle", op);
            if (hk_cache_lock(c, (hk_cache_handle){f}) == HK_OK) cf_fail("lock of a freed handle", op);
        } else if (kind == 21) { /* misuse: another cache's handle, the none handle */
            hk_cache_handle bad = (b & 1) ? foreign : (hk_cache_handle){0};
            int live_here = 0;
            for (int k = 0; k < CF_SLOTS; k++) live_here |= bad.value && e[k].h == bad.value;
            if (live_here) continue; /* the same value issued here too: not foreign to this cache */
            r = hk_cache_free(c, bad);
            if (r == HK_OK || cf_reports == before) cf_fail("foreign or none handle accepted", op);
            if (hk_cache_deref(c, bad)) cf_fail("deref of a foreign handle", op);
        } else if (hk && kind == 22) { /* the hunk allocates (may move or purge cache blocks) */
            if (nhb == CF_HUNK) continue;
            size_t hn = (size_t)b * 8;
            void *p = (a & 1) ? hk_hunk_alloc_high(hk, hn, "h") : hk_hunk_alloc(hk, hn, "l");
            cf_sync_purged(c, e, op);
            if (p) {
                hb[nhb].p = (unsigned char *)p;
                hb[nhb].n = hn;
                hb[nhb].fill = (unsigned char)a;
                cf_paint(hb[nhb].p, hn, hb[nhb].fill);
                nhb++;
            } else if (cf_reports == before) {
                cf_fail("failed hunk allocation not reported", op);
            }
        } else if (hk) { /* the hunk frees its low blocks: the middle widens */
            if (hk_hunk_free_to_low_mark(hk, hbase) != HK_OK) cf_fail("free to the base mark failed", op);
            int w = 0;
            for (int k = 0; k < nhb; k++) /* the high blocks stay */
                if ((uintptr_t)hb[k].p > (uintptr_t)hunk_mem + sizeof hunk_mem / 2 &&
                    hk_hunk_where(hk, hb[k].p, &(hk_block_info){0}) == HK_OK)
                    hb[w++] = hb[k];
            nhb = w;
        }
        for (int k = 0; k < CF_SLOTS; k++)
            if (e[k].h && e[k].empty) e[k].pinned = NULL;
        cf_verify(c, hk, e, hb, nhb, op);
    }
    for (int k = 0; k < CF_SLOTS; k++)
        if (e[k].h) {
            while (e[k].locks--) hk_cache_unlock(c, (hk_cache_handle){e[k].h});
            if (hk_cache_free(c, (hk_cache_handle){e[k].h}) != HK_OK) cf_fail("final free failed", op);
        }
    hk_stats st;
    hk_cache_stats(c, &st);
    if (st.live_blocks != 0) cf_fail("blocks left at the end", op);
    if (hk_cache_check(c) != HK_OK) cf_fail("final check failed", op);
    hk_cache_destroy(c);
    hk_cache_destroy(other);
    if (hk) {
        if (hk_hunk_check(hk) != HK_OK) cf_fail("final hunk check failed", op);
        hk_hunk_destroy(hk);
    }
    return 0;
}
