/*
 * src/hunk.c - Quake's hunk: a region allocated from both ends.
 *
 * Layout of every block (low or high end), all offsets multiples of 16:
 *
 *   [hunk_hdr 48][lead padding][user bytes][canary >= 8 bytes][hunk_tail 16]
 *   ^ block start               ^ start + user_off                ^ end - 16
 *
 * Invariants (verified by hk_hunk_check):
 *  - low blocks tile [base, base + low_used) from the bottom; high blocks
 *    tile [base + cap - high_used, base + cap) from the top; the two never
 *    overlap (low_used + high_used <= cap).
 *  - hdr.sentinel == HUNK_SENTINEL, tail.sentinel == HUNK_TAIL_SENTINEL,
 *    hdr.size == tail.size == block length, hdr.seq == tail.seq.
 *  - every byte between the user bytes and the tail is HK_FILL_PAD.
 *  - the temp block, when active, is the lowest high block and temp_mark is
 *    the high_used before it was allocated.
 *  - a tenant's claim, when non-empty, lies inside the free middle:
 *    base + low_used <= tenant_start and tenant_start + tenant_size <=
 *    base + cap - high_used; allocations that would enter it first ask the
 *    tenant to give the bytes back (hunk_tenant_room).
 *  - used/live counts per end equal the sums over that end's blocks; marks
 *    carry those sums so freeing to a mark restores them in O(1).
 *
 * Marks are validated without walking: the block just below a low mark (or
 * just above a high mark) must still carry the sequence number it had when
 * the mark was taken; freeing below a mark and allocating again changes it.
 */
#include "heapkit/hunk.h"
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define HUNK_SENTINEL 0x1df001edu /* "id fooled", as in Quake */
#define HUNK_TAIL_SENTINEL 0xfd1edf00u
#define HUNK_NAME_LEN 16
#define HUNK_MIN_ALIGN 16u
#define HUNK_MIN_CANARY 8u

typedef struct hunk_hdr {
    uint32_t sentinel;
    uint32_t seq;
    uint64_t size;      /* whole block, header and tail included */
    uint64_t requested; /* user bytes asked for */
    uint32_t user_off;  /* user pointer - block start */
    uint32_t flags;     /* HK_BLOCK_HIGH, HK_BLOCK_TEMP */
    char name[HUNK_NAME_LEN];
} hunk_hdr;

typedef struct hunk_tail {
    uint64_t size;
    uint32_t seq;
    uint32_t sentinel;
} hunk_tail;

_Static_assert(sizeof(hunk_hdr) == 48, "hunk header is 48 bytes");
_Static_assert(sizeof(hunk_tail) == 16, "hunk tail is 16 bytes");

typedef struct hunk_end {
    size_t used;       /* bytes taken from this end */
    size_t user_bytes; /* sum of requested sizes */
    size_t blocks;
} hunk_end;

struct hk_hunk {
    unsigned char *base; /* 16-aligned start of the block area */
    size_t cap;          /* bytes of the block area (multiple of 16) */
    hunk_end low, high;
    uint32_t seq;        /* next block sequence number (never 0) */
    int temp_active;
    hunk_end temp_mark; /* high end before the temp block */
    size_t peak_used;
    uint64_t alloc_count, free_count, fail_count;
    uint32_t flags;
    int running_on_valgrind;
    void *os_base; /* reservation to release, or NULL for caller memory */
    size_t os_size;
    hk__reporter rep;
    hk_lock_hooks lock;
    /* tenant (hk_hunk_set_tenant): a claim inside the free middle */
    hk_hunk_reclaim_fn tenant_fn;
    void *tenant_user;
    unsigned char *tenant_start;
    size_t tenant_size;
};

/* ---- sanitizer helpers: headers, padding and free space are off limits -- */

static void hunk_poison(const void *p, size_t n) {
#ifdef HK__ASAN
    ASAN_POISON_MEMORY_REGION(p, n);
#endif
    (void)p;
    (void)n;
}
static void hunk_unpoison(const void *p, size_t n) {
#ifdef HK__ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
    (void)p;
    (void)n;
}

/* ---- small helpers ------------------------------------------------------- */

static inline size_t hunk_total_used(const hk_hunk *h) { return h->low.used + h->high.used; }

static inline void hunk_set_name(hunk_hdr *hdr, const char *name) {
    size_t i = 0;
    if (!name) name = "unknown";
    for (; i < HUNK_NAME_LEN && name[i]; i++) hdr->name[i] = name[i];
    for (; i < HUNK_NAME_LEN; i++) hdr->name[i] = 0;
}

static void hunk_name_copy(char out[HUNK_NAME_LEN + 1], const hunk_hdr *hdr) {
    memcpy(out, hdr->name, HUNK_NAME_LEN);
    out[HUNK_NAME_LEN] = 0;
}

static void hunk_after_op(hk_hunk *h);

/* ---- create / destroy -------------------------------------------------- */

