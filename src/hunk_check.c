/*
 * src/hunk_check.c - looking at a hunk (heapkit/hunk.h): check, stats, walk,
 * where, and Quake's Hunk_Print as hk_hunk_dump.
 *
 * Verifies the invariants stated in src/hunk.c by walking both ends: every
 * header's sentinel, size, flags and name index, every canary and padding
 * byte (hk__fill_ok; canaries only in blocks made with HK_FLAG_CANARY), the per-end counts, the tenant's
 * claim, and the mark stacks and cut logs that marks are decided by. Writes nothing to the hunk (headers are
 * read through copies, as they may be poisoned); reports the first damaged block (one report per walk).
 * hk__hunk_check is the core's paranoid hook: it takes no lock.
 *
 * Calls nothing in src/hunk.c.
 */
#include "hunk_internal.h"

#include <stdio.h>

hk_result hk_hunk_stats(const hk_hunk *h, hk_stats *out) {
    if (!h || !out) return HK_ERR_INVALID;
    memset(out, 0, sizeof *out);
    out->size = (uint32_t)sizeof *out;
    out->version = HK_STATS_VERSION;
    out->allocator = "hunk";
    out->capacity = h->cap;
    out->used = h->low.user_bytes + h->high.user_bytes;
    out->used_blocks_bytes = hunk_total_used(h);
    out->free = hunk_free_bytes(h);
    /* The largest low-end request that fits the free middle now. */
    size_t tail = (h->core.flags & HK_FLAG_CANARY) ? HUNK_MIN_CANARY : 0;
    out->largest_free = out->free >= HUNK_HDR + 16 ? out->free - HUNK_HDR - tail : 0;
    out->peak_used = h->peak_used > hunk_total_used(h) ? h->peak_used : hunk_total_used(h);
    out->overhead = out->used_blocks_bytes - out->used;
    out->live_blocks = h->low.blocks + h->high.blocks;
    out->free_blocks = out->free ? 1 : 0;
    out->alloc_count = h->allocs;
    out->free_count = h->frees;
    out->fail_count = h->fail_count;
    out->error_count = h->core.rep.error_count;
    return HK_OK;
}

/* ---- walking and checking ------------------------------------------------- */

typedef struct hunk_block {
    unsigned char *start;
    hunk_hdr hdr; /* a copy: the original may be poisoned */
    size_t req, len;
    uint32_t flags;
} hunk_block;

/* Reads and validates the block at p, which must end by `limit`. */
static int hunk_read_block(hk_hunk *h, unsigned char *p, unsigned char *limit, int high, hunk_block *b,
                           const char **why) {
    b->start = p;
    if ((size_t)(limit - p) < HUNK_HDR) {
        *why = "block header runs past the end of its region";
        return 0;
    }
    hunk_read_hdr(p, &b->hdr);
    if (b->hdr.sentinel != HUNK_SENTINEL) {
        *why = "header sentinel damaged (overrun of the block below?)";
        return 0;
    }
    b->req = hunk_req(b->hdr.word);
    b->flags = hunk_flags_of(b->hdr.word);
    if ((uint64_t)b->req > HUNK_MAX_REQ ||
        (b->flags & ~(HUNK_F_HIGH | HUNK_F_TEMP | HUNK_F_PAD | HUNK_F_CANARY)) ||
        ((b->flags & HUNK_F_PAD) && ((b->req & 15) || (b->flags & HUNK_F_CANARY)))) {
        *why = "header size or flags damaged";
        return 0;
    }
    if (((b->flags & HUNK_F_HIGH) != 0) != (high != 0)) {
        *why = high ? "low-end block found on the high end" : "high-end block found on the low end";
        return 0;
    }
    uint32_t name = hunk_name_of(b->hdr.word);
    if (name >= h->nnames && name != HUNK_NAME_OTHER) {
        *why = "header name index damaged";
        return 0;
    }
    b->len = hunk_len(b->req, b->flags);
    if (b->len > (size_t)(limit - p)) {
        *why = "header size runs past the end of its region";
        return 0;
    }
    return 1;
}

/* The canary bytes after the user bytes, or a padding block's bytes; a
 * block without canary has nothing to compare. */
