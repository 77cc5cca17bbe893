/*
 * src/guard_fallback.c - the guard heap's unguarded blocks: the ones
 * sampling passes over, the ones over the mapping cap, huge alignments and
 * reentrant calls, served by the backing allocator, and their counters.
 *
 * A checked unguarded block sits behind a 16-byte header {size, offset to
 * the raw pointer, magic keyed by the address} and before an 8-byte
 * HK_FILL_PAD canary; with HK_GUARD_PLAIN_UNGUARDED it is the backing
 * allocator's block as it is.
 *
 * Invariants: a live checked block's magic is GUARD_FB_MAGIC ^ key(user),
 * a freed one's GUARD_FB_DEAD ^ key(user), its canary intact until the
 * user damages it (checked on free); this path takes no lock: its counters
 * are batched per thread (guard_tl_b) and added to the instance's entry of
 * guard_ctrs at most every GUARD_TL_BATCH operations, at stats and at the
 * thread's exit. The entries live in a static table, not in the instance,
 * so a late flush after hk_guard_destroy is harmless (the generation no
 * longer matches and the deltas are dropped). A checked block's header is
 * written (at alloc, resize and free, until the backing allocator has the
 * block back) and read by hk_guard_owns from any thread only under the
 * stripe lock of its user address (guard_fb_locks): an ownership query
 * racing with a free in another thread sees the header before or after,
 * never a torn one, and is no data race. A failed backing allocation is
 * reported (HK_EK_NOMEM) like every allocator's. A header is read only
 * through guard_fb_peek, which never faults: any pointer may be freed.
 */
#include "guard_internal.h"

#include <malloc.h>
#include <stdlib.h>

#define GUARD_MAX_CTRS 64
#define GUARD_TL_BATCH 64

typedef struct guard_ctr {
    uint64_t gen; /* 0: unused */
    size_t live, used;
    uint64_t allocs, frees;
    char pad[24];
} guard_ctr;
static guard_ctr guard_ctrs[GUARD_MAX_CTRS];
static uint64_t guard_ctr_gen;

typedef struct guard_tl_batch {
    uint32_t idx;
    uint64_t gen;
    int64_t live, used;
    uint64_t allocs, frees;
    uint32_t ops;
} guard_tl_batch;
static _Thread_local guard_tl_batch guard_tl_b __attribute__((tls_model("initial-exec")));

/* ---- counters ---------------------------------------------------------------------- */

static void guard_tl_flush(void) {
    guard_tl_batch *b = &guard_tl_b;
    if (b->ops && b->gen && __atomic_load_n(&guard_ctrs[b->idx].gen, __ATOMIC_RELAXED) == b->gen) {
        guard_ctr *c = &guard_ctrs[b->idx];
        __atomic_add_fetch(&c->live, (size_t)b->live, __ATOMIC_RELAXED);
        __atomic_add_fetch(&c->used, (size_t)b->used, __ATOMIC_RELAXED);
        __atomic_add_fetch(&c->allocs, b->allocs, __ATOMIC_RELAXED);
        __atomic_add_fetch(&c->frees, b->frees, __ATOMIC_RELAXED);
    }
    b->live = b->used = 0;
    b->allocs = b->frees = 0;
    b->ops = 0;
}

static inline void guard_count(const hk_guard *g, int64_t live, int64_t used, int alloc) {
    guard_tl_batch *b = &guard_tl_b;
    if (HK__UNLIKELY(b->gen != g->ctr_gen || b->idx != g->ctr)) {
        guard_tl_flush();
        if (b->gen == 0) (void)hk_os_on_thread_exit(guard_tl_flush); /* first use in this thread */
        b->idx = g->ctr;
        b->gen = g->ctr_gen;
    }
    b->live += live;
    b->used += used;
    if (alloc > 0)
        b->allocs++;
    else if (alloc < 0)
        b->frees++;
    if (++b->ops >= GUARD_TL_BATCH) guard_tl_flush();
}

