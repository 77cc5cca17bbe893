/*
 * shim/zone_malloc.c - libheapkit-malloc.so, a malloc replacement: every malloc
 * entry point served by one zone grown from the OS.
 *
 *   LD_PRELOAD=libheapkit-malloc.so program ...
 *
 * Design:
 *  - One zone, created on the first call with its control block and first
 *    1 MiB region in one mapping, with address space reserved after it; it
 *    grows that region in place by chunks of at least 1 MiB, doubling with
 *    the memory taken so far (up to 256 MiB a chunk). A request larger than
 *    the chunk gets a region of its own, given back to the OS when freed.
 *  - Thread safety: no global lock. The zone has HK_ZONE_THREADS: each
 *    thread allocates small blocks from its own heap and frees its own
 *    blocks with no lock; other threads' blocks are handed back lock-free;
 *    large and aligned blocks use the zone's own mutex (docs/zone.md,
 *    "Threads"). A thread's heap is made on its first malloc, abandoned
 *    when it exits and adopted by the next new thread.
 *  - Start-up: the zone is created under pthread_once with nothing but mmap.
 *    pthread_atfork, which may itself call malloc, is registered afterwards
 *    by the first thread to get there; a nested malloc from inside it finds
 *    the zone ready.
 *  - fork: the zone's lock (and its heap registry) is held across fork()
 *    (atfork prepare/parent/child), so the child never inherits the shared
 *    core in the middle of an operation; in the child the other threads'
 *    heaps are abandoned (their blocks stay valid and freeable) and the
 *    forking thread keeps its own.
 *  - Bad pointers (a free of memory this zone never returned, a double free)
 *    are reported on stderr as "heapkit: zone 'malloc': ..." and ignored;
 *    the program goes on. Out of memory is not reported (malloc returns NULL
 *    with errno ENOMEM, as programs expect).
 *
 *  - Memory back to the OS: free pages that stay free HEAPKIT_DECAY_MS
 *    (500 by default) are given back (madvise), checked on the zone's slow
 *    paths; malloc_trim(0) gives back everything free at once
 *    (hk_zone_trim, docs/zone.md "Returning memory to the OS").
 *
 * Environment (rows of shim/options.h): HEAPKIT_QUIET=1 silences the
 * reports; HEAPKIT_STATS=1 prints the zone's statistics (totals over every
 * thread) to stderr at exit; HEAPKIT_FAIL_AFTER=N (with
 * HEAPKIT_FAIL_PERSIST=1: and every later one) makes the N-th page
 * acquisition fail, for out-of-memory tests.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "heapkit/zone.h"
#include "internal.h"
#include "options.h"
#include "zone_heaps.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_once_t g_shim_once = PTHREAD_ONCE_INIT;
static hk_zone *g_shim_zone;
static int g_shim_quiet;
static int g_shim_atfork; /* claimed with an atomic exchange */

