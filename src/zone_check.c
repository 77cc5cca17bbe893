/*
 * src/zone_check.c - the zone's introspection: check, walk, where, dump. The
 * top of the zone's layers (see src/zone_internal.h): it reads every
 * structure through the inline helpers of zone_internal.h and calls no
 * other zone file but zone_small.c's check, walk and where of the small
 * blocks (a threads zone is checked while no other thread is inside a
 * call); zone.c registers hk__zone_check_core as the instance core's
 * paranoid hook.
 *
 * Everything here reads the heap without trusting it: a header is used only
 * after its check bits and size were verified, and a list pointer is followed
 * only when it points into a region at a 16-byte boundary. The invariants
 * being verified are stated at the top of the file that maintains each
 * (zone_tlsf.c, zone_region.c, zone_small.c, zone_tags.c, zone.c). Nothing
 * here writes to the heap (the sanitizer poisoning of bytes it reads is
 * restored) or allocates.
 */
#include "zone_heaps.h"

#include <stdio.h>

#define ZONE_CORRUPT(kind, addr, ...)                                                                        \
    do {                                                                                                     \
        hk__report(ZONE_REP(z), HK_ERR_CORRUPT, (kind), (addr), 0, NULL, __VA_ARGS__);                       \
        return HK_ERR_CORRUPT;                                                                               \
    } while (0)

/* A list pointer that may be followed: inside a region's blocks, aligned,
 * header readable and intact. */
static int zone_ptr_sane(const hk_zone *z, const zone_blk *b) {
    int ri = zone_region_index(z, b);
    if (ri < 0 || ((uintptr_t)b & 15) || (const unsigned char *)b >= z->regions[ri].end) return 0;
    if (zone_is_poisoned(b, ZONE_HDR) || !zone_hdr_ok(b)) return 0;
    return zone_bsize(b) >= ZONE_MIN_BLOCK &&
           zone_bsize(b) <= (size_t)(z->regions[ri].end - (const unsigned char *)b);
}

/* Offset of the first byte of [p, p+n) that is not `fill`, or n. The bytes
 * are poisoned again afterwards when `repoison` says so. */
static size_t zone_scan_fill(const unsigned char *p, size_t n, unsigned fill, size_t repoison) {
    zone_unpoison(p, n);
    size_t off = hk__fill_find(p, n, fill);
    zone_poison(p, repoison);
    return off;
}

typedef struct zone_tally {
    size_t nfree, free_bytes, used_bytes, used_req, live, untracked, tracked, capacity;
    size_t clean_bytes; /* spans of the clean free blocks (given back to the OS) */
} zone_tally;