static int hunk_canary_ok(const hunk_block *b) {
    if (!(b->flags & (HUNK_F_PAD | HUNK_F_CANARY))) return 1;
    unsigned char *from = b->start + HUNK_HDR + ((b->flags & HUNK_F_PAD) ? 0 : b->req);
    size_t n = (size_t)(b->start + b->len - from);
    hk__asan_unpoison(from, n);
    int ok = hk__fill_ok(from, n, HK_FILL_PAD);
    hk__asan_poison(from, n);
    return ok;
}

static void hunk_info(const hk_hunk *h, const hunk_block *b, hk_block_info *info,
                      char name[HUNK_NAME_LEN + 1]) {
    memset(info, 0, sizeof *info);
    hunk_name_text(h, hunk_name_of(b->hdr.word), name);
    info->address = b->start + HUNK_HDR;
    info->requested = b->req;
    info->size = b->req;
    info->overhead = b->len - b->req;
    info->flags = HK_BLOCK_USED;
    if (b->flags & HUNK_F_HIGH) info->flags |= HK_BLOCK_HIGH;
    if (b->flags & HUNK_F_TEMP) info->flags |= HK_BLOCK_TEMP;
    info->name = name;
}

typedef int (*hunk_visit_fn)(hk_hunk *h, const hunk_block *b, void *user);

static int hunk_damaged(hk_hunk *h, const hunk_block *b, int canary, const char *why) {
    char name[HUNK_NAME_LEN + 1] = "?";
    if (b->start && b->hdr.sentinel == HUNK_SENTINEL) hunk_name_text(h, hunk_name_of(b->hdr.word), name);
    if (canary)
        hk__report(&h->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_CANARY, b->start + HUNK_HDR, b->req, name,
                   "block '%s' at %p (%zu bytes): %s", name, (void *)(b->start + HUNK_HDR), b->req, why);
    else
        hk__report(&h->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_HEADER, b->start, 0, name,
                   "block '%s' with header at %p: %s", name, (void *)b->start, why);
    return -1;
}

/* Visits one end's region [p, limit), padding blocks skipped. */
static int hunk_visit_end(hk_hunk *h, unsigned char *p, unsigned char *limit, int high, hunk_visit_fn fn,
                          void *user, int report, const hunk_end *e) {
    size_t count = 0, bytes = 0;
    const char *why = NULL;
    hunk_block b;
    unsigned char *last = NULL;
    while (p < limit) {
        if (!hunk_read_block(h, p, limit, high, &b, &why)) return report ? hunk_damaged(h, &b, 0, why) : -1;
        if (!hunk_canary_ok(&b)) {
            why = (b.flags & HUNK_F_PAD) ? "alignment padding damaged"
                                         : "canary damaged (write past the end of the block)";
            return report ? hunk_damaged(h, &b, !(b.flags & HUNK_F_PAD), why) : -1;
        }
        if (!(b.flags & HUNK_F_PAD)) {
            count++;
            bytes += b.req;
            last = p;
            if (fn) {
                int r = fn(h, &b, user);
                if (r) return r;
            }
        } else if (high && p == h->base + h->cap - h->high.used) {
            return report ? hunk_damaged(h, &b, 0, "padding block at the bottom of the high end") : -1;
        }
        p += b.len;
    }
    if (count != e->blocks || bytes != e->user_bytes || (!high && count && last != h->base + e->last)) {
        b.start = limit;
        b.hdr.sentinel = 0;
        return report ? hunk_damaged(h, &b, 0,
                                     "block counts in the control block disagree with the blocks found")
                      : -1;
    }
    return 0;
}

/* Visits every non-padding block: low end bottom-up, then the high end from
 * its lowest block up. Stops at the first damaged block (reported when
 * `report`). Returns the visitor's non-zero value, -1 for damage, else 0. */
