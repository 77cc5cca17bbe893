/*
 * fuzz/zone_fuzz.c - drives a zone with operations decoded from the input
 * (alloc, tagged alloc, alloc_aligned, realloc, free, change_tag, free_tags,
 * purge, and misuse: double free, interior pointer) against a shadow model,
 * running hk_zone_check after every operation. Any disagreement aborts.
 * The first byte picks the zone: caller memory (every block a TLSF block)
 * or OS memory with growth (small blocks of up to 1 KiB in their runs),
 * flags, size.
 */
#include "heapkit/zone.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZF_SLOTS   32
#define ZF_MAX_OPS 300

typedef struct zf_slot {
    unsigned char *p;
    size_t size;
    size_t align;
    int tag;
    unsigned char pat;
    void *owner;
    int owned;
    int plain; /* from hk_zone_alloc: aligned as its size asks where small blocks are on */
} zf_slot;

/* The alignment hk_zone_alloc promises n bytes (zone.h): 16, or for a
 * small block the largest power of two up to 16 dividing n rounded to 8. */
static size_t zf_natural(size_t n, int small) {
    if (!small || n > 1024) return 16;
    size_t r = n < 8 ? 8 : (n + 7) & ~(size_t)7, low = r & (~r + 1);
    return low < 16 ? low : 16;
}

static int zf_reports;
static void zf_on_error(const hk_error *e, void *user) {
    (void)e;
    (void)user;
    zf_reports++;
}

static void zf_fail(const char *what, int op) {
    fprintf(stderr, "zone_fuzz: %s (operation %d)\n", what, op);
    abort();
}

static void zf_paint(zf_slot *s) {
    for (size_t i = 0; i < s->size; i++) s->p[i] = (unsigned char)(s->pat + i);
}
static int zf_intact(const zf_slot *s) {
    for (size_t i = 0; i < s->size; i++)
        if (s->p[i] != (unsigned char)(s->pat + i)) return 0;
    return 1;
}