static hk_result zone_check_region(hk_zone *z, uint32_t ri, zone_tally *t) {
    const zone_region *r = &z->regions[ri];
    if (ri > 0 && z->regions[ri - 1].end + ZONE_HDR > r->base)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, r->base, "regions %u and %u overlap or are out of order",
                     ri - 1, ri);
    t->capacity += (size_t)(r->end - r->base);
    zone_blk *b = (zone_blk *)r->base;
    unsigned prev_used = 1;
    size_t prev_size = 0;
    while ((unsigned char *)b < r->end) {
        if ((size_t)(r->end - (unsigned char *)b) < ZONE_MIN_BLOCK)
            ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, b, "block at %p runs into the end of region %u", (void *)b,
                         ri);
        if (!zone_hdr_ok(b))
            ZONE_CORRUPT(
                HK_EK_CORRUPT_HEADER, zone_user(b),
                "header of block %p damaged (its check bits do not match; overrun of the block before?)",
                (void *)zone_user(b));
        size_t size = zone_bsize(b);
        unsigned used = b->bits & ZB_USED;
        if (size < ZONE_MIN_BLOCK || size > (size_t)(r->end - (unsigned char *)b) ||
            (used && size < ((b->bits & ZB_EXT) ? ZONE_EXT_OVH : ZONE_PLAIN_OVH) + zone_slack(b)))
            ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, zone_user(b), "block %p has an impossible size %zu",
                         (void *)zone_user(b), size);
        if (((b->bits & ZB_PREV_USED) != 0) != (prev_used != 0))
            ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, zone_user(b),
                         "block %p says the block before it is %s, but it is %s", (void *)zone_user(b),
                         (b->bits & ZB_PREV_USED) ? "used" : "free", prev_used ? "used" : "free");
        if (!prev_used && b->prev_size != prev_size)
            ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, zone_user(b),
                         "boundary tag before block %p says %llu bytes, the free block before it has %zu",
                         (void *)zone_user(b), (unsigned long long)b->prev_size, prev_size);
        if (used) {
            t->live++;
            t->used_bytes += size;
            t->used_req += zone_requested(b);
            if (b->tag == 0)
                ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, zone_user(b), "used block %p has tag 0",
                             (void *)zone_user(b));
            if (b->bits & ZB_EXT)
                t->tracked++;
            else {
                t->untracked++;
                if (b->tag != HK_TAG_STATIC)
                    ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, zone_user(b), "untracked block %p has tag %u",
                                 (void *)zone_user(b), b->tag);
            }
            if (ZONE_FLAGS(z) & HK_FLAG_CANARY) {
                size_t area = zone_area(b), req = zone_requested(b), n = area - req;
                size_t pe = (b->bits & ZB_EXT) ? n : (n > ZONE_OVERLAP ? n - ZONE_OVERLAP : 0);
                size_t off = n < HK_CANARY_BYTES ? 0 : zone_scan_fill(zone_user(b) + req, n, HK_FILL_PAD, pe);
                if (off != n) {
                    const char *name = zone_block_name(b);
                    hk__report(ZONE_REP(z), HK_ERR_CORRUPT, HK_EK_CORRUPT_CANARY, zone_user(b), req, name,
                               "block %p (%zu bytes, tag %u%s%s%s): canary damaged at byte %zu past the end",
                               (void *)zone_user(b), req, b->tag, name ? ", '" : "", name ? name : "",
                               name ? "'" : "", off);
                    return HK_ERR_CORRUPT;
                }
            }
        } else {
            if (!prev_used)
                ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, b, "free blocks %p and %p are adjacent (not merged)",
                             (void *)((unsigned char *)b - prev_size), (void *)b);
            if (b->tag || zone_slack(b) || (b->bits & ~(ZB_PREV_USED | ZB_FREE_STATE)))
                ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, b,
                             "free block %p has used-block fields (tag %u, bits %#x)", (void *)b, b->tag,
                             (unsigned)b->bits);
            if (b->bits & ZB_FREE_CLEAN) {
                /* given back to the OS: only the zone's own memory (a block
                 * without a whole page is clean when carved from a clean one) */
                uintptr_t lo;
                if (!z->decay_on || !zone_own_memory(z, b))
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, b,
                                 "free block %p (%zu bytes) is marked as given back to the OS, which %s",
                                 (void *)b, size,
                                 !z->decay_on ? "this zone never does" : "it may not do with caller memory");
                t->clean_bytes += zone_free_span(z, b, size, &lo);
            }
            t->nfree++;
            t->free_bytes += size;
            if (ZONE_FLAGS(z) & HK_FLAG_FILL) {
                size_t n = size - sizeof(zone_blk);
                size_t off = zone_scan_fill((unsigned char *)b + sizeof(zone_blk), n, HK_FILL_FREE, n);
                if (off != n)
                    ZONE_CORRUPT(HK_EK_CORRUPT_FREE, (unsigned char *)b + sizeof(zone_blk) + off,
                                 "free block %p (%zu bytes) was written after free at %p", (void *)b, size,
                                 (void *)((unsigned char *)b + sizeof(zone_blk) + off));
            }
        }
        prev_used = used;
        prev_size = size;
        b = zone_next(b);
    }
    if ((unsigned char *)b != r->end)
        ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, b, "blocks of region %u overrun its end %p", ri, (void *)r->end);
    if (!zone_hdr_ok(b) || b->size16 != 0 || !(b->bits & ZB_USED))
        ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, b, "end marker of region %u at %p damaged", ri, (void *)b);
    if (((b->bits & ZB_PREV_USED) != 0) != (prev_used != 0) || (!prev_used && b->prev_size != prev_size))
        ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, b, "end marker of region %u disagrees with its last block", ri);
    return HK_OK;
}