static int hunk_visit(hk_hunk *h, hunk_visit_fn fn, void *user, int report) {
    if (h->low.used + h->high.used > h->cap || (h->low.used & 15) || (h->high.used & 15)) {
        if (report)
            hk__report(&h->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, h, h->cap, NULL,
                       "control block damaged: low %zu + high %zu exceed capacity %zu", h->low.used,
                       h->high.used, h->cap);
        return -1;
    }
    if (h->tenant_size && (h->tenant_start < h->base + h->low.used ||
                           h->tenant_start + h->tenant_size > h->base + h->cap - h->high.used)) {
        if (report)
            hk__report(&h->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, h->tenant_start, h->tenant_size,
                       NULL, "tenant claim %p..%p is outside the free middle %p..%p", (void *)h->tenant_start,
                       (void *)(h->tenant_start + h->tenant_size), (void *)(h->base + h->low.used),
                       (void *)(h->base + h->cap - h->high.used));
        return -1;
    }
    for (int end = 0; end < 2; end++) {
        /* the mark stack (hunk.c, marks): in the reservation or the fixed
         * entries, inside its committed room, levels rising from above 0,
         * the top's level the last entry's and not above the end */
        const hunk_mark_stack *s = &h->mstack[end];
        size_t used = end ? h->high.used : h->low.used;
        const uint64_t *at = h->mres ? (const uint64_t *)h->mres + (size_t)end * h->mcap : h->mfixed[end];
        int ok = s->stamps == at && (h->mres || h->mcap == HUNK_MSTACK_FIXED) && s->height <= s->room &&
                 s->room <= h->mcap && s->top <= used && (s->top & (HUNK_ALIGN - 1)) == 0 &&
                 (s->height == 0) == (s->top == 0);
        for (size_t i = 0; ok && i < s->height; i++) {
            uint64_t v = s->stamps[i];
            uint32_t lv = (uint32_t)(v >> 32), below = i ? (uint32_t)(s->stamps[i - 1] >> 32) : 0;
            ok =
                (lv > below || ((uint64_t)h->cap >> 36) != 0) && /* levels of 64 GiB and more are truncated */
                (i + 1 < s->height || v == hunk_mstack_entry((uint32_t)v, s->top));
        }
        if (!ok) {
            if (report)
                hk__report(&h->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, s->stamps, s->height, NULL,
                           "control block damaged: the %s end's mark stack", end ? "high" : "low");
            return -1;
        }
    }
    for (int end = 0; end < 2; end++) {
        /* the cut log (hunk.c, marks): cut numbers and levels rising, none
         * above the end's count and level */
        const hunk_cut_log *l = &h->cutlog[end];
        int ok = l->n <= HUNK_CUT_LOG && l->head < HUNK_CUT_LOG;
        for (uint32_t i = 0; ok && i < l->n; i++) {
            uint32_t at = (l->head + i) & (HUNK_CUT_LOG - 1u), pr = (at - 1u) & (HUNK_CUT_LOG - 1u);
            ok = l->level[at] <= (end ? h->high.used : h->low.used) &&
                 (int32_t)(h->cuts[end] - l->count[at]) >= 0 &&
                 (i == 0 || (l->level[pr] < l->level[at] && (int32_t)(l->count[at] - l->count[pr]) > 0));
        }
        if (!ok) {
            if (report)
                hk__report(&h->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, l, l->n, NULL,
                           "control block damaged: the %s end's cut log", end ? "high" : "low");
            return -1;
        }
    }
    int r = hunk_visit_end(h, h->base, h->base + h->low.used, 0, fn, user, report, &h->low);
    if (r) return r;
    return hunk_visit_end(h, h->base + h->cap - h->high.used, h->base + h->cap, 1, fn, user, report,
                          &h->high);
}

hk_result hk_hunk_check(hk_hunk *h) {
    if (!h) return HK_ERR_INVALID;
    hk__core_lock(&h->core);
    hk_result r = hunk_visit(h, NULL, NULL, 1) == 0 ? HK_OK : HK_ERR_CORRUPT;
    hk__core_unlock(&h->core);
    return r;
}

hk_result hk__hunk_check(void *self) {
    return hunk_visit((hk_hunk *)self, NULL, NULL, 1) == 0 ? HK_OK : HK_ERR_CORRUPT;
}

typedef struct hunk_walk_ctx {
    hk_walk_fn fn;
    void *user;
} hunk_walk_ctx;

static int hunk_walk_visit(hk_hunk *h, const hunk_block *b, void *user) {
    hunk_walk_ctx *c = (hunk_walk_ctx *)user;
    hk_block_info info;
    char name[HUNK_NAME_LEN + 1];
    hunk_info(h, b, &info, name);
    return c->fn(&info, c->user);
}

int hk_hunk_walk(hk_hunk *h, hk_walk_fn fn, void *user) {
    if (!h || !fn) return -1;
    hk__core_lock(&h->core);
    hunk_walk_ctx c = {fn, user};
    int r = hunk_visit(h, hunk_walk_visit, &c, 1);
    hk__core_unlock(&h->core);
    return r;
}