hk_hunk *hk_hunk_create(const hk_hunk_desc *desc) {
    if (!desc) return NULL;
    unsigned char *mem;
    size_t size;
    void *os_base = NULL;
    size_t os_size = 0;
    if (desc->memory) {
        mem = (unsigned char *)desc->memory;
        size = desc->size;
        if (size < 256) return NULL;
    } else {
        size = desc->size ? desc->size : (size_t)64 << 20;
        size_t ctl;
        if (!hk_size_add(size, sizeof(hk_hunk) + 64, &ctl)) return NULL;
        os_base = hk_os_alloc(ctl);
        if (!os_base) return NULL;
        os_size = ctl;
        mem = (unsigned char *)os_base;
        size = ctl;
    }
    uintptr_t start = hk_align_ptr((uintptr_t)mem, _Alignof(hk_hunk));
    if (start - (uintptr_t)mem + sizeof(hk_hunk) + 64 > size) return NULL;
    hk_hunk *h = (hk_hunk *)start;
    memset(h, 0, sizeof *h);
    uintptr_t area = hk_align_ptr(start + sizeof(hk_hunk), HUNK_MIN_ALIGN);
    uintptr_t end = ((uintptr_t)mem + size) & ~(uintptr_t)(HUNK_MIN_ALIGN - 1);
    if (end <= area || end - area < 64) {
        if (os_base) hk_os_release(os_base, os_size);
        return NULL;
    }
    h->base = (unsigned char *)area;
    h->cap = end - area;
    h->seq = 1;
    h->flags = desc->flags;
    h->os_base = os_base;
    h->os_size = os_size;
    h->rep.fn = desc->on_error;
    h->rep.user = desc->error_user;
    h->rep.allocator = "hunk";
    h->rep.instance = desc->name ? desc->name : "hunk";
    h->rep.flags = desc->flags;
    h->lock = desc->lock;
#ifdef HK__VALGRIND
    h->running_on_valgrind = RUNNING_ON_VALGRIND ? 1 : 0;
#endif
    hunk_poison(h->base, h->cap);
    return h;
}

void hk_hunk_destroy(hk_hunk *h) {
    if (!h) return;
    hunk_unpoison(h->base, h->cap);
    if (h->os_base) hk_os_release(h->os_base, h->os_size);
}

/* ---- allocation ---------------------------------------------------------- */

/* Reports exhaustion in Quake's words plus the numbers needed to act on it. */
static void *hunk_fail_nomem(hk_hunk *h, size_t size, int high) {
    h->fail_count++;
    hk__report(&h->rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, size, NULL,
               "%s allocation failed: asked %zu, low %zu, high %zu, capacity %zu", high ? "high" : "low", size,
               h->low.used, h->high.used, h->cap);
    return NULL;
}

static void *hunk_fail_overflow(hk_hunk *h, size_t size) {
    h->fail_count++;
    hk__report(&h->rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, size, NULL,
               "asked %zu bytes, which overflows with the block overhead (capacity %zu)", size, h->cap);
    return NULL;
}

/* Writes header, canary and tail, and prepares the user bytes. */
static inline void *hunk_finish_block(hk_hunk *h, unsigned char *start, size_t total, size_t user_off,
                                      size_t size, uint32_t flags, const char *name) {
    hunk_unpoison(start, total);
#ifdef HK__VALGRIND
    if (h->running_on_valgrind) VALGRIND_MAKE_MEM_UNDEFINED(start, total);
#endif
    hunk_hdr *hdr = (hunk_hdr *)start;
    uint32_t seq = h->seq++;
    if (h->seq == 0) h->seq = 1;
    hdr->sentinel = HUNK_SENTINEL;
    hdr->seq = seq;
    hdr->size = total;
    hdr->requested = size;
    hdr->user_off = (uint32_t)user_off;
    hdr->flags = flags;
    hunk_set_name(hdr, name);
    unsigned char *user = start + user_off;
    unsigned char *tail_p = start + total - sizeof(hunk_tail);
    if (user_off > sizeof(hunk_hdr)) memset(start + sizeof(hunk_hdr), HK_FILL_PAD, user_off - sizeof(hunk_hdr));
    memset(user + size, HK_FILL_PAD, (size_t)(tail_p - (user + size)));
    hunk_tail *tail = (hunk_tail *)tail_p;
    tail->size = total;
    tail->seq = seq;
    tail->sentinel = HUNK_TAIL_SENTINEL;
    if (h->flags & HK_FLAG_ZERO) memset(user, 0, size);
    else if (h->flags & HK_FLAG_FILL) memset(user, HK_FILL_ALLOC, size);
    hunk_poison(start, user_off);
    hunk_poison(user + size, (size_t)(start + total - (user + size)));
#ifdef HK__VALGRIND
    if (h->running_on_valgrind) VALGRIND_MALLOCLIKE_BLOCK(user, size, 0, (h->flags & HK_FLAG_ZERO) != 0);
#endif
    h->alloc_count++;
    size_t u = hunk_total_used(h);
    if (u > h->peak_used) h->peak_used = u;
    return user;
}

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