static void shim_write_all(const char *s, size_t n) {
    while (n) {
        ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

/* Reports without allocating: one write(2) per line. */
static void shim_on_error(const hk_error *e, void *user) {
    (void)user;
    if (g_shim_quiet || e->kind == HK_EK_NOMEM || e->kind == HK_EK_OVERFLOW) return;
    char line[600];
    int n = snprintf(line, sizeof line, "heapkit: %s\n", e->message);
    if (n > 0) shim_write_all(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static void shim_atfork_prepare(void) {
    if (g_shim_zone) hk__zone_fork_prepare(g_shim_zone);
}
static void shim_atfork_parent(void) {
    if (g_shim_zone) hk__zone_fork_parent(g_shim_zone);
}
static void shim_atfork_child(void) {
    if (g_shim_zone) hk__zone_fork_child(g_shim_zone);
}

static void shim_create(void) {
    hk__track_off(); /* this is malloc: memcheck and heaptrack see its calls (src/track.h) */
    g_shim_quiet = hk_opt_bool(HK_OPT_MALLOC_QUIET);
    size_t fail_after = hk_opt_number(HK_OPT_MALLOC_FAIL_AFTER); /* out-of-memory tests */
    if (fail_after) hk_os_fail_after(fail_after, hk_opt_bool(HK_OPT_MALLOC_FAIL_PERSIST) != 0);
    hk_zone_desc d;
    memset(&d, 0, sizeof d);
    d.size = (size_t)1 << 20;
    d.grow_size = (size_t)1 << 20;
    d.name = "malloc";
    d.flags = HK_FLAG_QUIET | HK_ZONE_THREADS; /* the zone's own mutex for its shared core */
    d.on_error = shim_on_error;
    size_t decay = hk_opt_number(HK_OPT_MALLOC_DECAY_MS);
    d.decay_ms = decay == 0 ? -1 : decay > 86400000u ? 86400000 : (int)decay; /* at most a day */
    g_shim_zone = hk_zone_create(&d);
    /* the inline paths find the thread's heap in one load (zone_heaps.h) */
    if (g_shim_zone && g_shim_zone->fast == ZONE_FAST_THREADS) hk__zone_set_main(g_shim_zone);
}

/* The zone once it exists and the fork hooks are registered: the one load
 * of every call after start-up; g_shim_fast is the same zone when its
 * small blocks come from thread heaps (the inline paths' only test). */
static hk_zone *g_shim_ready;
/* Until then g_shim_fast is a zone with an empty space and a zone id no
 * thread holds, so that both inline paths fail their one compare and need
 * no test of their own. */
static hk_zone g_shim_none = {.zid = UINT64_MAX};
static hk_zone *g_shim_fast = &g_shim_none;

static HK__NOINLINE hk_zone *shim_zone_slow(void) {
    pthread_once(&g_shim_once, shim_create);
    if (!__atomic_exchange_n(&g_shim_atfork, 1, __ATOMIC_ACQ_REL)) {
        pthread_atfork(shim_atfork_prepare, shim_atfork_parent, shim_atfork_child);
        if (g_shim_zone && g_shim_zone->fast == ZONE_FAST_THREADS)
            __atomic_store_n(&g_shim_fast, g_shim_zone, __ATOMIC_RELEASE);
        __atomic_store_n(&g_shim_ready, g_shim_zone, __ATOMIC_RELEASE);
    }
    return g_shim_zone;
}

static inline hk_zone *shim_zone(void) {
    hk_zone *z = __atomic_load_n(&g_shim_ready, __ATOMIC_ACQUIRE);
    return HK__LIKELY(z != NULL) ? z : shim_zone_slow();
}

/* malloc and free take the thread heap's inline paths first (one call
 * less than through hk_zone_alloc / hk_zone_free, which they would reach
 * the same way), then the public calls, out of line and reached by a tail
 * call, so that the inline paths need no frame: the first calls (the zone
 * not made yet), a thread's first call, large blocks. malloc's sets errno. */
static HK__NOINLINE void *shim_malloc_slow(size_t n) {
    hk_zone *z = shim_zone();
    void *p = z ? hk_zone_alloc(z, n) : NULL; /* its inline pop again, then the slow paths */
    if (!p) errno = ENOMEM;
    return p;
}
/* What the direct pop did not serve: a request of ZS_DIRECT_MAX..ZS_MAX
 * bytes, a class whose run is empty, a thread with no heap yet. */
static HK__NOINLINE void *shim_malloc_miss(size_t n) {
    zs_heap *h = hk__zone_tl_main;
    if (HK__LIKELY(n <= ZS_MAX) && HK__LIKELY(h != &hk__zs_none_heap)) {
        void *u = zs_alloc(h, n);
        if (HK__LIKELY(u != NULL)) return u;
    }
    return shim_malloc_slow(n);
}
static HK__NOINLINE void shim_free_slow(void *p) {
    if (!p) return;
    hk_zone *z = shim_zone();
    if (z) (void)hk_zone_free(z, p);
}

static inline __attribute__((always_inline)) void *shim_malloc(size_t n) {
    /* the thread's heap, or the none heap: its direct entries all miss */
    zs_heap *h = hk__zone_tl_main;
    if (HK__LIKELY(n <= ZS_DIRECT_MAX)) {
        zs_run *r = h->direct[(n + 7u) >> 3];
        unsigned char *u = r->free;
        if (HK__LIKELY(u != r->base)) return zs_pop(h, r, u);
    }
    return shim_malloc_miss(n);
}

static inline __attribute__((always_inline)) void shim_free(void *p) {
    hk_zone *z = __atomic_load_n(&g_shim_fast, __ATOMIC_ACQUIRE);
    /* NULL and anything outside the small-block space fail the one compare;
     * a thread without a heap has the none heap, which owns no run */
    uintptr_t off = (uintptr_t)p - z->small.lo;
    if (HK__LIKELY(off < z->small.used)) {
        /* checked; another heap's block goes back lock-free */
        (void)zs_free(&z->small, hk__zone_tl_main, zs_run_at(&z->small, off), p, "free");
        return;
    }
    shim_free_slow(p);
}

static void *shim_realloc(void *p, size_t n) {
    hk_zone *z = shim_zone();
    return z ? hk_zone_realloc(z, p, n) : NULL;
}

static void *shim_memalign(size_t a, size_t n) {
    hk_zone *z = shim_zone();
    return z ? hk_zone_alloc_aligned(z, a, n) : NULL;
}

static size_t shim_usable_size(void *p) {
    hk_zone *z = shim_zone();
    return z ? hk_zone_usable_size(z, p) : 0;
}

__attribute__((destructor)) static void shim_report_stats(void) {
    if (!g_shim_zone || !hk_opt_bool(HK_OPT_MALLOC_STATS)) return;
    hk_stats st;
    hk_zone_stats(g_shim_zone, &st);
    char line[400];
    int n = snprintf(
        line, sizeof line,
        "heapkit: zone 'malloc': %llu allocations, %llu frees, %zu live blocks (%zu bytes), peak %zu "
        "bytes, capacity %zu, %llu misuse reports\n",
        (unsigned long long)st.alloc_count, (unsigned long long)st.free_count, st.live_blocks, st.used,
        st.peak_used, st.capacity, (unsigned long long)st.error_count);
    if (n > 0) shim_write_all(line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

#define HK_SHIM_MAX_ALIGN ((size_t)1 << 34) /* the zone's largest alignment */
#define HK_SHIM_MALLOC_ERRNO
#define HK_SHIM_FREE_NULL
#include "override.inc"

/* glibc's malloc_trim: gives the zone's free memory back to the OS now
 * (hk_zone_trim; pad is ignored: the zone keeps no pad at its top). 1 when
 * some memory was given back, else 0, as glibc. */
HK_SHIM_EXPORT int malloc_trim(size_t pad) {
    (void)pad;
    hk_zone *z = shim_zone();
    return z && hk_zone_trim(z) > 0;
}