typedef struct hunk_where_ctx {
    const unsigned char *addr;
    hk_block_info *info;
    char *name;
} hunk_where_ctx;

static int hunk_where_visit(hk_hunk *h, const hunk_block *b, void *user) {
    hunk_where_ctx *c = (hunk_where_ctx *)user;
    if (c->addr >= b->start && c->addr < b->start + b->len) {
        hunk_info(h, b, c->info, c->name);
        return 1;
    }
    return 0;
}

hk_result hk_hunk_where(hk_hunk *h, const void *addr, hk_block_info *info) {
    /* The name must outlive the call: keep it in thread-local storage. */
    static _Thread_local char name[HUNK_NAME_LEN + 1];
    if (!h || !info) return HK_ERR_INVALID;
    const unsigned char *a = (const unsigned char *)addr;
    if (a < h->base || a >= h->base + h->cap) return HK_ERR_FOREIGN;
    hk__core_lock(&h->core);
    hunk_where_ctx c = {a, info, name};
    int r = hunk_visit(h, hunk_where_visit, &c, 0);
    hk__core_unlock(&h->core);
    return r == 1 ? HK_OK : HK_ERR_FOREIGN;
}

/* ---- Hunk_Print -------------------------------------------------------- */

/* One formatted piece of the dump to fn (at most 255 bytes; no allocation). */
static void hunk_out(hk_print_fn fn, void *user, const char *fmt, ...) HK__PRINTF(3, 4);
static void hunk_out(hk_print_fn fn, void *user, const char *fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fn(line, user);
}

typedef struct hunk_dump_ctx {
    hk_print_fn fn;
    void *user;
    size_t blocks[HUNK_NAMES], bytes[HUNK_NAMES], total[HUNK_NAMES];
} hunk_dump_ctx;

static int hunk_dump_visit(hk_hunk *h, const hunk_block *b, void *user) {
    hunk_dump_ctx *c = (hunk_dump_ctx *)user;
    char name[HUNK_NAME_LEN + 1];
    uint32_t idx = hunk_name_of(b->hdr.word);
    hunk_name_text(h, idx, name);
    hunk_out(c->fn, c->user, "  %-4s %p %10zu %10zu  %-16s%s\n", (b->flags & HUNK_F_HIGH) ? "high" : "low",
             (void *)(b->start + HUNK_HDR), b->req, b->len, name, (b->flags & HUNK_F_TEMP) ? " (temp)" : "");
    c->blocks[idx]++;
    c->bytes[idx] += b->req;
    c->total[idx] += b->len;
    return 0;
}

void hk_hunk_dump(hk_hunk *h, hk_print_fn fn, void *user) {
    if (!h) return;
    hunk_dump_ctx c; /* on the stack: dumping must not allocate */
    memset(&c, 0, sizeof c);
    c.fn = fn ? fn : hk_print_file;
    c.user = user;
    hk__core_lock(&h->core);
    hunk_out(c.fn, user, "hunk '%s': capacity %zu, low %zu, high %zu, free %zu%s\n", h->core.rep.instance,
             h->cap, h->low.used, h->high.used, hunk_free_bytes(h),
             h->temp_active ? ", temp block active" : "");
    hunk_out(c.fn, user, "  %-4s %-14s %10s %10s  %s\n", "end", "address", "bytes", "with hdr", "name");
    if (hunk_visit(h, hunk_dump_visit, &c, 1) < 0)
        hunk_out(c.fn, user, "  (walk stopped: the hunk is damaged, see the report)\n");
    hunk_out(c.fn, user, "totals per name:\n");
    for (uint32_t i = 0; i < HUNK_NAMES; i++) {
        if (!c.blocks[i]) continue;
        char name[HUNK_NAME_LEN + 1];
        hunk_name_text(h, i, name);
        hunk_out(c.fn, user, "  %-16s %6zu blocks %12zu bytes %12zu with headers\n", name, c.blocks[i],
                 c.bytes[i], c.total[i]);
    }
    hunk_out(c.fn, user, "  %-16s %6zu blocks %12zu bytes %12zu with headers\n", "(all)",
             h->low.blocks + h->high.blocks, h->low.user_bytes + h->high.user_bytes, hunk_total_used(h));
    hk__core_unlock(&h->core);
}
