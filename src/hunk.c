/*
 * src/hunk.c - Quake's hunk: a region allocated from both ends.
 *
 * Block layout: src/hunk_internal.h. Introspection: src/hunk_check.c.
 *
 * Invariants (verified by hk_hunk_check):
 *  - low blocks tile [base, base + low.used) from the bottom; high blocks
 *    tile [base + cap - high.used, base + cap); low.used + high.used <= cap.
 *  - every header has the sentinel, a name index in the table, flags that
 *    match its end, and a length that stays inside its end.
 *  - every canary (blocks made with HK_FLAG_CANARY) and padding byte is
 *    HK_FILL_PAD.
 *  - low.last is the offset of the header of the last non-padding low block
 *    (it ends at low.used); the lowest high block is never padding.
 *  - blocks/user_bytes per end equal the counts and sums over that end's
 *    non-padding blocks; marks carry them so freeing to a mark restores
 *    them in O(1).
 *  - the temp block, when active, is the lowest high block and temp_mark is
 *    the high end as it was before the temp block.
 *  - a tenant's claim, when non-empty, lies inside the free middle:
 *    base + low.used <= tenant_start and tenant_start + tenant_size <=
 *    base + cap - high.used; allocations that would enter it first ask the
 *    tenant to give the bytes back (hunk_tenant_room).
 *
 * Marks carry the id of the hunk that issued them (a mark of another hunk
 * is refused). A mark is valid exactly when no cut of its end since it was
 * taken went below its offset (a cut: a free to a mark that freed blocks,
 * or a reset; not the temp block's release, which never reaches below a
 * mark: a high mark releases the temp block first). Bytes a block's owner
 * may hold are never read to decide it. Two ways, per end:
 *
 *  - The mark stack (hunk_mark_stack): one entry per distinct level at which a still-valid mark was taken,
 *    levels rising. A mark above 0 gets the top entry when the top's level
 *    is its offset, else a new entry on top with a fresh stamp; it carries
 *    the entry's depth and stamp. A cut to a valid mark at depth d drops
 *    every entry above d (their levels are above the cut: those marks went
 *    stale), a cut to 0 drops all: O(1), the entries are not touched. A
 *    mark is then valid exactly when its entry is still the one it was
 *    given (depth <= height and the same stamp): O(1) whatever the cuts.
 *    On OS memory the entries live in address space reserved at create for
 *    every level an end can hold (a level is a block boundary, blocks take
 *    32 bytes at least: cap / 32 + 1; on a 32-bit host at most
 *    HUNK_MSTACK_MAX32), committed a chunk at a time as marks go deeper.
 *    Without that reservation (caller memory, or the OS refused it) they
 *    are the HUNK_MSTACK_FIXED entries per end of hk_hunk.mfixed. When the
 *    stack has no room (a fixed stack's levels or a 32-bit host's run out,
 *    the OS refuses a chunk), the mark gets no entry (it lies above every
 *    entry, so cuts to it drop nothing, and no entry is pushed until a cut
 *    makes it stale) and is decided as below.
 *  - A mark that got no entry carries the number of cuts of its end then
 *    (cuts[end]). With no cut since, it is valid without reading anything.
 *    Otherwise the end's cut log (hunk_cut_log; kept, next to the stack,
 *    only without a reservation) answers in at most HUNK_CUT_LOG steps; only
 *    when it dropped the cuts the mark needs (more than HUNK_CUT_LOG cuts
 *    to rising levels since the mark) are the end's headers walked from
 *    where the hunk knows a header lies (the bottom of the low end, the
 *    lowest high block) to the mark: the mark is valid only when the walk
 *    lands on its offset and the block at its edge still carries the
 *    sequence number it had when the mark was taken.
 */
#include "hunk_internal.h"

/* ---- names ------------------------------------------------------------- */

static inline int hunk_name_eq(const char stored[HUNK_NAME_LEN], const char *name) {
    for (unsigned i = 0; i < HUNK_NAME_LEN; i++) {
        if (stored[i] != name[i]) return 0;
        if (name[i] == 0) return 1;
    }
    return 1; /* equal in the first HUNK_NAME_LEN bytes: the same truncated name */
}

static uint32_t hunk_next_id; /* ids handed to instances (marks carry them) */

static HK__NOINLINE uint32_t hunk_name_slow(hk_hunk *h, const char *name, unsigned slot) {
    uint32_t i;
    for (i = 1; i < h->nnames; i++)
        if (hunk_name_eq(h->names[i], name)) break;
    if (i == h->nnames) {
        if (h->nnames >= HUNK_NAME_OTHER) return HUNK_NAME_OTHER;
        size_t k = 0;
        for (; k < HUNK_NAME_LEN && name[k]; k++) h->names[i][k] = name[k];
        for (; k < HUNK_NAME_LEN; k++) h->names[i][k] = 0;
        h->nnames++;
    }
    hunk_name_cache *c = &h->name_cache[slot];
    c->ptr = name;
    c->idx = i;
    size_t len = 0;
    while (len < HUNK_NAME_LEN && h->names[i][len]) len++;
    size_t cmp = len < HUNK_NAME_LEN ? len + 1 : len; /* text, and its NUL unless truncated */
    c->mask[0] = cmp >= 8 ? ~(uint64_t)0 : (((uint64_t)1 << (cmp * 8)) - 1);
    c->mask[1] = cmp <= 8 ? 0 : cmp >= 16 ? ~(uint64_t)0 : (((uint64_t)1 << ((cmp - 8) * 8)) - 1);
    return i;
}

