/*
 * src/track.c - the tools behind src/track.h: Valgrind memcheck (client
 * requests: malloc-like blocks, definedness, error reporting), heaptrack (heaptrack_malloc / _free /
 * _realloc, found with hk_os_find_function) and Tracy (its C memory events, named pools, with -DHK_TRACY).
 *
 * Invariants:
 *  - g_tools is written once, by the one caller that moved g_probed from 0
 *    to 1 (probing), before it publishes 2 (release); a reader that sees 2
 *    sees the tools and heaptrack's entry points; one that sees 1 gets no
 *    tool (it may be a malloc made by the probe's own dlsym). hk__track_off
 *    moves 0 straight to 2, with no tool.
 *  - a tool's calls are made only when its bit is in the instance's track
 *    byte, so an instance created before a tool was found never announces
 *    half its blocks.
 *  - memcheck sees a block from hk__track_alloc to hk__track_free, as a
 *    malloc-like block at the address the program holds.
 *  - Tracy pool names are the instances' names as given (desc.name, or the
 *    allocator's literal name): Tracy keeps the pointer, so it must live as
 *    long as the program (docs/tools.md says so).
 */
#include "common.h"

#include <stdlib.h>

/* ---- Tracy: the C entry points of TracyC.h (TracyClient), declared as there ---- */

#ifdef HK_TRACY
#ifndef HK_TRACY_CALLSTACK
#define HK_TRACY_CALLSTACK 0 /* frames per event; 0: no call stacks (cheapest) */
#endif
void ___tracy_emit_memory_alloc_named(const void *ptr, size_t size, int secure, const char *name);
void ___tracy_emit_memory_alloc_callstack_named(const void *ptr, size_t size, int depth, int secure,
                                                const char *name);
void ___tracy_emit_memory_free_named(const void *ptr, int secure, const char *name);
void ___tracy_emit_memory_free_callstack_named(const void *ptr, int depth, int secure, const char *name);

static void tracy_alloc(const hk__core *c, const void *p, size_t n) {
    if (HK_TRACY_CALLSTACK > 0)
        ___tracy_emit_memory_alloc_callstack_named(p, n, HK_TRACY_CALLSTACK, 0, c->rep.instance);
    else
        ___tracy_emit_memory_alloc_named(p, n, 0, c->rep.instance);
}
static void tracy_free(const hk__core *c, const void *p) {
    if (HK_TRACY_CALLSTACK > 0)
        ___tracy_emit_memory_free_callstack_named(p, HK_TRACY_CALLSTACK, 0, c->rep.instance);
    else
        ___tracy_emit_memory_free_named(p, 0, c->rep.instance);
}
#else
static void tracy_alloc(const hk__core *c, const void *p, size_t n) {
    (void)c;
    (void)p;
    (void)n;
}
static void tracy_free(const hk__core *c, const void *p) {
    (void)c;
    (void)p;
}
#endif

/* ---- probing ---------------------------------------------------------------------- */

typedef void (*track_ht_alloc_fn)(void *, size_t);
typedef void (*track_ht_free_fn)(void *);
typedef void (*track_ht_realloc_fn)(void *, size_t, void *);

static unsigned g_tools;
static int g_probed;
static track_ht_alloc_fn g_ht_alloc;
static track_ht_free_fn g_ht_free;
static track_ht_realloc_fn g_ht_realloc;

static unsigned track_probe(void) {
    unsigned t = 0;
    const char *env = getenv("HEAPKIT_TRACK");
    if (env && env[0] == '0') return 0;
#ifdef HK__VALGRIND
    /* memcheck only: another Valgrind tool (callgrind counting the fast
     * paths) must see heapkit as it runs outside. GET_VBITS answers 1 under
     * memcheck alone (0 elsewhere). */
    if (RUNNING_ON_VALGRIND) {
        unsigned char x = 0, vbits = 0;
        if (VALGRIND_GET_VBITS(&x, &vbits, 1) == 1) t |= HK__TRACK_VALGRIND;
    }
#endif
    void *a = hk_os_find_function("heaptrack_malloc");
    void *f = hk_os_find_function("heaptrack_free");
    void *r = hk_os_find_function("heaptrack_realloc");
    if (a && f && r) {
        memcpy(&g_ht_alloc, &a, sizeof a);
        memcpy(&g_ht_free, &f, sizeof f);
        memcpy(&g_ht_realloc, &r, sizeof r);
        t |= HK__TRACK_HEAPTRACK;
    }
#ifdef HK_TRACY
    t |= HK__TRACK_TRACY;
#endif
    return t;
}