static const int zf_tags[8] = {HK_TAG_STATIC,     HK_TAG_STATIC, HK_TAG_LEVEL, HK_TAG_LEVSPEC, 77,
                               HK_TAG_PURGELEVEL, HK_TAG_CACHE,  200};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static unsigned char mem[96 << 10] __attribute__((aligned(64)));
    if (size < 1) return 0;
    uint32_t flagsets[4] = {0, HK_FLAG_FILL | HK_FLAG_CANARY, HK_ZONE_TRACK_ALL,
                            HK_FLAG_ZERO | HK_FLAG_RECORD_SITE};
    hk_zone_desc d;
    memset(&d, 0, sizeof d);
    int os = (data[0] & 8) != 0; /* OS memory: small blocks on (without a debug flag) */
    if (os) {
        d.size = (size_t)(32 << 10);
        d.grow_size = (size_t)(32 << 10);
        d.max_size = (size_t)4 << 20;
    } else {
        d.memory = mem;
        d.size = (size_t)(32 << 10) + (size_t)(data[0] >> 2) * 1024;
    }
    d.flags = flagsets[data[0] & 3] | ((data[0] & 4) ? HK_ZONE_NO_RUNS : 0u);
    d.on_error = zf_on_error;
    hk_zone *z = hk_zone_create(&d);
    if (!z) zf_fail("create failed", -1);
    hk_zone_info zi;
    hk_zone_get_info(z, &zi);
    int small = os && !(d.flags & (HK_FLAG_FILL | HK_FLAG_CANARY | HK_FLAG_ZERO | HK_FLAG_RECORD_SITE |
                                   HK_ZONE_TRACK_ALL | HK_ZONE_NO_RUNS));
    zf_slot sl[ZF_SLOTS];
    memset(sl, 0, sizeof sl);
    int op = 0;
    /* at most ZF_MAX_OPS operations per input: each is followed by a full check */
    if (size > 1 + 3 * ZF_MAX_OPS) size = 1 + 3 * ZF_MAX_OPS;
    for (size_t i = 1; i + 3 <= size; i += 3, op++) {
        unsigned kind = data[i] >> 4;
        zf_slot *s = &sl[(data[i] & 0x0f) | ((data[i + 1] & 1u) << 4)];
        size_t n = (size_t)data[i + 1] * ((data[i + 2] & 0x80) ? 64u : 1u) + (data[i + 2] & 0x7f);
        int before = zf_reports;
        if (!s->p) {
            s->owner = NULL;
            s->owned = 0;
            s->align = 16;
            s->plain = 0;
            s->tag = HK_TAG_STATIC;
            if (kind < 6) {
                s->p = hk_zone_alloc(z, n);
                s->align = zf_natural(n, small);
                s->plain = 1;
            } else if (kind < 12) {
                s->tag = zf_tags[kind & 7];
                s->owned = 1;
                s->p = hk_zone_alloc_tagged(z, n, s->tag, &s->owner, "fuzz");
            } else {
                s->align = (size_t)1 << (data[i + 2] % 14);
                s->p = hk_zone_alloc_aligned(z, s->align, n);
            }
            for (int k = 0; k < ZF_SLOTS; k++) /* purged on exhaustion */
                if (sl[k].p && sl[k].owned && !sl[k].owner) {
                    if (sl[k].tag < HK_TAG_PURGELEVEL) zf_fail("non-purgeable block purged", op);
                    sl[k].p = NULL;
                }
            if (s->p) {
                if ((uintptr_t)s->p & (s->align - 1)) zf_fail("misaligned", op);
                if (hk_zone_usable_size(z, s->p) < n) zf_fail("usable size too small", op);
                s->size = n;
                s->pat = data[i + 2];
                zf_paint(s);
            } else if (zf_reports == before) {
                zf_fail("failed allocation not reported", op);
            }
        } else {
            if (!zf_intact(s)) zf_fail("block contents changed", op);
            if (kind < 5) {
                if (hk_zone_free(z, s->p) != HK_OK) zf_fail("free failed", op);
                if (s->owned && s->owner) zf_fail("owner not cleared", op);
                if (kind == 0) { /* misuse: free it again */
                    if (hk_zone_free(z, s->p) == HK_OK) zf_fail("double free accepted", op);
                }
                s->p = NULL;
            } else if (kind < 9) {
                unsigned char *q = hk_zone_realloc(z, s->p, n);
                for (int k = 0; k < ZF_SLOTS; k++)
                    if (sl[k].p && sl[k].owned && !sl[k].owner) {
                        if (sl[k].tag < HK_TAG_PURGELEVEL) zf_fail("non-purgeable block purged", op);
                        sl[k].p = NULL;
                    }
                if (!s->p) zf_fail("realloc purged its own block", op);
                if (q) {
                    if (s->plain) s->align = zf_natural(n, small);
                    size_t keep = n < s->size ? n : s->size;
                    for (size_t k = 0; k < keep; k++)
                        if (q[k] != (unsigned char)(s->pat + k)) zf_fail("realloc lost data", op);
                    if ((uintptr_t)q & (s->align - 1)) zf_fail("realloc lost alignment", op);
                    s->p = q;
                    s->size = n;
                    zf_paint(s);
                }
            } else if (kind < 11) {
                int t = zf_tags[data[i + 2] & 7];
                if (hk_zone_change_tag(z, s->p, t) == HK_OK) s->tag = t;
                if (hk_zone_tag(z, s->p) != s->tag) zf_fail("tag mismatch", op);
            } else if (kind == 11) {
                int lo = zf_tags[data[i + 1] & 7], hi = zf_tags[data[i + 2] & 7];
                size_t expect = 0;
                for (int k = 0; k < ZF_SLOTS; k++)
                    if (sl[k].p && sl[k].tag >= lo && sl[k].tag <= hi) expect++;
                if (hk_zone_free_tags(z, lo, hi) != expect) zf_fail("free_tags count", op);
                for (int k = 0; k < ZF_SLOTS; k++)
                    if (sl[k].p && sl[k].tag >= lo && sl[k].tag <= hi) sl[k].p = NULL;
            } else if (kind == 12) {
                size_t expect = 0;
                for (int k = 0; k < ZF_SLOTS; k++)
                    if (sl[k].p && sl[k].tag >= HK_TAG_PURGELEVEL) expect++;
                if (hk_zone_purge(z, 0) != expect) zf_fail("purge count", op);
                for (int k = 0; k < ZF_SLOTS; k++)
                    if (sl[k].p && sl[k].tag >= HK_TAG_PURGELEVEL) sl[k].p = NULL;
            } else if (kind == 13 && s->size > 0) { /* misuse: interior pointer */
                if (hk_zone_free(z, s->p + 1 + (n % s->size)) == HK_OK) zf_fail("interior free accepted", op);
                if (zf_reports == before) zf_fail("interior free not reported", op);
            } else {
                if (!hk_zone_owns(z, s->p)) zf_fail("owns() denies a live block", op);
            }
        }
        if (hk_zone_check(z) != HK_OK) zf_fail("check failed", op);
    }
    for (int k = 0; k < ZF_SLOTS; k++)
        if (sl[k].p) {
            if (!zf_intact(&sl[k])) zf_fail("block contents changed at the end", op);
            hk_zone_free(z, sl[k].p);
        }
    hk_stats st;
    hk_zone_stats(z, &st);
    if (st.live_blocks != 0 || st.used != 0) zf_fail("blocks left at the end", op);
    if (hk_zone_check(z) != HK_OK) zf_fail("final check failed", op);
    hk_zone_destroy(z);
    return 0;
}