/* Is `name` still the text cached for its pointer? Two 8-byte loads when
 * they stay inside the name's page (so they cannot fault; this path is
 * never taken under a sanitizer or Valgrind, see `slow`), else bytewise. */
static inline int hunk_name_cached(const hk_hunk *h, const hunk_name_cache *c, const char *name) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (HK__LIKELY(((uintptr_t)name & 4095u) <= 4096u - 16u)) {
        uint64_t a, b, x, y;
        memcpy(&a, name, 8);
        memcpy(&b, name + 8, 8);
        memcpy(&x, h->names[c->idx], 8);
        memcpy(&y, h->names[c->idx] + 8, 8);
        return (((a ^ x) & c->mask[0]) | ((b ^ y) & c->mask[1])) == 0;
    }
#endif
    return hunk_name_eq(h->names[c->idx], name);
}

/* Name to table index: a pointer-keyed cache, confirmed by comparing the
 * text (a reused buffer with new text must not get the old name). */
static inline uint32_t hunk_name_index(hk_hunk *h, const char *name) {
    if (!name) return 0;
    unsigned slot = (unsigned)(((uintptr_t)name >> 3) & 7u);
    const hunk_name_cache *c = &h->name_cache[slot];
    if (HK__LIKELY(c->ptr == name && hunk_name_eq(h->names[c->idx], name))) return c->idx;
    return hunk_name_slow(h, name, slot);
}

/* ---- create / destroy -------------------------------------------------- */

/* Reserves both ends' mark stacks and commits their first chunk (see the
 * comment at the top). When the host or the OS cannot, the fixed stacks
 * (and the cut log) serve, as on caller memory. */
static void hunk_mstack_init(hk_hunk *h, int os) {
    for (int e = 0; e < 2; e++) {
        h->mstack[e].stamps = h->mfixed[e];
        h->mstack[e].room = HUNK_MSTACK_FIXED;
    }
    h->mcap = HUNK_MSTACK_FIXED;
    if (!os) return;
    size_t chunk = HUNK_MSTACK_CHUNK, pg = hk_os_page_size();
    if (chunk % pg) chunk = (chunk + pg - 1) / pg * pg;
    size_t entries = h->cap / 32 + 1;
    /* a 32-bit address space cannot spare cap / 4: at most HUNK_MSTACK_MAX32
     * levels per end, a mark past them gets no entry (decided by the walk) */
    if (sizeof(void *) < 8 && entries > HUNK_MSTACK_MAX32) entries = HUNK_MSTACK_MAX32;
    size_t per_end = (entries * sizeof(uint64_t) + chunk - 1) / chunk * chunk;
    unsigned char *r = (unsigned char *)hk_os_reserve(2 * per_end);
    if (!r) return;
    if (hk_os_commit(r, chunk) != HK_OK || hk_os_commit(r + per_end, chunk) != HK_OK) {
        hk_os_release(r, 2 * per_end);
        return;
    }
    h->mres = r;
    h->mres_size = 2 * per_end;
    h->mcap = per_end / sizeof(uint64_t);
    for (int e = 0; e < 2; e++) {
        h->mstack[e].stamps = (uint64_t *)(void *)(r + (size_t)e * per_end);
        h->mstack[e].room = chunk / sizeof(uint64_t);
    }
}

hk_hunk *hk_hunk_create(const hk_hunk_desc *desc) {
    if (!desc) return NULL;
    hk__core core;
    if (HK__CORE_INIT(&core, "hunk", desc, hk__hunk_check, NULL) != HK_OK) return NULL;
    unsigned char *mem;
    size_t size;
    void *os_base = NULL;
    size_t os_size = 0;
    if (desc->memory) {
        mem = (unsigned char *)desc->memory;
        size = desc->size;
        if (size < 4096) return NULL;
    } else {
        size_t want = desc->size ? desc->size : (size_t)64 << 20;
        if (!hk_size_add(want, sizeof(hk_hunk) + 64, &size)) return NULL;
        os_base = hk_os_alloc(size);
        if (!os_base) {
            hk__report(&core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, size, NULL,
                       "create: the OS refused %zu bytes for the hunk", size);
            return NULL;
        }
        os_size = size;
        mem = (unsigned char *)os_base;
    }
    uintptr_t start = hk_align_ptr((uintptr_t)mem, _Alignof(hk_hunk));
    uintptr_t area = hk_align_ptr(start + sizeof(hk_hunk), HUNK_ALIGN);
    uintptr_t end = ((uintptr_t)mem + size) & ~(uintptr_t)(HUNK_ALIGN - 1);
    if (area >= end || end - area < 256) {
        if (os_base) hk_os_release(os_base, os_size);
        return NULL;
    }
    hk_hunk *h = (hk_hunk *)start;
    memset(h, 0, sizeof *h);
    h->base = (unsigned char *)area;
    h->cap = end - area;
    h->core = core;
    h->core.self = h;
    h->os_base = os_base;
    h->os_size = os_size;
    memcpy(h->names[0], "unknown", 8);
    memcpy(h->names[HUNK_NAME_OTHER], "(other)", 8);
    h->nnames = 1;
    do h->id = __atomic_add_fetch(&hunk_next_id, 1, __ATOMIC_RELAXED);
    while (h->id == 0);
    if (HK__TRACKED(&h->core)) hk__track_create(&h->core);
    h->slow_base = h->core.locked_hooks || h->core.paranoid ||
                   (h->core.flags & (HK_FLAG_ZERO | HK_FLAG_FILL | HK_FLAG_CANARY)) || hk__asan_enabled();
    h->slow = h->slow_base;
    hunk_mstack_init(h, !desc->memory);
    hk__asan_poison(h->base, h->cap);
    return h;
}