/* Low end: block starts at base + low.used. */
static void *hunk_alloc_low(hk_hunk *h, size_t size, size_t align, const char *name) {
    for (int attempt = 0; attempt < 2; attempt++) {
        size_t start_off = h->low.used;
        uintptr_t start = (uintptr_t)h->base + start_off;
        size_t user_off = sizeof(hunk_hdr);
        if (align > HUNK_MIN_ALIGN) user_off = hk_align_ptr(start + sizeof(hunk_hdr), align) - start;
        size_t body, total;
        if (!hk_size_add(user_off, size, &body) || !hk_size_add(body, HUNK_MIN_CANARY, &body) ||
            !hk_size_align(body, HUNK_MIN_ALIGN, &total) || !hk_size_add(total, sizeof(hunk_tail), &total))
            return hunk_fail_overflow(h, size);
        if (total > h->cap - hunk_total_used(h)) {
            if (h->temp_active && attempt == 0) {
                hk_hunk_free_temp(h);
                continue;
            }
            return hunk_fail_nomem(h, size, 0);
        }
        if (!hunk_tenant_room(h, 0, start + total)) return hunk_fail_nomem(h, size, 0);
        h->low.used += total;
        h->low.user_bytes += size;
        h->low.blocks++;
        return hunk_finish_block(h, (unsigned char *)start, total, user_off, size, 0, name);
    }
    return NULL;
}

/* High end: block ends at base + cap - high.used; the user bytes sit as high
 * as alignment allows, right below the canary and tail. */
static void *hunk_alloc_high(hk_hunk *h, size_t size, size_t align, uint32_t flags, const char *name) {
    size_t need;
    if (!hk_size_add(size, sizeof(hunk_hdr) + HUNK_MIN_CANARY + sizeof(hunk_tail), &need) ||
        !hk_size_add(need, align, &need))
        return hunk_fail_overflow(h, size);
    size_t avail = h->cap - hunk_total_used(h);
    if (need - align > avail) return hunk_fail_nomem(h, size, 1);
    uintptr_t top = (uintptr_t)h->base + h->cap - h->high.used;
    uintptr_t floor = (uintptr_t)h->base + h->low.used;
    uintptr_t user = (top - sizeof(hunk_tail) - HUNK_MIN_CANARY - size) & ~(uintptr_t)(align - 1);
    if (user < floor + sizeof(hunk_hdr)) return hunk_fail_nomem(h, size, 1);
    uintptr_t start = user - sizeof(hunk_hdr);
    if (!hunk_tenant_room(h, 1, start)) return hunk_fail_nomem(h, size, 1);
    size_t total = top - start;
    h->high.used += total;
    h->high.user_bytes += size;
    h->high.blocks++;
    return hunk_finish_block(h, (unsigned char *)start, total, sizeof(hunk_hdr), size, HK_BLOCK_HIGH | flags,
                             name);
}

static int hunk_check_align(hk_hunk *h, size_t *align) {
    if (*align < HUNK_MIN_ALIGN) *align = HUNK_MIN_ALIGN;
    if (!hk_is_pow2(*align) || *align > ((size_t)1 << 30)) {
        h->fail_count++;
        hk__report(&h->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, *align, NULL,
                   "alignment %zu is not a power of two up to 1 GiB", *align);
        return 0;
    }
    return 1;
}

void *hk_hunk_alloc_aligned(hk_hunk *h, size_t size, size_t align, const char *name) {
    if (!h) return NULL;
    hk__lock(&h->lock);
    void *p = hunk_check_align(h, &align) ? hunk_alloc_low(h, size, align, name) : NULL;
    hunk_after_op(h);
    hk__unlock(&h->lock);
    return p;
}

void *hk_hunk_alloc(hk_hunk *h, size_t size, const char *name) {
    if (!h) return NULL;
    hk__lock(&h->lock);
    void *p = hunk_alloc_low(h, size, HUNK_MIN_ALIGN, name);
    hunk_after_op(h);
    hk__unlock(&h->lock);
    return p;
}

/* Drops the temp block, if any (lock held). */
static void hunk_release_temp(hk_hunk *h);

void *hk_hunk_alloc_high_aligned(hk_hunk *h, size_t size, size_t align, const char *name) {
    if (!h) return NULL;
    hk__lock(&h->lock);
    void *p = NULL;
    if (hunk_check_align(h, &align)) {
        hunk_release_temp(h);
        p = hunk_alloc_high(h, size, align, 0, name);
    }
    hunk_after_op(h);
    hk__unlock(&h->lock);
    return p;
}

void *hk_hunk_alloc_high(hk_hunk *h, size_t size, const char *name) {
    return hk_hunk_alloc_high_aligned(h, size, HUNK_MIN_ALIGN, name);
}

void *hk_hunk_alloc_temp(hk_hunk *h, size_t size) {
    if (!h) return NULL;
    hk__lock(&h->lock);
    hunk_release_temp(h);
    hunk_end before = h->high;
    void *p = hunk_alloc_high(h, size, HUNK_MIN_ALIGN, HK_BLOCK_TEMP, "temp");
    if (p) {
        h->temp_mark = before;
        h->temp_active = 1;
    }
    hunk_after_op(h);
    hk__unlock(&h->lock);
    return p;
}

/* ---- freeing ------------------------------------------------------------- */