unsigned hk__track_tools(void) {
    int st = __atomic_load_n(&g_probed, __ATOMIC_ACQUIRE);
    if (HK__LIKELY(st == 2)) return g_tools;
    int zero = 0;
    if (__atomic_compare_exchange_n(&g_probed, &zero, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        g_tools = track_probe();
        __atomic_store_n(&g_probed, 2, __ATOMIC_RELEASE);
        return g_tools;
    }
    /* Probing elsewhere, or below this very probe (a malloc that dlsym made
     * reached an instance being created): no tool for this instance rather
     * than a wait that could never end. */
    return __atomic_load_n(&g_probed, __ATOMIC_ACQUIRE) == 2 ? g_tools : 0;
}

void hk__track_off(void) {
    int zero = 0;
    (void)__atomic_compare_exchange_n(&g_probed, &zero, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/* ---- events ----------------------------------------------------------------------- */

/* Memcheck hears of blocks as malloc-like blocks, not mempool chunks:
 * Valgrind 3.19's leak check looks at mempool chunks only when some malloc
 * block is still live at exit ("All heap blocks were freed -- no leaks are
 * possible" otherwise, tried here), so a program whose blocks are all
 * heapkit's would have its leaks unreported. An instance needs no pool of
 * its own then: create and destroy are where a tool that keeps one per
 * instance would hook in. */
void hk__track_create(const hk__core *c) { (void)c; }

void hk__track_destroy(const hk__core *c) { (void)c; }

void hk__track_heap(const hk__core *c, const void *p, size_t n, int own) {
#ifdef HK__VALGRIND
    if ((c->track & HK__TRACK_VALGRIND) && n) {
        if (own)
            VALGRIND_MAKE_MEM_NOACCESS(p, n);
        else
            VALGRIND_MAKE_MEM_UNDEFINED(p, n);
    }
#endif
    (void)c;
    (void)p;
    (void)n;
    (void)own;
}

void hk__track_alloc(const hk__core *c, const void *p, size_t n, int defined) {
#ifdef HK__VALGRIND
    if (c->track & HK__TRACK_VALGRIND) {
        VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, 0);
        if (defined && n) VALGRIND_MAKE_MEM_DEFINED(p, n);
    }
#endif
    if (c->track & HK__TRACK_HEAPTRACK) g_ht_alloc((void *)(uintptr_t)p, n);
    if (c->track & HK__TRACK_TRACY) tracy_alloc(c, p, n);
    (void)defined;
}

void hk__track_free(const hk__core *c, const void *p) {
#ifdef HK__VALGRIND
    if (c->track & HK__TRACK_VALGRIND) VALGRIND_FREELIKE_BLOCK(p, 0);
#endif
    if (c->track & HK__TRACK_HEAPTRACK) g_ht_free((void *)(uintptr_t)p);
    if (c->track & HK__TRACK_TRACY) tracy_free(c, p);
}

#ifdef HK__VALGRIND
/* Copies memcheck's definedness of n bytes from `from` (addressable) to
 * `to` (addressable), in chunks; where that fails the bytes are defined. */
static void track_vg_copy_state(const void *from, const void *to, size_t n) {
    unsigned char bits[256];
    for (size_t off = 0; off < n;) {
        size_t k = n - off < sizeof bits ? n - off : sizeof bits;
        const char *src = (const char *)from + off, *dst = (const char *)to + off;
        if (VALGRIND_GET_VBITS(src, bits, k) != 1 || VALGRIND_SET_VBITS(dst, bits, k) != 1)
            VALGRIND_MAKE_MEM_DEFINED(dst, k);
        off += k;
    }
}
#endif

void hk__track_realloc(const hk__core *c, const void *old, size_t old_n, const void *p, size_t n) {
#ifdef HK__VALGRIND
    if (c->track & HK__TRACK_VALGRIND) {
        if (p == old) {
            VALGRIND_RESIZEINPLACE_BLOCK(p, old_n, n, 0); /* grown bytes: undefined; shrunk: unaddressable */
        } else {
            VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, 0);
            track_vg_copy_state(old, p, n < old_n ? n : old_n);
            VALGRIND_FREELIKE_BLOCK(old, 0);
        }
    }
#endif
    if (c->track & HK__TRACK_HEAPTRACK) g_ht_realloc((void *)(uintptr_t)old, n, (void *)(uintptr_t)p);
    if (c->track & HK__TRACK_TRACY) {
        tracy_free(c, old);
        tracy_alloc(c, p, n);
    }
    (void)old_n;
}

void hk__track_move(const hk__core *c, const void *old, const void *p, size_t n) {
    if (old == p) return;
#ifdef HK__VALGRIND
    if (c->track & HK__TRACK_VALGRIND) {
        /* The allocator copied the bytes while the new place was not the
         * program's: memcheck kept no state for them. The old block ends
         * first (the two may overlap), then the block is defined where it
         * is now (its allocation stack becomes the move's). */
        VALGRIND_FREELIKE_BLOCK(old, 0);
        VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, 1);
    }
#endif
    if (c->track & HK__TRACK_HEAPTRACK) g_ht_realloc((void *)(uintptr_t)old, n, (void *)(uintptr_t)p);
    if (c->track & HK__TRACK_TRACY) {
        tracy_free(c, old);
        tracy_alloc(c, p, n);
    }
}

void hk__track_enter(const hk__core *c) {
#ifdef HK__VALGRIND
    if (c->track & HK__TRACK_VALGRIND) VALGRIND_DISABLE_ERROR_REPORTING;
#endif
    (void)c;
}

void hk__track_leave(const hk__core *c) {
#ifdef HK__VALGRIND
    if (c->track & HK__TRACK_VALGRIND) VALGRIND_ENABLE_ERROR_REPORTING;
#endif
    (void)c;
}

int hk__track_end_visit(const hk_block_info *info, void *core) {
    if ((info->flags & HK_BLOCK_USED) && info->address) hk__track_free((const hk__core *)core, info->address);
    return 0;
}