static void hunk_track_free_range(hk_hunk *h, unsigned char *lo, unsigned char *hi);

void hk_hunk_destroy(hk_hunk *h) {
    if (!h) return;
    /* With a tool on the live blocks are announced gone (src/track.h), or a
     * hunk created later over the same addresses would overlap their
     * records. */
    if (HK__TRACKED(&h->core)) {
        hk__track_enter(&h->core); /* the walks read headers the program may not */
        hunk_track_free_range(h, h->base, h->base + h->low.used);
        hunk_track_free_range(h, h->base + h->cap - h->high.used, h->base + h->cap);
        hk__track_leave(&h->core);
        hk__track_heap(&h->core, h->base, h->cap, 0);
        hk__track_destroy(&h->core);
    }
    hk__asan_unpoison(h->base, h->cap);
    if (h->mres) hk_os_release(h->mres, h->mres_size);
    if (h->os_base) hk_os_release(h->os_base, h->os_size);
}

/* ---- allocation ---------------------------------------------------------- */

static HK__NOINLINE void *hunk_fail_nomem(hk_hunk *h, size_t size, int high) {
    h->fail_count++;
    hk__report(&h->core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, size, NULL,
               "%s allocation failed: asked %zu, low %zu, high %zu, capacity %zu", high ? "high" : "low",
               size, h->low.used, h->high.used, h->cap);
    return NULL;
}

static HK__NOINLINE void *hunk_fail_overflow(hk_hunk *h, size_t size) {
    h->fail_count++;
    hk__report(&h->core.rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, size, NULL,
               "asked %zu bytes, more than a hunk block can describe (capacity %zu)", size, h->cap);
    return NULL;
}

/* Writes the header of a block at start (the fast path: no canary). */
static inline void *hunk_fast_put(hk_hunk *h, unsigned char *start, size_t n, uint32_t idx, uint32_t flags) {
    hunk_hdr *hdr = (hunk_hdr *)start;
    hdr->sentinel = HUNK_SENTINEL;
    hdr->seq = (uint32_t)++h->allocs;
    hdr->word = hunk_word(n, idx, flags);
    return start + HUNK_HDR;
}

/* The canary of a block of `total` bytes with n user bytes: three 8-byte
 * stores, one right after the user bytes and two ending at the block end
 * (the canary is 8..23 bytes, so they cover it; user bytes they may touch
 * are fresh and unspecified anyway). */
static inline void hunk_put_canary(unsigned char *start, size_t total, size_t n) {
    const uint64_t pad = HUNK_PAD64;
    memcpy(start + HUNK_HDR + n, &pad, 8);
    memcpy(start + total - 16, &pad, 8);
    memcpy(start + total - 8, &pad, 8);
}

/* Tells the tools of the block [user, user + n) written at start (total
 * bytes; header and slack are the hunk's). Out of line: the common path
 * (no tool) pays one predictable test and keeps no registers for it. */
static HK__NOINLINE void hunk_track_block(hk_hunk *h, unsigned char *start, size_t total, unsigned char *user,
                                          size_t n) {
    hk__track_heap(&h->core, start, HUNK_HDR, 1);
    hk__track_heap(&h->core, user + n, (size_t)(start + total - (user + n)), 1);
    hk__track_alloc(&h->core, user, n, (h->core.flags & HK_FLAG_ZERO) != 0);
}

/* The general block writer: header and (with HK_FLAG_CANARY) canary, then
 * the user bytes zeroed or filled as the flags ask, with sanitizer
 * annotations and the tools told (src/track.h: header and slack are not the
 * program's). `total` must be hunk_block_len(h, n). */
static inline void *hunk_put_block(hk_hunk *h, unsigned char *start, size_t total, size_t n, uint32_t flags,
                                   uint32_t name) {
    hk__asan_unpoison(start, total);
    if (h->core.flags & HK_FLAG_CANARY) {
        flags |= HUNK_F_CANARY;
        hunk_put_canary(start, total, n);
    }
    unsigned char *user = hunk_fast_put(h, start, n, name, flags);
    if (HK__UNLIKELY(h->core.flags & (HK_FLAG_ZERO | HK_FLAG_FILL)))
        memset(user, (h->core.flags & HK_FLAG_ZERO) ? 0 : HK_FILL_ALLOC, n);
#ifdef HK__ASAN
    hk__asan_poison(start, HUNK_HDR);
    hk__asan_poison(user + n, (size_t)(start + total - (user + n)));
#endif
    if (HK__TRACKED(&h->core)) hunk_track_block(h, start, total, user, n);
    return user;
}

/* A padding block of `len` bytes (len >= 16, multiple of 16). */
static void hunk_put_pad(unsigned char *start, size_t len, uint32_t high) {
    hk__asan_unpoison(start, len);
    hunk_hdr *hdr = (hunk_hdr *)start;
    hdr->sentinel = HUNK_SENTINEL;
    hdr->seq = 0;
    hdr->word = hunk_word(len - HUNK_HDR, 0, HUNK_F_PAD | high);
    memset(start + HUNK_HDR, HK_FILL_PAD, len - HUNK_HDR);
    hk__asan_poison(start, len);
}

/* Block length for n user bytes (with a canary under HK_FLAG_CANARY); 0
 * when n is too large to describe. */