/* Announces to Valgrind that the blocks in [lo, hi) are gone (only when
 * running under it: the walk is O(blocks)). */
static void hunk_vg_free_range(hk_hunk *h, unsigned char *lo, unsigned char *hi) {
#ifdef HK__VALGRIND
    if (!h->running_on_valgrind) return;
    for (unsigned char *p = lo; p < hi;) {
        hunk_hdr *hdr = (hunk_hdr *)p;
        if (hdr->sentinel != HUNK_SENTINEL || hdr->size == 0 || hdr->size > (size_t)(hi - p)) break;
        VALGRIND_FREELIKE_BLOCK(p + hdr->user_off, 0);
        p += hdr->size;
    }
    VALGRIND_MAKE_MEM_NOACCESS(lo, (size_t)(hi - lo));
#else
    (void)h;
    (void)lo;
    (void)hi;
#endif
}

/* Frees the range [lo, hi) of the block area that just left an end. */
static void hunk_release_range(hk_hunk *h, unsigned char *lo, unsigned char *hi, size_t blocks) {
    if (hi <= lo) return;
    h->free_count += blocks;
    hunk_vg_free_range(h, lo, hi);
    if (h->flags & HK_FLAG_FILL) {
        hunk_unpoison(lo, (size_t)(hi - lo));
        memset(lo, HK_FILL_FREE, (size_t)(hi - lo));
    }
    hunk_poison(lo, (size_t)(hi - lo));
}

static void hunk_release_temp(hk_hunk *h) {
    if (!h->temp_active) return;
    unsigned char *lo = h->base + h->cap - h->high.used;
    unsigned char *hi = h->base + h->cap - h->temp_mark.used;
    size_t blocks = h->high.blocks - h->temp_mark.blocks;
    h->high = h->temp_mark;
    h->temp_active = 0;
    hunk_release_range(h, lo, hi, blocks);
}

void hk_hunk_free_temp(hk_hunk *h) {
    if (!h) return;
    hk__lock(&h->lock);
    hunk_release_temp(h);
    hunk_after_op(h);
    hk__unlock(&h->lock);
}

/* The sequence number of the block whose edge is at `off` on that end:
 * for the low end the block ending at off, for the high end the block
 * starting at cap - off. 0 for an empty end. Reads a tail or header that
 * may be gone; callers treat a mismatch as a stale mark. */
static uint32_t hunk_edge_seq(hk_hunk *h, size_t off, int high) {
    if (off == 0) return 0;
    uint32_t seq = 0;
    if (!high) {
        hunk_tail *t = (hunk_tail *)(h->base + off - sizeof(hunk_tail));
        hunk_unpoison(t, sizeof *t);
        if (t->sentinel == HUNK_TAIL_SENTINEL) seq = t->seq;
        hunk_poison(t, sizeof *t);
    } else {
        hunk_hdr *hd = (hunk_hdr *)(h->base + h->cap - off);
        hunk_unpoison(hd, sizeof *hd);
        if (hd->sentinel == HUNK_SENTINEL) seq = hd->seq;
        hunk_poison(hd, sizeof *hd);
    }
    return seq;
}

hk_hunk_mark hk_hunk_low_mark(hk_hunk *h) {
    hk_hunk_mark m = {0, 0, 0, 0, 0};
    if (!h) return m;
    hk__lock(&h->lock);
    m.offset = h->low.used;
    m.user_bytes = h->low.user_bytes;
    m.blocks = h->low.blocks;
    m.end = 0;
    m.seq = hunk_edge_seq(h, h->low.used, 0);
    hk__unlock(&h->lock);
    return m;
}

hk_hunk_mark hk_hunk_high_mark(hk_hunk *h) {
    hk_hunk_mark m = {0, 0, 0, 1, 0};
    if (!h) return m;
    hk__lock(&h->lock);
    hunk_release_temp(h);
    m.offset = h->high.used;
    m.user_bytes = h->high.user_bytes;
    m.blocks = h->high.blocks;
    m.end = 1;
    m.seq = hunk_edge_seq(h, h->high.used, 1);
    hk__unlock(&h->lock);
    return m;
}

static hk_result hunk_bad_mark(hk_hunk *h, hk_hunk_mark m, int high, const char *why) {
    return hk__report(&h->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, h->base + (high ? h->cap - m.offset : m.offset),
                      m.offset, NULL, "free to %s mark %zu refused: %s (low %zu, high %zu)",
                      high ? "high" : "low", m.offset, why, h->low.used, h->high.used);
}

static hk_result hunk_free_to_mark(hk_hunk *h, hk_hunk_mark m, int high) {
    if (m.end != (uint32_t)high) return hunk_bad_mark(h, m, high, "the mark belongs to the other end");
    if (high) hunk_release_temp(h);
    hunk_end *e = high ? &h->high : &h->low;
    if (m.offset > e->used) return hunk_bad_mark(h, m, high, "the mark is beyond the current top");
    if ((m.offset & (HUNK_MIN_ALIGN - 1)) != 0 || m.blocks > e->blocks || m.user_bytes > e->user_bytes ||
        hunk_edge_seq(h, m.offset, high) != m.seq)
        return hunk_bad_mark(h, m, high, "the mark is stale (the blocks under it were freed since)");
    if (m.offset == e->used) return HK_OK;
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
    hunk_release_range(h, lo, hi, blocks);
    return HK_OK;
}