bool hk__guard_ctr_claim(hk_guard *g) {
    uint64_t gen = __atomic_add_fetch(&guard_ctr_gen, 1, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < GUARD_MAX_CTRS; i++) {
        uint64_t zero = 0;
        if (__atomic_compare_exchange_n(&guard_ctrs[i].gen, &zero, gen, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            guard_ctrs[i].live = guard_ctrs[i].used = 0;
            guard_ctrs[i].allocs = guard_ctrs[i].frees = 0;
            g->ctr = i;
            g->ctr_gen = gen;
            return true;
        }
    }
    return false;
}

void hk__guard_ctr_release(hk_guard *g) {
    if (g->ctr_gen) __atomic_store_n(&guard_ctrs[g->ctr].gen, 0, __ATOMIC_RELEASE);
}

void hk__guard_ctr_read(const hk_guard *g, size_t *live, size_t *used, uint64_t *allocs, uint64_t *frees) {
    guard_tl_flush();
    const guard_ctr *c = &guard_ctrs[g->ctr];
    if (live) *live = __atomic_load_n(&c->live, __ATOMIC_RELAXED);
    if (used) *used = __atomic_load_n(&c->used, __ATOMIC_RELAXED);
    if (allocs) *allocs = __atomic_load_n(&c->allocs, __ATOMIC_RELAXED);
    if (frees) *frees = __atomic_load_n(&c->frees, __ATOMIC_RELAXED);
}

/* ---- the backing allocator ------------------------------------------------------- */

#ifndef _WIN32
static void *guard_libc_malloc(size_t n) { return malloc(n); }
static void guard_libc_free(void *p) { free(p); }
static void *guard_libc_realloc(void *p, size_t n) { return realloc(p, n); }
static size_t guard_libc_usable_size(void *p) { return malloc_usable_size(p); }
static void *guard_libc_memalign(size_t a, size_t n) {
    void *p = NULL;
    return posix_memalign(&p, a, n) == 0 ? p : NULL;
}
#else
/* Windows: the C runtime has no posix_memalign whose blocks free() takes,
 * nor malloc_usable_size; each backing block carries a header (its size,
 * its distance from what malloc returned) just below the user pointer. */
typedef struct guard_win_hdr {
    size_t size, off;
} guard_win_hdr;
static void *guard_libc_memalign(size_t a, size_t n) {
    if (a < 16) a = 16;
    if ((a & (a - 1)) || n > SIZE_MAX - a - sizeof(guard_win_hdr)) return NULL;
    unsigned char *raw = malloc(n + a + sizeof(guard_win_hdr));
    if (!raw) return NULL;
    uintptr_t u = ((uintptr_t)raw + sizeof(guard_win_hdr) + a - 1) & ~(uintptr_t)(a - 1);
    guard_win_hdr *h = (guard_win_hdr *)u - 1;
    h->size = n;
    h->off = u - (uintptr_t)raw;
    return (void *)u;
}
static void *guard_libc_malloc(size_t n) { return guard_libc_memalign(16, n); }
static void guard_libc_free(void *p) {
    if (p) free((unsigned char *)p - ((guard_win_hdr *)p - 1)->off);
}
static size_t guard_libc_usable_size(void *p) { return p ? ((guard_win_hdr *)p - 1)->size : 0; }
static void *guard_libc_realloc(void *p, size_t n) {
    void *q = guard_libc_memalign(16, n);
    if (!q || !p) return q;
    size_t old = guard_libc_usable_size(p);
    memcpy(q, p, old < n ? old : n);
    guard_libc_free(p);
    return q;
}
#endif

hk_guard_backing hk__guard_libc_backing(void) {
    hk_guard_backing b = {guard_libc_malloc, guard_libc_free, guard_libc_realloc, guard_libc_memalign,
                          guard_libc_usable_size};
    return b;
}

/* ---- unguarded blocks --------------------------------------------------------------- */

#define GUARD_FB_STRIPES 64
typedef struct guard_fb_lock {
    int held;
    char pad[60];
} guard_fb_lock;
static guard_fb_lock guard_fb_locks[GUARD_FB_STRIPES];

static inline int *guard_fb_stripe(const void *user) {
    uintptr_t a = (uintptr_t)user;
    return &guard_fb_locks[((a >> 4) ^ (a >> 12)) & (GUARD_FB_STRIPES - 1)].held;
}
static inline void guard_fb_lock_take(int *l) {
    while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(l, __ATOMIC_RELAXED)) {
        }
}
static inline void guard_fb_lock_drop(int *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

static void guard_fb_nomem(hk_guard *g, size_t size) {
    hk__report(&g->core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, size, NULL,
               "no memory for %zu bytes (too large for the guard heap's reservation, and the backing "
               "allocator refused it)",
               size);
}

static inline uint32_t guard_fb_key(const void *user) { return (uint32_t)((uintptr_t)user >> 4); }

static void guard_fb_fail(hk_guard *g) { __atomic_add_fetch(&g->fail_count, 1, __ATOMIC_RELAXED); }

void *hk__guard_fb_alloc(hk_guard *g, size_t size, size_t align) {
    if (g->core.flags & HK_GUARD_PLAIN_UNGUARDED) {
        void *p = align > 16 ? g->backing.memalign(align, size) : g->backing.malloc(size);
        if (HK__UNLIKELY(!p)) {
            guard_fb_fail(g);
            guard_fb_nomem(g, size);
            return NULL;
        }
        if (g->core.flags & HK_FLAG_ZERO) memset(p, 0, size);
        return p; /* not counted: its free would have to tell it from a foreign pointer */
    }
    size_t total;
    size_t off = align > GUARD_FB_HDR ? align : GUARD_FB_HDR;
    if (!hk_size_add(size, off + GUARD_FB_CANARY, &total)) {
        guard_fb_fail(g);
        hk__report(&g->core.rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, size, NULL,
                   "asked %zu bytes, which overflows with the block overhead", size);
        return NULL;
    }
    unsigned char *raw = (unsigned char *)(align > GUARD_FB_HDR ? g->backing.memalign(align, total)
                                                                : g->backing.malloc(total));
    if (!raw) {
        guard_fb_fail(g);
        guard_fb_nomem(g, size);
        return NULL;
    }
    unsigned char *user = raw + off;
    guard_fb_hdr h = {(uint64_t)size, (uint32_t)off, GUARD_FB_MAGIC ^ guard_fb_key(user)};
    int *l = guard_fb_stripe(user);
    guard_fb_lock_take(l);
    memcpy(user - GUARD_FB_HDR, &h, sizeof h);
    guard_fb_lock_drop(l);
    hk_fill(user + size, GUARD_FB_CANARY, HK_FILL_PAD);
    if (g->core.flags & HK_FLAG_ZERO) memset(user, 0, size);
    guard_count(g, 1, (int64_t)size, 1);
    return user;
}

/* The 16 bytes before a would-be unguarded block, read whatever p is: a
 * wild or foreign pointer's page may be unmapped or inaccessible (issue
 * 21: a free of 0x12345670 used to crash here). With the fault handler
 * installed the read is a protected call (a fault returns, no system call
 * on the way); without it the range is probed first (one system call).
 * The loads are plain: no sanitizer checks memory that may not be its. */
typedef struct guard_fb_peek_arg {
    const unsigned char *src;
    guard_fb_hdr *h;
} guard_fb_peek_arg;

__attribute__((no_sanitize("address", "thread"))) static void guard_fb_peek_copy(void *arg) {
    guard_fb_peek_arg *a = (guard_fb_peek_arg *)arg;
    const volatile uint64_t *w = (const volatile uint64_t *)(const void *)a->src;
    uint64_t v[2] = {w[0], w[1]};
    memcpy(a->h, v, sizeof v);
}

static bool guard_fb_peek(const hk_guard *g, const void *p, guard_fb_hdr *h) {
    guard_fb_peek_arg a = {(const unsigned char *)p - GUARD_FB_HDR, h};
    if (g->fault_attached) return hk_os_protected_call(guard_fb_peek_copy, &a) == 0;
    if (!hk_os_readable(a.src, GUARD_FB_HDR)) return false;
    guard_fb_peek_copy(&a);
    return true;
}

int hk__guard_fb_read(const hk_guard *g, const void *p, guard_fb_hdr *h) {
    /* a header is 8-aligned and lies wholly above address 0 */
    if (((uintptr_t)p & 7u) != 0 || (uintptr_t)p < GUARD_FB_HDR) return 0;
    if (!guard_fb_peek(g, p, h)) return 0;
#ifdef HK__ASAN
    /* a stack or global pointer: the bytes before it are ASan redzone */
    if (__asan_region_is_poisoned((void *)((uintptr_t)p - GUARD_FB_HDR), GUARD_FB_HDR)) return 0;
#endif
    if (h->magic == (GUARD_FB_MAGIC ^ guard_fb_key(p)) && h->off >= GUARD_FB_HDR) return 1;
    if (h->magic == (GUARD_FB_DEAD ^ guard_fb_key(p))) return 2;
    return 0;
}

bool hk__guard_fb_owns(const hk_guard *g, const void *p) {
    guard_fb_hdr h;
    int *l = guard_fb_stripe(p);
    guard_fb_lock_take(l);
    int st = hk__guard_fb_read(g, p, &h);
    guard_fb_lock_drop(l);
    return st == 1;
}

/* Retires a live checked block: fill, dead magic, count, back to the backing. */
static void guard_fb_release(hk_guard *g, unsigned char *user, guard_fb_hdr h) {
    if (!(g->core.flags & HK_GUARD_NO_FILL))
        hk_fill(user, (size_t)h.size < 64 ? (size_t)h.size : 64, HK_FILL_FREE);
    h.magic = GUARD_FB_DEAD ^ guard_fb_key(user);
    guard_count(g, -1, -(int64_t)h.size, -1);
    int *l = guard_fb_stripe(user);
    guard_fb_lock_take(l);
    memcpy(user - GUARD_FB_HDR, &h, sizeof h);
    g->backing.free(user - h.off);
    guard_fb_lock_drop(l);
}

bool hk__guard_fb_free_sound(hk_guard *g, void *p) {
    guard_fb_hdr h;
    unsigned char *user = (unsigned char *)p;
    if (hk__guard_fb_read(g, p, &h) != 1 || !hk__fill_ok(user + h.size, GUARD_FB_CANARY, HK_FILL_PAD))
        return false;
    guard_fb_release(g, user, h);
    return true;
}

hk_result hk__guard_fb_free(hk_guard *g, void *p, void *const *cur, int ncur) {
    if (g->core.flags & HK_GUARD_PLAIN_UNGUARDED) {
        g->backing.free(p);
        return HK_OK;
    }
    guard_fb_hdr h;
    int st = hk__guard_fb_read(g, p, &h);
    char what[256];
    if (st == 2)
        return hk__guard_misuse(g, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, p, 0, NULL, cur, ncur,
                                hk__guard_fmt_what(what, sizeof what, "free of", p, NULL,
                                                   ": an unguarded block that was already freed"));
    if (st == 0)
        return hk__guard_misuse(
            g, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, 0, NULL, cur, ncur,
            hk__guard_fmt_what(what, sizeof what, "free of", p, NULL,
                               ", which this heap never returned (stack, global, interior "
                               "or foreign pointer)"));
    unsigned char *user = (unsigned char *)p;
    hk_result res = HK_OK;
    size_t bad = hk__fill_find(user + h.size, GUARD_FB_CANARY, HK_FILL_PAD);
    if (bad != GUARD_FB_CANARY) {
        guard_blockinfo b = {1, (uintptr_t)p, (size_t)h.size, GUARD_STATE_LIVE, 0, 0};
        res = hk__guard_misuse(
            g, HK_ERR_CORRUPT, HK_EK_HEAP_OVERFLOW, user + h.size + bad, (size_t)h.size, &b, cur, ncur,
            hk__guard_fmt_what(what, sizeof what, "write past the end found at free:", user + h.size + bad,
                               &b, " (canary damaged)"));
    }
    guard_fb_release(g, user, h);
    return res;
}

void *hk__guard_fb_resize(hk_guard *g, void *p, const guard_fb_hdr *h, size_t size, bool *done) {
    *done = false;
    if (h->off != GUARD_FB_HDR || g->align > GUARD_FB_HDR) return NULL;
    *done = true;
    size_t old = (size_t)h->size, total;
    if (!hk_size_add(size, GUARD_FB_HDR + GUARD_FB_CANARY, &total)) {
        guard_fb_fail(g);
        hk__report(&g->core.rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, size, NULL,
                   "realloc to %zu bytes overflows with the block overhead", size);
        return NULL;
    }
    if (!hk__fill_ok((unsigned char *)p + old, GUARD_FB_CANARY, HK_FILL_PAD)) {
        (void)hk__guard_fb_free(g, p, NULL, 0); /* reports the damage */
        return NULL;
    }
    int *l = guard_fb_stripe(p);
    guard_fb_lock_take(l);
    unsigned char *raw = (unsigned char *)g->backing.realloc((unsigned char *)p - GUARD_FB_HDR, total);
    guard_fb_lock_drop(l);
    if (!raw) {
        guard_fb_fail(g);
        guard_fb_nomem(g, size);
        return NULL;
    }
    unsigned char *user = raw + GUARD_FB_HDR;
    guard_fb_hdr nh = {(uint64_t)size, GUARD_FB_HDR, GUARD_FB_MAGIC ^ guard_fb_key(user)};
    l = guard_fb_stripe(user);
    guard_fb_lock_take(l);
    memcpy(raw, &nh, sizeof nh);
    guard_fb_lock_drop(l);
    hk_fill(user + size, GUARD_FB_CANARY, HK_FILL_PAD);
    if (size > old) {
        guard_count(g, 0, (int64_t)(size - old), 0);
        if (g->core.flags & HK_FLAG_ZERO) memset(user + old, 0, size - old);
    } else {
        guard_count(g, 0, -(int64_t)(old - size), 0);
    }
    return user;
}