static inline size_t hunk_block_len(const hk_hunk *h, size_t n) {
    if (HK__UNLIKELY((uint64_t)n > HUNK_MAX_REQ)) return 0;
    return (h->core.flags & HK_FLAG_CANARY) ? hunk_canary_len(n) : hunk_plain_len(n);
}

static void hunk_release_temp(hk_hunk *h);

/* Makes sure an allocation whose low-end block ends at `edge` (high == 0)
 * or whose high-end block starts at `edge` (high == 1) stays out of the
 * tenant's claim, asking the tenant for the bytes when it does not. Returns
 * 1 when the allocation may proceed. */
static int hunk_tenant_room(hk_hunk *h, int high, uintptr_t edge) {
    if (!h->tenant_fn || !h->tenant_size) return 1;
    uintptr_t cs = (uintptr_t)h->tenant_start, ce = cs + h->tenant_size;
    if (!high ? edge <= cs : edge >= ce) return 1;
    size_t want = !high ? (size_t)(edge - cs) : (size_t)(ce - edge);
    size_t got = h->tenant_fn(h->tenant_user, high, want);
    if (got >= h->tenant_size) {
        h->tenant_start = NULL;
        h->tenant_size = 0;
        return 1;
    }
    if (!high) h->tenant_start += got;
    h->tenant_size -= got;
    return got >= want;
}

/* Low end, any alignment (>= 16, power of two). */
static void *hunk_alloc_low(hk_hunk *h, size_t n, size_t align, const char *name) {
    size_t body = hunk_block_len(h, n);
    if (!body) return hunk_fail_overflow(h, n);
    size_t lead = 0;
    if (HK__UNLIKELY(align > HUNK_ALIGN)) {
        uintptr_t start = (uintptr_t)h->base + h->low.used;
        lead = hk_align_ptr(start + HUNK_HDR, align) - HUNK_HDR - start;
    }
    size_t total = body + lead;
    if (HK__UNLIKELY(total < body || total > hunk_free_bytes(h))) {
        /* Drop the temp block only when that makes room. */
        if (h->temp_active && total >= body && total <= h->cap - h->low.used - h->temp_mark.used)
            hunk_release_temp(h);
        else
            return hunk_fail_nomem(h, n, 0);
    }
    unsigned char *start = h->base + h->low.used;
    if (!hunk_tenant_room(h, 0, (uintptr_t)(start + total))) return hunk_fail_nomem(h, n, 0);
    if (lead) hunk_put_pad(start, lead, 0);
    h->low.last = h->low.used + lead;
    h->low.used += total;
    h->low.user_bytes += n;
    h->low.blocks++;
    return hunk_put_block(h, start + lead, body, n, 0, hunk_name_index(h, name));
}

/* High end: the block ends at the current top; with alignment above 16,
 * a padding block fills the gap between the block and the top. */
static void *hunk_alloc_high(hk_hunk *h, size_t n, size_t align, uint32_t flags, const char *name) {
    size_t body = hunk_block_len(h, n);
    if (!body) return hunk_fail_overflow(h, n);
    uintptr_t top = (uintptr_t)h->base + h->cap - h->high.used;
    size_t trail = 0;
    if (HK__UNLIKELY(align > HUNK_ALIGN)) {
        size_t room = hunk_free_bytes(h);
        if (body > room) return hunk_fail_nomem(h, n, 1);
        uintptr_t user = (top - (body - HUNK_HDR)) & ~(uintptr_t)(align - 1);
        trail = (size_t)(top - (user + body - HUNK_HDR));
    }
    size_t total = body + trail;
    if (HK__UNLIKELY(total < body || total > hunk_free_bytes(h))) return hunk_fail_nomem(h, n, 1);
    unsigned char *start = (unsigned char *)top - total;
    if (!hunk_tenant_room(h, 1, (uintptr_t)start)) return hunk_fail_nomem(h, n, 1);
    if (trail) hunk_put_pad(start + body, trail, HUNK_F_HIGH);
    h->high.used += total;
    h->high.user_bytes += n;
    h->high.blocks++;
    return hunk_put_block(h, start, body, n, HUNK_F_HIGH | flags, hunk_name_index(h, name));
}

static int hunk_check_align(hk_hunk *h, size_t *align) {
    if (*align == 0) *align = HUNK_ALIGN;
    if (!hk_is_pow2(*align) || *align > ((size_t)1 << 30)) {
        h->fail_count++;
        hk__report(&h->core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, *align, NULL,
                   "alignment %zu is not a power of two up to 1 GiB", *align);
        return 0;
    }
    if (*align < HUNK_ALIGN) *align = HUNK_ALIGN;
    return 1;
}

/* The common case, kept small so it inlines into hk_hunk_alloc and
 * hk_hunk_alloc_high: no hooks, no debug flags, 16-byte alignment, a name
 * already in the cache, and the block fits. Returns the block length, or 0
 * to send the call down the general path. */
static inline size_t hunk_fast_fit(const hk_hunk *h, size_t n, const char *name, uint32_t *idx) {
    size_t total = hunk_plain_len(n);
    if (HK__UNLIKELY((uint64_t)n > HUNK_MAX_REQ || total > h->cap - h->low.used - h->high.used)) return 0;
    *idx = 0;
    if (name) {
        unsigned slot = (unsigned)(((uintptr_t)name >> 3) & 7u);
        const hunk_name_cache *c = &h->name_cache[slot];
        if (HK__UNLIKELY(c->ptr != name || !hunk_name_cached(h, c, name))) return 0;
        *idx = c->idx;
    }
    return total;
}