hk_result hk_hunk_free_to_low_mark(hk_hunk *h, hk_hunk_mark mark) {
    if (!h) return HK_ERR_INVALID;
    hk__lock(&h->lock);
    hk_result r = hunk_free_to_mark(h, mark, 0);
    hunk_after_op(h);
    hk__unlock(&h->lock);
    return r;
}

hk_result hk_hunk_free_to_high_mark(hk_hunk *h, hk_hunk_mark mark) {
    if (!h) return HK_ERR_INVALID;
    hk__lock(&h->lock);
    hk_result r = hunk_free_to_mark(h, mark, 1);
    hunk_after_op(h);
    hk__unlock(&h->lock);
    return r;
}

void hk_hunk_reset(hk_hunk *h) {
    if (!h) return;
    hk__lock(&h->lock);
    h->temp_active = 0;
    hunk_release_range(h, h->base, h->base + h->low.used, h->low.blocks);
    hunk_release_range(h, h->base + h->cap - h->high.used, h->base + h->cap, h->high.blocks);
    memset(&h->low, 0, sizeof h->low);
    memset(&h->high, 0, sizeof h->high);
    hk__unlock(&h->lock);
}

/* ---- queries -------------------------------------------------------------- */

size_t hk_hunk_low_used(const hk_hunk *h) { return h ? h->low.used : 0; }
size_t hk_hunk_high_used(const hk_hunk *h) { return h ? h->high.used : 0; }
size_t hk_hunk_capacity(const hk_hunk *h) { return h ? h->cap : 0; }

void hk_hunk_free_range(const hk_hunk *h, void **start, size_t *size) {
    if (!h) {
        if (start) *start = NULL;
        if (size) *size = 0;
        return;
    }
    if (start) *start = h->base + h->low.used;
    if (size) *size = h->cap - hunk_total_used(h);
}

/* ---- tenant ---------------------------------------------------------------- */

static hk_result hunk_tenant_check_range(hk_hunk *h, void *start, size_t size) {
    unsigned char *s = (unsigned char *)start;
    if (size == 0) return HK_OK;
    if (((uintptr_t)s & 15) || (size & 15) || s < h->base + h->low.used ||
        size > (size_t)(h->base + h->cap - h->high.used - s))
        return hk__report(&h->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, start, size, NULL,
                          "tenant claim %p + %zu is not a 16-aligned range of the free middle %p..%p", start, size,
                          (void *)(h->base + h->low.used), (void *)(h->base + h->cap - h->high.used));
    return HK_OK;
}

hk_result hk_hunk_set_tenant(hk_hunk *h, hk_hunk_reclaim_fn fn, void *user, void *start, size_t size) {
    if (!h) return HK_ERR_INVALID;
    hk__lock(&h->lock);
    hk_result r = HK_OK;
    if (!fn) {
        h->tenant_fn = NULL;
        h->tenant_user = NULL;
        h->tenant_start = NULL;
        h->tenant_size = 0;
    } else if (h->tenant_fn) {
        r = hk__report(&h->rep, HK_ERR_STATE, HK_EK_STATE, start, size, NULL,
                       "a tenant is already installed (claim %p + %zu)", (void *)h->tenant_start, h->tenant_size);
    } else if ((r = hunk_tenant_check_range(h, start, size)) == HK_OK) {
        h->tenant_fn = fn;
        h->tenant_user = user;
        h->tenant_start = size ? (unsigned char *)start : NULL;
        h->tenant_size = size;
    }
    hk__unlock(&h->lock);
    return r;
}

hk_result hk_hunk_set_tenant_range(hk_hunk *h, void *start, size_t size) {
    if (!h) return HK_ERR_INVALID;
    hk__lock(&h->lock);
    hk_result r;
    if (!h->tenant_fn)
        r = hk__report(&h->rep, HK_ERR_STATE, HK_EK_STATE, start, size, NULL, "no tenant is installed");
    else if ((r = hunk_tenant_check_range(h, start, size)) == HK_OK) {
        h->tenant_start = size ? (unsigned char *)start : NULL;
        h->tenant_size = size;
    }
    hk__unlock(&h->lock);
    return r;
}