static hk_result zone_check_free_lists(hk_zone *z, const zone_tally *t) {
    size_t seen = 0;
    if (z->fl_map >> ZONE_FL_COUNT)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "first-level bitmap %#x has bits past level %u", z->fl_map,
                     ZONE_FL_COUNT);
    for (unsigned fl = 0; fl < ZONE_FL_COUNT; fl++) {
        if (((z->fl_map >> fl) & 1u) != (z->sl_map[fl] != 0))
            ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "first-level bit %u is %u but level %u has bitmap %#x",
                         fl, (z->fl_map >> fl) & 1u, fl, z->sl_map[fl]);
        for (unsigned sl = 0; sl < ZONE_SL_COUNT; sl++) {
            zone_blk *b = z->heads[fl][sl], *prev = NULL;
            if (((z->sl_map[fl] >> sl) & 1u) != (b != NULL))
                ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "bitmap bit (%u,%u) is %u but the list is %s", fl,
                             sl, (z->sl_map[fl] >> sl) & 1u, b ? "not empty" : "empty");
            for (; b; prev = b, b = b->next_free) {
                if (++seen > t->nfree)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, b,
                                 "free lists hold more blocks than the %zu free blocks in the heap (cycle?)",
                                 t->nfree);
                if (!zone_ptr_sane(z, b))
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, b, "free list (%u,%u) points to %p, not a block",
                                 fl, sl, (void *)b);
                unsigned f, s;
                zone_mapping(zone_bsize(b), &f, &s);
                if (b->bits & ZB_USED)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, b, "free list (%u,%u) holds used block %p", fl, sl,
                                 (void *)zone_user(b));
                if (f != fl || s != sl)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, b,
                                 "free block %p of %zu bytes is in list (%u,%u), not (%u,%u)", (void *)b,
                                 zone_bsize(b), fl, sl, f, s);
                if (prev && b->prev_free != prev) /* a head's back link is not kept (see zone_remove) */
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, b, "free block %p: back link %p should be %p",
                                 (void *)b, (void *)b->prev_free, (void *)prev);
            }
        }
    }
    if (seen != t->nfree)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "free lists hold %zu blocks, the heap has %zu free blocks",
                     seen, t->nfree);
    return HK_OK;
}

/* One class table's current, spare and partial runs (counted). */
static hk_result zone_check_tag_lists(hk_zone *z, const zone_tally *t) {
    size_t seen = 0;
    for (unsigned tag = 0; tag < ZONE_NTAGS; tag++) {
        int any = 0;
        for (unsigned w = 0; w < ZONE_TAG_WAYS; w++) any |= z->tag_head[tag][w] != NULL;
        if (((z->tag_map[tag >> 6] >> (tag & 63)) & 1u) != (unsigned)any)
            ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "tag bitmap bit %u disagrees with its lists", tag);
        if (!any) {
            if (z->tag_count[tag])
                ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "tag %u counts %u blocks but its lists are empty",
                             tag, z->tag_count[tag]);
            continue;
        }
        if (tag == 0) ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "tag 0 has a list");
        size_t cnt = 0, owned = 0;
        for (unsigned w = 0; w < ZONE_TAG_WAYS; w++) {
            zone_ext *h = z->tag_head[tag][w];
            if (!h) continue;
            zone_ext *e = h, *prev = NULL;
            uint32_t prev_seq = 0;
            do {
                /* the record must be where its block says (checked before following its links) */
                int ri = zone_region_index(z, e);
                zone_blk *b =
                    ri >= 0 && !((uintptr_t)e & 7) && !zone_is_poisoned(e, sizeof *e) ? e->blk : NULL;
                if (++seen > t->tracked || !b || !zone_ptr_sane(z, b) || !(b->bits & ZB_USED) ||
                    !(b->bits & ZB_EXT) || zone_ext_of(b) != e)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, e,
                                 "list %u of tag %u reaches %p, not the record of a tracked used block", w,
                                 tag, (void *)e);
                if (b->tag != tag)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, zone_user(b),
                                 "block %p with tag %u is in a list of tag %u", (void *)zone_user(b), b->tag,
                                 tag);
                if ((e->seq & (ZONE_TAG_WAYS - 1)) != w)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, zone_user(b),
                                 "block %p (sequence %u) is in list %u of tag %u", (void *)zone_user(b),
                                 e->seq, w, tag);
                if (prev && e->prev != prev)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, zone_user(b),
                                 "tag %u list: back link of %p is wrong", tag, (void *)zone_user(b));
                if (prev && (int32_t)(e->seq - prev_seq) < 0)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, zone_user(b),
                                 "tag %u list is out of allocation order at %p", tag, (void *)zone_user(b));
                prev = e;
                prev_seq = e->seq;
                cnt++;
                if (e->owner) owned++;
                e = e->next;
            } while (e != h);
            if (h->prev != prev)
                ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, zone_user(h->blk),
                             "tag %u list %u: head's back link is not the tail", tag, w);
        }
        if (owned != z->tag_owned[tag])
            ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z,
                         "tag %u list has %zu blocks with owners, its count says %u", tag, owned,
                         z->tag_owned[tag]);
        if (cnt != z->tag_count[tag])
            ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "tag %u list has %zu blocks, its count says %u", tag,
                         cnt, z->tag_count[tag]);
    }
    if (seen != t->tracked)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "tag lists hold %zu blocks, the heap has %zu tracked blocks",
                     seen, t->tracked);
    return HK_OK;
}