static HK__NOINLINE void *hunk_alloc_low_locked(hk_hunk *h, size_t size, const char *name) {
    hk__core_lock(&h->core);
    void *p = hunk_alloc_low(h, size, HUNK_ALIGN, name);
    hk__core_after(&h->core);
    hk__core_unlock(&h->core);
    return p;
}

void *hk_hunk_alloc(hk_hunk *h, size_t size, const char *name) {
    if (!h) return NULL;
    uint32_t idx;
    size_t total;
    if (HK__LIKELY(!h->slow) && HK__LIKELY((total = hunk_fast_fit(h, size, name, &idx)) != 0)) {
        unsigned char *start = h->base + h->low.used;
        h->low.last = h->low.used;
        h->low.used += total;
        h->low.user_bytes += size;
        h->low.blocks++;
        return hunk_fast_put(h, start, size, idx, 0);
    }
    return hunk_alloc_low_locked(h, size, name);
}

void *hk_hunk_alloc_aligned(hk_hunk *h, size_t align, size_t size, const char *name) {
    if (!h) return NULL;
    hk__core_lock(&h->core);
    void *p = hunk_check_align(h, &align) ? hunk_alloc_low(h, size, align, name) : NULL;
    hk__core_after(&h->core);
    hk__core_unlock(&h->core);
    return p;
}

void *hk_hunk_alloc_high(hk_hunk *h, size_t size, const char *name) {
    if (!h) return NULL;
    uint32_t idx;
    size_t total;
    if (HK__LIKELY(!h->slow && !h->temp_active) &&
        HK__LIKELY((total = hunk_fast_fit(h, size, name, &idx)) != 0)) {
        h->high.used += total;
        h->high.user_bytes += size;
        h->high.blocks++;
        return hunk_fast_put(h, h->base + h->cap - h->high.used, size, idx, HUNK_F_HIGH);
    }
    hk__core_lock(&h->core);
    if (h->temp_active) hunk_release_temp(h);
    void *p = hunk_alloc_high(h, size, HUNK_ALIGN, 0, name);
    hk__core_after(&h->core);
    hk__core_unlock(&h->core);
    return p;
}

void *hk_hunk_alloc_high_aligned(hk_hunk *h, size_t align, size_t size, const char *name) {
    if (!h) return NULL;
    hk__core_lock(&h->core);
    void *p = NULL;
    if (hunk_check_align(h, &align)) {
        if (h->temp_active) hunk_release_temp(h);
        p = hunk_alloc_high(h, size, align, 0, name);
    }
    hk__core_after(&h->core);
    hk__core_unlock(&h->core);
    return p;
}

void *hk_hunk_alloc_temp(hk_hunk *h, size_t size) {
    if (!h) return NULL;
    hk__core_lock(&h->core);
    hunk_release_temp(h);
    hunk_end before = h->high;
    void *p = hunk_alloc_high(h, size, HUNK_ALIGN, HUNK_F_TEMP, "temp");
    if (p) {
        h->temp_mark = before;
        h->temp_active = 1;
    }
    hk__core_after(&h->core);
    hk__core_unlock(&h->core);
    return p;
}

/* ---- freeing ------------------------------------------------------------- */

/* Tells the tools that the blocks in [lo, hi) are gone (only with a tool
 * on: this walk is O(blocks)); the range is the hunk's again. Under ASan the
 * headers it reads are opened (the callers poison the whole range after). */
static void hunk_track_free_range(hk_hunk *h, unsigned char *lo, unsigned char *hi) {
    if (!HK__TRACKED(&h->core)) return;
    for (unsigned char *p = lo; p + HUNK_HDR <= hi;) {
        hunk_hdr *hdr = (hunk_hdr *)p;
        hk__asan_unpoison(hdr, HUNK_HDR);
        if (hdr->sentinel != HUNK_SENTINEL) break;
        size_t len = hunk_len(hunk_req(hdr->word), hunk_flags_of(hdr->word));
        if (len > (size_t)(hi - p)) break;
        if (!(hunk_flags_of(hdr->word) & HUNK_F_PAD)) hk__track_free(&h->core, p + HUNK_HDR);
        p += len;
    }
    hk__track_heap(&h->core, lo, (size_t)(hi - lo), 1);
}

/* The tools told and the bytes filled for a range that left an end: out
 * of line, so that the common path (no tool, no fill) pays one predictable
 * test and keeps no registers across a call. */
static HK__NOINLINE void hunk_release_slow(hk_hunk *h, unsigned char *lo, unsigned char *hi) {
    hunk_track_free_range(h, lo, hi);
    if (h->core.flags & HK_FLAG_FILL) {
        hk__asan_unpoison(lo, (size_t)(hi - lo));
        memset(lo, HK_FILL_FREE, (size_t)(hi - lo));
    }
}

/* [lo, hi) just left an end, holding `blocks` blocks. */
static void hunk_release_range(hk_hunk *h, unsigned char *lo, unsigned char *hi, size_t blocks) {
    if (hi <= lo) return;
    h->frees += blocks;
    if (HK__UNLIKELY(h->core.track | (h->core.flags & HK_FLAG_FILL))) hunk_release_slow(h, lo, hi);
    hk__asan_poison(lo, (size_t)(hi - lo));
}

static void hunk_release_temp(hk_hunk *h) {
    if (!h->temp_active) return;
    hunk_note_peak(h);
    unsigned char *lo = h->base + h->cap - h->high.used;
    unsigned char *hi = h->base + h->cap - h->temp_mark.used;
    size_t blocks = h->high.blocks - h->temp_mark.blocks;
    h->high = h->temp_mark;
    h->temp_active = 0; /* no cut: every high mark lies at or below temp_mark */
    hunk_release_range(h, lo, hi, blocks);
}