hk_result hk_hunk_stats(const hk_hunk *h, hk_stats *out) {
    if (!h || !out) return HK_ERR_INVALID;
    memset(out, 0, sizeof *out);
    out->size = (uint32_t)sizeof *out;
    out->version = HK_STATS_VERSION;
    out->allocator = "hunk";
    out->capacity = h->cap;
    out->used = h->low.user_bytes + h->high.user_bytes;
    out->used_blocks_bytes = hunk_total_used(h);
    out->free = h->cap - hunk_total_used(h);
    {
        /* The largest low-end request that fits the free middle now. */
        size_t f = out->free, ovh = sizeof(hunk_hdr) + HUNK_MIN_CANARY + sizeof(hunk_tail);
        size_t lf = f > ovh ? ((f - sizeof(hunk_tail)) & ~(size_t)(HUNK_MIN_ALIGN - 1)) : 0;
        out->largest_free = lf > sizeof(hunk_hdr) + HUNK_MIN_CANARY ? lf - sizeof(hunk_hdr) - HUNK_MIN_CANARY : 0;
    }
    out->peak_used = h->peak_used;
    out->overhead = out->used_blocks_bytes - out->used;
    out->live_blocks = h->low.blocks + h->high.blocks;
    out->free_blocks = out->free ? 1 : 0;
    out->alloc_count = h->alloc_count;
    out->free_count = h->free_count;
    out->fail_count = h->fail_count;
    out->error_count = h->rep.error_count;
    return HK_OK;
}

/* ---- walking and checking ------------------------------------------------- */

typedef struct hunk_block {
    unsigned char *start;
    hunk_hdr hdr;  /* copies: the originals may be poisoned */
    hunk_tail tail;
} hunk_block;

/* Reads the block at start (low: start given; high: found from its end).
 * Returns 0 and describes what is wrong in `why` when the block is damaged. */
static int hunk_read_block(hk_hunk *h, unsigned char *lo_bound, unsigned char *hi_bound, unsigned char *edge,
                           int from_end, hunk_block *b, const char **why) {
    unsigned char *start = edge, *end = edge;
    if (!from_end) {
        if ((size_t)(hi_bound - start) < sizeof(hunk_hdr) + sizeof(hunk_tail)) {
            *why = "block header runs past the end";
            return 0;
        }
        hunk_unpoison(start, sizeof(hunk_hdr));
        memcpy(&b->hdr, start, sizeof b->hdr);
        hunk_poison(start, sizeof(hunk_hdr));
        b->start = start;
        if (b->hdr.sentinel != HUNK_SENTINEL) {
            *why = "header sentinel damaged";
            return 0;
        }
        if (b->hdr.size < sizeof(hunk_hdr) + sizeof(hunk_tail) + HUNK_MIN_CANARY ||
            b->hdr.size > (size_t)(hi_bound - start) || (b->hdr.size & (HUNK_MIN_ALIGN - 1))) {
            *why = "header size damaged";
            return 0;
        }
        end = start + b->hdr.size;
        hunk_unpoison(end - sizeof(hunk_tail), sizeof(hunk_tail));
        memcpy(&b->tail, end - sizeof(hunk_tail), sizeof b->tail);
        hunk_poison(end - sizeof(hunk_tail), sizeof(hunk_tail));
    } else {
        if ((size_t)(end - lo_bound) < sizeof(hunk_hdr) + sizeof(hunk_tail)) {
            *why = "block tail runs past the end";
            return 0;
        }
        hunk_unpoison(end - sizeof(hunk_tail), sizeof(hunk_tail));
        memcpy(&b->tail, end - sizeof(hunk_tail), sizeof b->tail);
        hunk_poison(end - sizeof(hunk_tail), sizeof(hunk_tail));
        if (b->tail.sentinel != HUNK_TAIL_SENTINEL) {
            *why = "tail sentinel damaged (overrun of the block below?)";
            b->start = NULL;
            return 0;
        }
        if (b->tail.size > (size_t)(end - lo_bound) || b->tail.size < sizeof(hunk_hdr) + sizeof(hunk_tail) ||
            (b->tail.size & (HUNK_MIN_ALIGN - 1))) {
            *why = "tail size damaged";
            b->start = NULL;
            return 0;
        }
        start = end - b->tail.size;
        b->start = start;
        hunk_unpoison(start, sizeof(hunk_hdr));
        memcpy(&b->hdr, start, sizeof b->hdr);
        hunk_poison(start, sizeof(hunk_hdr));
        if (b->hdr.sentinel != HUNK_SENTINEL) {
            *why = "header sentinel damaged";
            return 0;
        }
    }
    if (b->tail.sentinel != HUNK_TAIL_SENTINEL) {
        *why = "tail sentinel damaged (overrun past the canary)";
        return 0;
    }
    if (b->tail.size != b->hdr.size || b->tail.seq != b->hdr.seq) {
        *why = "header and tail disagree";
        return 0;
    }
    if (b->hdr.user_off < sizeof(hunk_hdr) ||
        b->hdr.requested > b->hdr.size - b->hdr.user_off - sizeof(hunk_tail) - HUNK_MIN_CANARY + 0 ||
        b->hdr.user_off + b->hdr.requested + HUNK_MIN_CANARY + sizeof(hunk_tail) > b->hdr.size) {
        *why = "header layout damaged";
        return 0;
    }
    (void)h;
    return 1;
}