/* The small blocks: every heap's runs (zone_small.c), and the granules
 * the heaps hold against the space's count. */
static hk_result zone_check_small(hk_zone *z) {
    if (!z->small_on) return HK_OK;
    size_t granules = 0;
    for (zs_heap *h = zone_heap_first(z); h; h = zone_heap_next(z, h)) {
        hk_result r = hk__zs_check_heap(h, ZONE_REP(z), &granules);
        if (r != HK_OK) return r;
    }
    if (granules != z->small.runs)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "the heaps hold %zu small-block runs, the space counts %zu",
                     granules, z->small.runs);
    return HK_OK;
}

/* The full check, lock held. */
static hk_result zone_check_all(hk_zone *z) {
    zone_tally t;
    memset(&t, 0, sizeof t);
    if (z->nregions > HK_ZONE_MAX_REGIONS)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "control block damaged: %u regions", z->nregions);
    for (uint32_t i = 0; i < z->nregions; i++) {
        hk_result r = zone_check_region(z, i, &t);
        if (r != HK_OK) return r;
    }
    hk_result r = zone_check_free_lists(z, &t);
    if (r == HK_OK) r = zone_check_tag_lists(z, &t);
    if (r == HK_OK) r = zone_check_small(z);
    if (r != HK_OK) return r;
    if (t.capacity != z->capacity || t.free_bytes != z->free_bytes || t.nfree != z->free_blocks ||
        t.used_bytes != z->used_bytes || t.used_req != z->used_req || t.live != zone_live(z) ||
        t.untracked != z->untracked_live || t.used_bytes + t.free_bytes != t.capacity ||
        t.clean_bytes != z->clean_bytes)
        ZONE_CORRUPT(
            HK_EK_CORRUPT_STRUCTURE, z,
            "counters disagree with the heap: capacity %zu/%zu, free %zu/%zu in %zu/%zu blocks, used "
            "%zu/%zu (%zu/%zu asked) in %zu/%zu blocks, given back to the OS %zu/%zu bytes",
            z->capacity, t.capacity, z->free_bytes, t.free_bytes, z->free_blocks, t.nfree, z->used_bytes,
            t.used_bytes, z->used_req, t.used_req, zone_live(z), t.live, z->clean_bytes, t.clean_bytes);
    return HK_OK;
}

hk_result hk__zone_check_core(void *z) { return zone_check_all((hk_zone *)z); }

hk_result hk_zone_check(hk_zone *z) {
    if (!z) return HK_ERR_INVALID;
    hk__core_lock(&z->core);
    hk_result r = zone_check_all(z);
    hk__core_unlock(&z->core);
    return r;
}

/* ---- walk and where ---------------------------------------------------------- */

static void zone_info(const hk_zone *z, const zone_blk *b, hk_block_info *info) {
    memset(info, 0, sizeof *info);
    info->address = zone_user(b);
    size_t size = zone_bsize(b);
    if (b->bits & ZB_USED) {
        size_t req = zone_requested(b);
        info->requested = req;
        info->size = (ZONE_FLAGS(z) & HK_FLAG_CANARY) ? req : zone_area(b);
        info->overhead = size - req;
        info->flags = HK_BLOCK_USED;
        info->tag = b->tag;
        if (b->tag >= z->purge_level) info->flags |= HK_BLOCK_PURGEABLE;
        if (b->bits & ZB_EXT) {
            const zone_ext *e = zone_ext_of(b);
            info->owner = (void *)e->owner;
            info->name = e->name;
            info->site_file = e->file;
            info->site_line = e->line;
        }
    } else {
        info->size = size - ZONE_HDR;
        info->overhead = ZONE_HDR;
    }
}