void hk_hunk_free_temp(hk_hunk *h) {
    if (!h) return;
    hk__core_lock(&h->core);
    hunk_release_temp(h);
    hk__core_after(&h->core);
    hk__core_unlock(&h->core);
}

/* Commits the next chunk of an end's mark stack; 0 when the OS refuses,
 * every level is committed already, or the stack is a fixed one. Out of
 * line: once per HUNK_MSTACK_CHUNK / 8 levels. */
static HK__NOINLINE int hunk_mstack_grow(hk_hunk *h, hunk_mark_stack *s) {
    size_t chunk = HUNK_MSTACK_CHUNK, pg = hk_os_page_size();
    if (chunk % pg) chunk = (chunk + pg - 1) / pg * pg;
    if (!h->mres || s->room >= h->mcap) return 0;
    if (hk_os_commit(s->stamps + s->room, chunk) != HK_OK) return 0;
    s->room += chunk / sizeof(uint64_t);
    return 1;
}

/* Gives mark m (offset above 0) its entry in the end's mark stack: the top
 * entry when it is at m's level, else a new one (see the comment at the
 * top). When the stack has no room and cannot grow, m gets none and keeps
 * its cut count and sequence number. Then no entry is pushed (and no
 * commit tried) above a mark without one until a cut to a mark with an
 * entry or to 0, or a reset: those make every mark without an entry stale
 * (each lies above every entry). O(1). */
static inline void hunk_mark_enter(hk_hunk *h, int high, hk_hunk_mark *m) {
    hunk_mark_stack *s = &h->mstack[high];
    if (!(s->height && s->top == m->offset)) {
        if (HK__UNLIKELY(s->height == s->room) && (s->full || !hunk_mstack_grow(h, s))) {
            s->full = 1; /* m lies above every entry, and no entry goes above it while it is valid */
            return;
        }
        s->stamps[s->height++] = hunk_mstack_entry(++s->pushes, m->offset);
        s->top = m->offset;
    }
    m->end |= HUNK_MARK_STACKED;
    m->seq = (uint32_t)s->height;
    m->cuts = (uint32_t)s->stamps[s->height - 1];
}

hk_hunk_mark hk_hunk_low_mark(hk_hunk *h) {
    hk_hunk_mark m;
    memset(&m, 0, sizeof m);
    if (!h) return m;
    hk__core_lock(&h->core);
    m.offset = h->low.used;
    m.user_bytes = h->low.user_bytes;
    m.blocks = h->low.blocks;
    m.edge = h->low.last;
    m.end = 0;
    m.hunk = h->id;
    m.cuts = h->cuts[0];
    if (h->low.blocks) {
        hunk_hdr hd;
        hunk_read_hdr(h->base + h->low.last, &hd);
        m.seq = hd.seq;
    }
    if (m.offset) hunk_mark_enter(h, 0, &m);
    hk__core_unlock(&h->core);
    return m;
}

hk_hunk_mark hk_hunk_high_mark(hk_hunk *h) {
    hk_hunk_mark m;
    memset(&m, 0, sizeof m);
    m.end = 1;
    if (!h) return m;
    hk__core_lock(&h->core);
    hunk_release_temp(h);
    m.offset = h->high.used;
    m.user_bytes = h->high.user_bytes;
    m.blocks = h->high.blocks;
    m.hunk = h->id;
    m.cuts = h->cuts[1];
    if (h->high.used) {
        hunk_hdr hd;
        hunk_read_hdr(h->base + h->cap - h->high.used, &hd);
        m.seq = hd.seq;
    }
    if (m.offset) hunk_mark_enter(h, 1, &m);
    hk__core_unlock(&h->core);
    return m;
}

static hk_result hunk_bad_mark(hk_hunk *h, hk_hunk_mark m, int high, const char *why) {
    return hk__report(&h->core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, m.offset, NULL,
                      "free to %s mark %zu refused: %s (low %zu, high %zu)", high ? "high" : "low", m.offset,
                      why, h->low.used, h->high.used);
}

/* A cut of end `high` (cuts[high] already counted) to `level` used bytes:
 * logged for the marks (see the comment at the top). O(HUNK_CUT_LOG). */
static HK__NOINLINE void hunk_log_cut(hk_hunk *h, int high, size_t level) {
    hunk_cut_log *l = &h->cutlog[high];
    uint32_t n = l->n, m = HUNK_CUT_LOG - 1u;
    while (n && l->level[(l->head + n - 1u) & m] >= level) n--;
    if (HK__UNLIKELY(l->lost_any) && level <= l->lost_floor) l->lost_any = 0; /* below every dropped cut */
    if (HK__UNLIKELY(n == HUNK_CUT_LOG)) {                                    /* the first entry is dropped */
        size_t first = l->level[l->head];
        l->lost_floor = l->lost_any && l->lost_floor < first ? l->lost_floor : first;
        l->lost = l->count[l->head];
        l->lost_level = first;
        l->lost_any = 1;
        l->head = (l->head + 1u) & m;
        n--;
    }
    uint32_t at = (l->head + n) & m;
    l->count[at] = h->cuts[high];
    l->level[at] = level;
    l->n = n + 1u;
}

/* A cut of end `high` to 0 (reset): every entry is above it. */
static void hunk_log_reset(hk_hunk *h, int high) {
    hunk_cut_log *l = &h->cutlog[high];
    l->head = 0;
    l->n = 1;
    l->count[0] = h->cuts[high];
    l->level[0] = 0;
    l->lost_any = 0;
}