/* The canary: padding before the user bytes and after them up to the tail. */
static int hunk_canary_ok(const hunk_block *b) {
    unsigned char *user = b->start + b->hdr.user_off;
    unsigned char *pad = user + b->hdr.requested;
    size_t n = (size_t)(b->start + b->hdr.size - sizeof(hunk_tail) - pad);
    size_t lead = b->hdr.user_off - sizeof(hunk_hdr);
    int ok;
    hunk_unpoison(pad, n);
    ok = hk_fill_check(pad, n, HK_FILL_PAD) == n;
    hunk_poison(pad, n);
    if (ok && lead) {
        hunk_unpoison(b->start + sizeof(hunk_hdr), lead);
        ok = hk_fill_check(b->start + sizeof(hunk_hdr), lead, HK_FILL_PAD) == lead;
        hunk_poison(b->start + sizeof(hunk_hdr), lead);
    }
    return ok;
}

static void hunk_info(const hk_hunk *h, const hunk_block *b, hk_block_info *info, char name[HUNK_NAME_LEN + 1]) {
    memset(info, 0, sizeof *info);
    hunk_name_copy(name, &b->hdr);
    info->address = b->start + b->hdr.user_off;
    info->requested = (size_t)b->hdr.requested;
    info->size = (size_t)(b->hdr.size - b->hdr.user_off - sizeof(hunk_tail));
    info->overhead = (size_t)b->hdr.size - info->requested;
    info->flags = HK_BLOCK_USED | b->hdr.flags;
    info->name = name;
    (void)h;
}

typedef int (*hunk_visit_fn)(hk_hunk *h, const hunk_block *b, void *user);

/* Visits every block: low end bottom-up, then high end top-down. Stops at
 * the first damaged block, reporting it when `report` is set. Returns the
 * visitor's non-zero value, -1 for damage, 0 when done. */
static int hunk_visit(hk_hunk *h, hunk_visit_fn fn, void *user, int report) {
    unsigned char *low_top = h->base + h->low.used;
    unsigned char *high_bot = h->base + h->cap - h->high.used;
    size_t count = 0;
    const char *why = NULL;
    hunk_block b;
    for (unsigned char *p = h->base; p < low_top;) {
        if (!hunk_read_block(h, h->base, low_top, p, 0, &b, &why)) goto damaged;
        if ((b.hdr.flags & HK_BLOCK_HIGH) != 0) {
            why = "high-end block found on the low end";
            goto damaged;
        }
        if (!hunk_canary_ok(&b)) {
            why = "canary damaged (write past the end of the block)";
            goto damaged_canary;
        }
        count++;
        if (fn) {
            int r = fn(h, &b, user);
            if (r) return r;
        }
        p += b.hdr.size;
    }
    if (count != h->low.blocks) {
        b.start = low_top;
        why = "low-end block count disagrees with the blocks found";
        goto damaged;
    }
    count = 0;
    for (unsigned char *e = h->base + h->cap; e > high_bot;) {
        if (!hunk_read_block(h, high_bot, e, e, 1, &b, &why)) {
            if (!b.start) b.start = e - sizeof(hunk_tail);
            goto damaged;
        }
        if ((b.hdr.flags & HK_BLOCK_HIGH) == 0) {
            why = "low-end block found on the high end";
            goto damaged;
        }
        if (!hunk_canary_ok(&b)) {
            why = "canary damaged (write past the end of the block)";
            goto damaged_canary;
        }
        count++;
        if (fn) {
            int r = fn(h, &b, user);
            if (r) return r;
        }
        e = b.start;
    }
    if (count != h->high.blocks) {
        b.start = high_bot;
        why = "high-end block count disagrees with the blocks found";
        goto damaged;
    }
    return 0;
damaged_canary:
    if (report) {
        char name[HUNK_NAME_LEN + 1];
        hunk_name_copy(name, &b.hdr);
        hk__report(&h->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_CANARY, b.start + b.hdr.user_off, (size_t)b.hdr.requested,
                   name, "block '%s' at %p (%zu bytes): %s", name, (void *)(b.start + b.hdr.user_off),
                   (size_t)b.hdr.requested, why);
    }
    return -1;
damaged:
    if (report) {
        char name[HUNK_NAME_LEN + 1] = "?";
        if (b.start && b.hdr.sentinel == HUNK_SENTINEL) hunk_name_copy(name, &b.hdr);
        hk__report(&h->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_HEADER, b.start, 0, name,
                   "block '%s' with header at %p: %s", name, (void *)b.start, why);
    }
    return -1;
}

static int hunk_check_usage(hk_hunk *h) {
    if (h->low.used + h->high.used > h->cap || (h->low.used & 15) || (h->high.used & 15)) {
        hk__report(&h->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, h, h->cap, NULL,
                   "control block damaged: low %zu + high %zu exceed capacity %zu", h->low.used, h->high.used,
                   h->cap);
        return 0;
    }
    if (h->tenant_size && (h->tenant_start < h->base + h->low.used ||
                           h->tenant_start + h->tenant_size > h->base + h->cap - h->high.used)) {
        hk__report(&h->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, h->tenant_start, h->tenant_size, NULL,
                   "tenant claim %p..%p is outside the free middle %p..%p", (void *)h->tenant_start,
                   (void *)(h->tenant_start + h->tenant_size), (void *)(h->base + h->low.used),
                   (void *)(h->base + h->cap - h->high.used));
        return 0;
    }
    return 1;
}