/* What a visited span is: a block, or a small-block run's own header. */
enum { ZONE_SPAN_BLOCK, ZONE_SPAN_RUN };

/* Visits the spans of region ri in address order; stops at damage
 * (reported) or when fn returns non-zero. Returns fn's value, -1 on damage,
 * 0 at the end. A span is [start, start + len). */
typedef int (*zone_visit_fn)(const hk_zone *z, int kind, const unsigned char *start, size_t len,
                             const hk_block_info *info, void *user);

static int zone_visit_region(hk_zone *z, uint32_t ri, zone_visit_fn fn, void *user) {
    const zone_region *r = &z->regions[ri];
    zone_blk *b = (zone_blk *)r->base;
    while ((unsigned char *)b < r->end) {
        if (!zone_hdr_ok(b) || zone_bsize(b) < ZONE_MIN_BLOCK ||
            zone_bsize(b) > (size_t)(r->end - (unsigned char *)b)) {
            hk__report(ZONE_REP(z), HK_ERR_CORRUPT, HK_EK_CORRUPT_HEADER, b, 0, NULL,
                       "walk stopped at block %p: damaged header", (void *)zone_user(b));
            return -1;
        }
        hk_block_info info;
        zone_info(z, b, &info);
        int v = fn(z, ZONE_SPAN_BLOCK, (unsigned char *)b, zone_bsize(b), &info, user);
        if (v) return v;
        b = zone_next(b);
    }
    return 0;
}

typedef struct zone_walk_ctx {
    hk_walk_fn fn;
    void *user;
} zone_walk_ctx;

static int zone_walk_visit(const hk_zone *z, int kind, const unsigned char *start, size_t len,
                           const hk_block_info *info, void *user) {
    (void)z;
    (void)start;
    (void)len;
    if (kind != ZONE_SPAN_BLOCK) return 0;
    zone_walk_ctx *c = (zone_walk_ctx *)user;
    return c->fn(info, c->user);
}

int hk_zone_walk(hk_zone *z, hk_walk_fn fn, void *user) {
    if (!z || !fn) return -1;
    hk__core_lock(&z->core);
    zone_walk_ctx c = {fn, user};
    int v = 0;
    for (uint32_t i = 0; i < z->nregions && !v; i++) v = zone_visit_region(z, i, zone_walk_visit, &c);
    if (z->small_on)
        for (zs_heap *h = zone_heap_first(z); h && !v; h = zone_heap_next(z, h)) v = hk__zs_walk(h, fn, user);
    hk__core_unlock(&z->core);
    return v;
}

typedef struct zone_where_ctx {
    const unsigned char *addr;
    hk_block_info *info;
} zone_where_ctx;

static int zone_where_visit(const hk_zone *z, int kind, const unsigned char *start, size_t len,
                            const hk_block_info *info, void *user) {
    (void)z;
    (void)kind;
    zone_where_ctx *c = (zone_where_ctx *)user;
    if (c->addr >= start && c->addr < start + len) {
        *c->info = *info;
        return 1;
    }
    return 0;
}

hk_result hk_zone_where(hk_zone *z, const void *addr, hk_block_info *info) {
    if (!z || !info) return HK_ERR_INVALID;
    hk__core_lock(&z->core);
    int ri = zone_region_index(z, addr);
    int v = 0;
    if (z->small_on && zs_run_of(&z->small, addr)) {
        v = hk__zs_where(&z->small, addr, info);
    } else if (ri >= 0) {
        zone_where_ctx c = {(const unsigned char *)addr, info};
        v = zone_visit_region(z, (uint32_t)ri, zone_where_visit, &c);
    }
    hk__core_unlock(&z->core);
    return v == 1 ? HK_OK : HK_ERR_FOREIGN;
}

/* ---- dump (Z_DumpHeap) ---------------------------------------------------------- */

/* One formatted piece of the dump to fn (a line is at most 511 bytes:
 * longer ones are cut; no allocation). */
static void zone_out(hk_print_fn fn, void *user, const char *fmt, ...) HK__PRINTF(3, 4);
static void zone_out(hk_print_fn fn, void *user, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fn(line, user);
}

typedef struct zone_dump_ctx {
    hk_print_fn fn;
    void *user;
    size_t count[ZONE_NTAGS], bytes[ZONE_NTAGS];
    size_t free_count, free_bytes;
} zone_dump_ctx;