/* What the cut log says of a mark taken at cut number k with `offset`
 * used bytes: 1 valid (no cut since went below it), 0 stale, -1 the log
 * dropped the cuts it needs. Cut numbers are compared modulo 2^32. */
static int hunk_cut_verdict(const hk_hunk *h, int high, uint32_t k, size_t offset) {
    const hunk_cut_log *l = &h->cutlog[high];
    if (l->lost_any && (int32_t)(l->lost - k) > 0) return offset > l->lost_level ? 0 : -1;
    for (uint32_t i = 0; i < l->n; i++) {
        uint32_t at = (l->head + i) & (HUNK_CUT_LOG - 1u);
        if ((int32_t)(l->count[at] - k) > 0) return l->level[at] >= offset;
    }
    return -1; /* a cut since the mark that the log never saw: a mark from the future */
}

/* Is the block at the mark's edge the one that was there when it was taken?
 * Reads only headers the hunk knows to be headers: with no cut of the end
 * since the mark, none at all; else it walks the end's headers from a
 * known one up to the mark (see the comment at the top). */
static HK__NOINLINE int hunk_mark_after_cuts(hk_hunk *h, hk_hunk_mark m, int high);
static inline int hunk_mark_edge_ok(hk_hunk *h, hk_hunk_mark m, int high) {
    if (m.offset == 0) return m.blocks == 0 && m.user_bytes == 0;
    if (m.blocks == 0) return 0;
    if (!high && (m.edge > m.offset - HUNK_HDR || (m.edge & (HUNK_ALIGN - 1)))) return 0;
    if (m.end & HUNK_MARK_STACKED) { /* its entry is still the one it was given */
        const hunk_mark_stack *s = &h->mstack[high];
        return m.seq - 1u < s->height && s->stamps[m.seq - 1u] == hunk_mstack_entry(m.cuts, m.offset);
    }
    if (m.cuts == h->cuts[high]) return 1; /* nothing under the mark was freed since */
    return hunk_mark_after_cuts(h, m, high);
}

/* The mark after cuts of its end: the cut log, or the walk. Out of line:
 * the common case (no cut since) keeps its registers. */
static HK__NOINLINE int hunk_mark_after_cuts(hk_hunk *h, hk_hunk_mark m, int high) {
    int v = hunk_cut_verdict(h, high, m.cuts, m.offset);
    if (v >= 0) return v;
    /* low: from the bottom up to the mark's edge; high: from the lowest
     * high block up to the mark's offset. Each step reads a header at a
     * position the previous one proved to be a block boundary. */
    size_t pos = high ? h->cap - h->high.used : 0;
    size_t stop = high ? h->cap - m.offset : m.edge;
    size_t limit = high ? h->cap : h->low.used;
    hunk_hdr hd;
    while (pos < stop) {
        if (limit - pos < HUNK_HDR) return 0;
        hunk_read_hdr(h->base + pos, &hd);
        if (hd.sentinel != HUNK_SENTINEL || (uint64_t)hunk_req(hd.word) > HUNK_MAX_REQ) return 0;
        size_t len = hunk_len(hunk_req(hd.word), hunk_flags_of(hd.word));
        if (len > limit - pos) return 0;
        pos += len;
    }
    if (pos != stop || limit - pos < HUNK_HDR) return 0;
    hunk_read_hdr(h->base + pos, &hd);
    if (hd.sentinel != HUNK_SENTINEL || hd.seq != m.seq) return 0;
    uint32_t f = hunk_flags_of(hd.word);
    if ((f & HUNK_F_PAD) || ((f & HUNK_F_HIGH) != 0) != (high != 0)) return 0;
    size_t req = hunk_req(hd.word);
    if ((uint64_t)req > HUNK_MAX_REQ) return 0;
    if (!high && m.edge + hunk_len(req, f) != m.offset) return 0;
    return 1;
}

static hk_result hunk_free_to_mark(hk_hunk *h, hk_hunk_mark m, int high) {
    if (m.hunk != h->id)
        return hunk_bad_mark(h, m, high,
                             m.hunk ? "the mark belongs to another hunk" : "the mark was issued by no hunk");
    if ((m.end & ~HUNK_MARK_STACKED) != (uint32_t)high)
        return hunk_bad_mark(h, m, high, "the mark belongs to the other end");
    if (high) hunk_release_temp(h);
    hunk_end *e = high ? &h->high : &h->low;
    if (m.offset > e->used) return hunk_bad_mark(h, m, high, "the mark is beyond the current top");
    if ((m.offset & (HUNK_ALIGN - 1)) != 0 || m.blocks > e->blocks || m.user_bytes > e->user_bytes ||
        !hunk_mark_edge_ok(h, m, high))
        return hunk_bad_mark(h, m, high, "the mark is stale (the blocks under it were freed since)");
    if (m.offset == e->used) return HK_OK;
    hunk_note_peak(h);
    unsigned char *lo, *hi;
    if (high) {
        lo = h->base + h->cap - e->used;
        hi = h->base + h->cap - m.offset;
    } else {
        lo = h->base + m.offset;
        hi = h->base + e->used;
    }
    size_t blocks = e->blocks - m.blocks;
    e->used = m.offset;
    e->user_bytes = m.user_bytes;
    e->blocks = m.blocks;
    if (!high) e->last = m.edge;
    h->cuts[high]++;
    /* entries above the mark's go: their levels are above the cut. A mark
     * without an entry lies above every entry: none goes. */
    hunk_mark_stack *s = &h->mstack[high];
    if (m.offset == 0) {
        s->height = 0;
        s->top = 0;
        s->full = 0;
    } else if (m.end & HUNK_MARK_STACKED) {
        s->height = m.seq;
        s->top = m.offset;
        s->full = 0;
    }
    if (!h->mres) hunk_log_cut(h, high, m.offset);
    hunk_release_range(h, lo, hi, blocks);
    return HK_OK;
}