hk_result hk_hunk_check(hk_hunk *h) {
    if (!h) return HK_ERR_INVALID;
    hk__lock(&h->lock);
    hk_result r = (hunk_check_usage(h) && hunk_visit(h, NULL, NULL, 1) == 0) ? HK_OK : HK_ERR_CORRUPT;
    hk__unlock(&h->lock);
    return r;
}

static void hunk_after_op(hk_hunk *h) {
    if (HK__UNLIKELY(h->flags & HK_FLAG_PARANOID) || HK_DEBUG >= 3) {
        if (hunk_check_usage(h)) (void)hunk_visit(h, NULL, NULL, 1);
    }
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
    hk__lock(&h->lock);
    hunk_walk_ctx c = {fn, user};
    int r = hunk_check_usage(h) ? hunk_visit(h, hunk_walk_visit, &c, 1) : -1;
    hk__unlock(&h->lock);
    return r;
}

typedef struct hunk_where_ctx {
    const unsigned char *addr;
    hk_block_info *info;
    char *name;
} hunk_where_ctx;

static int hunk_where_visit(hk_hunk *h, const hunk_block *b, void *user) {
    hunk_where_ctx *c = (hunk_where_ctx *)user;
    if (c->addr >= b->start && c->addr < b->start + b->hdr.size) {
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
    hk__lock(&h->lock);
    hunk_where_ctx c = {a, info, name};
    int r = hunk_visit(h, hunk_where_visit, &c, 0);
    hk__unlock(&h->lock);
    return r == 1 ? HK_OK : HK_ERR_FOREIGN;
}

/* ---- Hunk_Print -------------------------------------------------------- */

#define HUNK_PRINT_NAMES 64

typedef struct hunk_print_ctx {
    FILE *out;
    struct {
        char name[HUNK_NAME_LEN + 1];
        size_t blocks, bytes, total;
    } names[HUNK_PRINT_NAMES];
    int nnames;
    size_t other_blocks, other_bytes, other_total;
} hunk_print_ctx;

static int hunk_print_visit(hk_hunk *h, const hunk_block *b, void *user) {
    hunk_print_ctx *c = (hunk_print_ctx *)user;
    char name[HUNK_NAME_LEN + 1];
    hunk_name_copy(name, &b->hdr);
    fprintf(c->out, "  %-4s %p %10zu %10zu  %-16s%s\n", (b->hdr.flags & HK_BLOCK_HIGH) ? "high" : "low",
            (void *)(b->start + b->hdr.user_off), (size_t)b->hdr.requested, (size_t)b->hdr.size, name,
            (b->hdr.flags & HK_BLOCK_TEMP) ? " (temp)" : "");
    int i = 0;
    for (; i < c->nnames; i++)
        if (strcmp(c->names[i].name, name) == 0) break;
    if (i == c->nnames) {
        if (c->nnames == HUNK_PRINT_NAMES) {
            c->other_blocks++;
            c->other_bytes += (size_t)b->hdr.requested;
            c->other_total += (size_t)b->hdr.size;
            return 0;
        }
        memcpy(c->names[i].name, name, sizeof name);
        c->names[i].blocks = c->names[i].bytes = c->names[i].total = 0;
        c->nnames++;
    }
    c->names[i].blocks++;
    c->names[i].bytes += (size_t)b->hdr.requested;
    c->names[i].total += (size_t)b->hdr.size;
    (void)h;
    return 0;
}

void hk_hunk_print(hk_hunk *h, void *out) {
    if (!h) return;
    FILE *f = out ? (FILE *)out : stdout;
    hk__lock(&h->lock);
    hunk_print_ctx *c = NULL;
    hunk_print_ctx storage; /* on the stack: printing must not allocate */
    c = &storage;
    c->out = f;
    c->nnames = 0;
    c->other_blocks = c->other_bytes = c->other_total = 0;
    fprintf(f, "hunk '%s': capacity %zu, low %zu, high %zu, free %zu%s\n", h->rep.instance, h->cap, h->low.used,
            h->high.used, h->cap - hunk_total_used(h), h->temp_active ? ", temp block active" : "");
    fprintf(f, "  %-4s %-14s %10s %10s  %s\n", "end", "address", "bytes", "with hdr", "name");
    int r = hunk_visit(h, hunk_print_visit, c, 1);
    if (r < 0) fprintf(f, "  (walk stopped: the hunk is damaged, see the report)\n");
    fprintf(f, "totals per name:\n");
    for (int i = 0; i < c->nnames; i++)
        fprintf(f, "  %-16s %6zu blocks %12zu bytes %12zu with headers\n", c->names[i].name, c->names[i].blocks,
                c->names[i].bytes, c->names[i].total);
    if (c->other_blocks)
        fprintf(f, "  %-16s %6zu blocks %12zu bytes %12zu with headers\n", "(other names)", c->other_blocks,
                c->other_bytes, c->other_total);
    fprintf(f, "  %-16s %6zu blocks %12zu bytes %12zu with headers\n", "(all)", h->low.blocks + h->high.blocks,
            h->low.user_bytes + h->high.user_bytes, hunk_total_used(h));
    hk__unlock(&h->lock);
}