static int zone_dump_visit(const hk_zone *z, int kind, const unsigned char *start, size_t len,
                           const hk_block_info *i, void *user) {
    (void)z;
    zone_dump_ctx *c = (zone_dump_ctx *)user;
    if (kind == ZONE_SPAN_RUN) {
        const zs_run *r = (const zs_run *)start;
        zone_out(c->fn, c->user, "  %p %12zu  run of %u-byte blocks: %u of %u used, %u carved\n",
                 (const void *)r->base, len, r->stride, zs_used(r), r->nslots, r->bump);
        return 0;
    }
    if (!(i->flags & HK_BLOCK_USED)) {
        c->free_count++;
        c->free_bytes += len;
        zone_out(c->fn, c->user, "  %p %12zu  free\n", i->address, len);
        return 0;
    }
    c->count[i->tag]++;
    c->bytes[i->tag] += i->requested;
    char site[300] = "";
    if (i->site_file) snprintf(site, sizeof site, "  at %s:%d", i->site_file, i->site_line);
    zone_out(c->fn, c->user, "  %p %12zu  tag %3d%s  owner %-14p  %s%s\n", i->address, i->requested, i->tag,
             (i->flags & HK_BLOCK_PURGEABLE) ? " (purgeable)" : "", i->owner, i->name ? i->name : "-", site);
    return 0;
}

/* A heap's runs, each with its used blocks. */
static int zone_dump_slot(const hk_block_info *i, void *user) {
    zone_dump_ctx *c = (zone_dump_ctx *)user;
    c->count[HK_TAG_STATIC]++;
    c->bytes[HK_TAG_STATIC] += i->size;
    zone_out(c->fn, c->user, "    %p %12zu  tag %3d  small block\n", i->address, i->size, HK_TAG_STATIC);
    return 0;
}
static int zone_dump_small(const zs_heap *h, zone_dump_ctx *c) {
    for (const zs_run *r = h->all; r; r = r->all_next) {
        zone_dump_visit(NULL, ZONE_SPAN_RUN, (const unsigned char *)r, ZS_RUN, NULL, c);
        int v = hk__zs_walk_run(r, zone_dump_slot, c);
        if (v) return v;
    }
    return 0;
}

void hk_zone_dump(hk_zone *z, hk_print_fn fn, void *user) {
    if (!z) return;
    if (!fn) fn = hk_print_file;
    hk__core_lock(&z->core);
    zone_dump_ctx c; /* on the stack: dumping must not allocate */
    memset(&c, 0, sizeof c);
    c.fn = fn;
    c.user = user;
    zone_out(fn, user,
             "zone '%s': capacity %zu in %u regions, used %zu (%zu with headers) in %zu blocks, free %zu in "
             "%zu blocks, peak %zu, purge level %d, %llu purged, %llu grown; %zu small-block runs\n",
             ZONE_REP(z)->instance, z->capacity, z->nregions, z->used_req, z->used_bytes, zone_live(z),
             z->free_bytes, z->free_blocks, z->peak_used, z->purge_level, (unsigned long long)z->purge_count,
             (unsigned long long)z->grow_count, z->small_on ? z->small.runs : 0);
    zone_out(fn, user, "  %-14s %12s  %s\n", "address", "bytes", "tag, owner, name, site");
    int v = 0;
    for (uint32_t i = 0; i < z->nregions && !v; i++) {
        zone_out(fn, user, " region %u: %p .. %p\n", i, (void *)z->regions[i].base,
                 (void *)z->regions[i].end);
        v = zone_visit_region(z, i, zone_dump_visit, &c);
    }
    if (z->small_on && !v) {
        zone_out(fn, user, " small blocks:\n");
        for (zs_heap *h = zone_heap_first(z); h && !v; h = zone_heap_next(z, h)) v = zone_dump_small(h, &c);
    }
    if (v < 0) zone_out(fn, user, "  (dump stopped: the zone is damaged, see the report)\n");
    zone_out(fn, user, "totals per tag:\n");
    for (unsigned t = 1; t < ZONE_NTAGS; t++)
        if (c.count[t])
            zone_out(fn, user, "  tag %3u%s %8zu blocks %14zu bytes\n", t,
                     (int)t >= z->purge_level ? " (purgeable)" : "", c.count[t], c.bytes[t]);
    zone_out(fn, user, "  free    %8zu blocks %14zu bytes\n", c.free_count, c.free_bytes);
    hk__core_unlock(&z->core);
}