hk_result hk_hunk_free_to_low_mark(hk_hunk *h, hk_hunk_mark mark) {
    if (!h) return HK_ERR_INVALID;
    hk__core_lock(&h->core);
    hk_result r = hunk_free_to_mark(h, mark, 0);
    hk__core_after(&h->core);
    hk__core_unlock(&h->core);
    return r;
}

hk_result hk_hunk_free_to_high_mark(hk_hunk *h, hk_hunk_mark mark) {
    if (!h) return HK_ERR_INVALID;
    hk__core_lock(&h->core);
    hk_result r = hunk_free_to_mark(h, mark, 1);
    hk__core_after(&h->core);
    hk__core_unlock(&h->core);
    return r;
}

void hk_hunk_reset(hk_hunk *h) {
    if (!h) return;
    hk__core_lock(&h->core);
    hunk_note_peak(h);
    h->temp_active = 0;
    hunk_release_range(h, h->base, h->base + h->low.used, h->low.blocks);
    hunk_release_range(h, h->base + h->cap - h->high.used, h->base + h->cap, h->high.blocks);
    memset(&h->low, 0, sizeof h->low);
    memset(&h->high, 0, sizeof h->high);
    h->cuts[0]++;
    h->cuts[1]++;
    for (int e = 0; e < 2; e++) {
        h->mstack[e].height = 0;
        h->mstack[e].top = 0;
        h->mstack[e].full = 0;
        if (!h->mres) hunk_log_reset(h, e);
    }
    hk__core_after(&h->core);
    hk__core_unlock(&h->core);
}

/* ---- queries -------------------------------------------------------------- */

hk_result hk_hunk_get_info(const hk_hunk *h, hk_hunk_info *out) {
    if (!h || !out) return HK_ERR_INVALID;
    hk__core_lock(&h->core);
    memset(out, 0, sizeof *out);
    out->capacity = h->cap;
    out->low_used = h->low.used;
    out->high_used = h->high.used;
    out->low_blocks = h->low.blocks;
    out->high_blocks = h->high.blocks;
    out->temp_bytes = h->temp_active ? h->high.used - h->temp_mark.used : 0;
    out->tenant_bytes = h->tenant_size;
    out->names_used = h->nnames;
    hk__core_unlock(&h->core);
    return HK_OK;
}

void hk_hunk_free_range(const hk_hunk *h, void **start, size_t *size) {
    if (start) *start = h ? h->base + h->low.used : NULL;
    if (size) *size = h ? hunk_free_bytes(h) : 0;
}

/* ---- tenant ---------------------------------------------------------------- */

static hk_result hunk_tenant_check_range(hk_hunk *h, void *start, size_t size) {
    /* addresses as integers: a claim outside the hunk compares without UB */
    uintptr_t s = (uintptr_t)start, lo = (uintptr_t)(h->base + h->low.used),
              hi = (uintptr_t)(h->base + h->cap - h->high.used);
    if (size == 0) return HK_OK;
    if ((s & 15) || (size & 15) || s < lo || s > hi || size > hi - s)
        return hk__report(&h->core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, start, size, NULL,
                          "tenant claim %p + %zu is not a 16-aligned range of the free middle %p..%p", start,
                          size, (void *)(h->base + h->low.used), (void *)(h->base + h->cap - h->high.used));
    return HK_OK;
}

hk_result hk_hunk_set_tenant(hk_hunk *h, hk_hunk_reclaim_fn fn, void *user, void *start, size_t size) {
    if (!h) return HK_ERR_INVALID;
    hk__core_lock(&h->core);
    hk_result r = HK_OK;
    if (!fn) {
        h->tenant_fn = NULL;
        h->tenant_user = NULL;
        h->tenant_start = NULL;
        h->tenant_size = 0;
    } else if (h->tenant_fn) {
        r = hk__report(&h->core.rep, HK_ERR_STATE, HK_EK_STATE, start, size, NULL,
                       "a tenant is already installed (claim %p + %zu)", (void *)h->tenant_start,
                       h->tenant_size);
    } else if ((r = hunk_tenant_check_range(h, start, size)) == HK_OK) {
        h->tenant_fn = fn;
        h->tenant_user = user;
        h->tenant_start = size ? (unsigned char *)start : NULL;
        h->tenant_size = size;
    }
    h->slow = h->slow_base || h->tenant_fn != NULL;
    hk__core_after(&h->core);
    hk__core_unlock(&h->core);
    return r;
}

hk_result hk_hunk_set_tenant_range(hk_hunk *h, void *start, size_t size) {
    if (!h) return HK_ERR_INVALID;
    hk__core_lock(&h->core);
    hk_result r;
    if (!h->tenant_fn)
        r = hk__report(&h->core.rep, HK_ERR_STATE, HK_EK_STATE, start, size, NULL, "no tenant is installed");
    else if ((r = hunk_tenant_check_range(h, start, size)) == HK_OK) {
        h->tenant_start = size ? (unsigned char *)start : NULL;
        h->tenant_size = size;
    }
    hk__core_after(&h->core);
    hk__core_unlock(&h->core);
    return r;
}
