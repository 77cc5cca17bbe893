/*
 * src/guard.c - the guard heap's public API: create and destroy,
 * allocation, free, realloc, sizes, stats and info, fork hooks. See
 * heapkit/guard.h; the machinery is in the other guard_*.c files (listed,
 * with the heap's invariants, in guard_internal.h).
 *
 * Invariants kept here: stacks are captured in the public entry points or
 * in a helper they call (hk__guard_capture's depth says which, so the
 * recorded stack starts at the user's call), none of them inlined or
 * reached through a tail call;
 * an instance's core is initialised (and its desc validated, refusals
 * reported) before anything else is set up, and destroy undoes a partial
 * create; with HK_FLAG_PARANOID (or HK_DEBUG >= 3) every mutating call but
 * hk_guard_alloc_unguarded (which must not take the lock) ends with the
 * full check, under the lock.
 */
#include "guard_internal.h"

/* The paranoid after-op check (the core's): one predictable branch when off. */
static inline void guard_after(hk_guard *g) {
    if (HK__UNLIKELY(g->core.paranoid)) {
        guard_lock(g);
        hk__core_after(&g->core);
        guard_unlock(g);
    }
}

static hk_result guard_check_self(void *self) { return hk__guard_check_locked((hk_guard *)self); }

/* ---- create / destroy -------------------------------------------------------------- */

/* Validates the desc fields the core does not know. Reports the first bad
 * one through the core's reporter. */
static bool guard_desc_ok(hk__core *core, const hk_guard_desc *desc, size_t page, size_t align, int nb) {
    const char *bad = NULL;
    if (!hk_is_pow2(align) || align > page)
        bad = "align must be a power of two no larger than the page size";
    else if (desc->align_min && (!hk_is_pow2(desc->align_min) || desc->align_min > align))
        bad = "align_min must be a power of two no larger than align";
    else if (nb != 0 && nb != 4)
        bad = "backing needs malloc, free, realloc and memalign, or none";
    else if ((desc->flags & HK_GUARD_PLAIN_UNGUARDED) && nb == 4 && !desc->backing.usable_size)
        bad = "HK_GUARD_PLAIN_UNGUARDED with a custom backing needs its usable_size";
    else if ((unsigned)desc->side > (unsigned)HK_GUARD_SIDE_RANDOM)
        bad = "side is not an hk_guard_side";
    else if (desc->frames < 0 || desc->frames > HK_GUARD_MAX_FRAMES)
        bad = "frames must be 0..HK_GUARD_MAX_FRAMES";
    if (!bad) return true;
    hk__report(&core->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL, "bad desc: %s", bad);
    return false;
}

/* The address space and metadata regions. false when the OS refuses. */
static bool guard_reserve(hk_guard *g, size_t reserve) {
    size_t page = g->page;
    if (!hk_size_align(reserve, page, &reserve) || reserve < 4 * page) return false;
    g->arena = (unsigned char *)hk_os_reserve(reserve);
    if (!g->arena) return false;
    g->arena_size = reserve;
    size_t npages = reserve / page;
    if (npages > UINT32_MAX) return false; /* slot records hold page indexes in 32 bits */
    if (!guard_region_init(&g->slot_reg, (npages / 2 + 2) * sizeof(guard_slot), page)) return false;
    if (!guard_region_init(&g->map_reg, npages * sizeof(uint32_t), page)) return false;
    g->trace_stride = GUARD_TRACE_HDR + (size_t)g->frames * sizeof(void *);
    if (!guard_region_init(&g->trace_reg, GUARD_TRACE_RESERVE, page)) return false;
    if (!guard_region_init(&g->bucket_reg, GUARD_TRACE_BUCKETS * sizeof(uint32_t), page)) return false;
    if (!guard_region_ensure(&g->bucket_reg, GUARD_TRACE_BUCKETS * sizeof(uint32_t), page)) return false;
    g->slots = (guard_slot *)(void *)guard_region_data(&g->slot_reg, page);
    g->pagemap = (uint32_t *)(void *)guard_region_data(&g->map_reg, page);
    g->buckets = (uint32_t *)(void *)guard_region_data(&g->bucket_reg, page);
    g->nbuckets = GUARD_TRACE_BUCKETS0;
    if (!guard_region_ensure(&g->slot_reg, sizeof(guard_slot), page)) return false;
    g->nslots = 1; /* id 0 means none */
    return true;
}

/* Releases what guard_reserve made (any part of it). */
static void guard_release_space(hk_guard *g) {
    if (g->arena) {
#ifdef HK__ASAN
        /* freed blocks were poisoned; the shadow outlives the mapping */
        if (g->bump) ASAN_UNPOISON_MEMORY_REGION(g->arena, g->bump);
#endif
        hk_os_release(g->arena, g->arena_size);
    }
    g->arena = NULL;
    g->arena_size = 0;
    guard_region_free(&g->slot_reg);
    guard_region_free(&g->map_reg);
    guard_region_free(&g->trace_reg);
    guard_region_free(&g->bucket_reg);
}

/* GUARD_SLOT_GI carving (HK_GUARD_FAST_REUSE, side START): slots carved
 * from a read/write chunk starting at bump, each guard page installed in
 * it, where the kernel can (see guard_slots.c). Asked first on the
 * inaccessible reservation (the mapping below drops what it installed): no
 * mapping at all where it is missing. */
static void guard_gi_start(hk_guard *g) {
    size_t chunk = GUARD_OPEN_CHUNK < g->arena_size / 2 ? GUARD_OPEN_CHUNK : g->page;
    if (g->bump + chunk + g->page > g->arena_size) return;
    unsigned char *at = g->arena + g->bump;
    if (hk_os_guard_install(at, g->page) == HK_OK && hk_os_map_own(at, chunk, 1) == HK_OK) {
        if (hk_os_guard_install(at, g->page) == HK_OK) {
            g->gi = 1;
            g->open_end = g->bump + chunk;
        } else {
            (void)hk_os_discard(at, chunk);
        }
    }
}

hk_guard *hk_guard_create(const hk_guard_desc *desc) {
    if (!desc) return NULL;
    hk__core core;
    if (HK__CORE_INIT(&core, "guard", desc, guard_check_self, NULL) != HK_OK) return NULL;
    size_t page = hk_os_page_size();
    size_t align = desc->align ? desc->align : HK_GUARD_DEFAULT_ALIGN;
    int nb = (desc->backing.malloc != NULL) + (desc->backing.free != NULL) + (desc->backing.realloc != NULL) +
             (desc->backing.memalign != NULL);
    if (!guard_desc_ok(&core, desc, page, align, nb)) return NULL;

    size_t self_size;
    hk_guard *g = NULL;
    if (hk_size_align(sizeof(hk_guard), page, &self_size)) g = (hk_guard *)hk_os_alloc(self_size);
    if (!g) {
        hk__report(&core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, sizeof(hk_guard), NULL,
                   "no memory for the instance");
        return NULL;
    }
    memset(g, 0, sizeof *g);
    g->core = core;
    g->core.self = g;
    /* memcheck hears of guard blocks as malloc-like blocks (hk__san_alloc);
     * heaptrack and Tracy through src/track.h */
    g->core.track &= (uint8_t)~HK__TRACK_VALGRIND;
    if (!g->core.lock.lock) {
        hk_os_mutex_init(&g->mutex);
        g->own_mutex = true;
        hk__core_set_lock(&g->core, hk_os_mutex_lock_hook, hk_os_mutex_unlock_hook, &g->mutex);
    }
    g->self_size = self_size;
    g->page = page;
    g->side = desc->side;
    g->align = align;
    g->align_min = desc->align_min ? desc->align_min : 1;
    g->q_max_bytes = desc->quarantine_bytes ? desc->quarantine_bytes : HK_GUARD_DEFAULT_QUARANTINE_BYTES;
    g->q_max_blocks = desc->quarantine_blocks ? desc->quarantine_blocks : HK_GUARD_DEFAULT_QUARANTINE_BLOCKS;
    g->sample_rate = desc->sample_rate;
    if (desc->max_guarded) {
        g->max_guarded = desc->max_guarded;
    } else {
        size_t mmc = hk_os_max_map_count();
        g->max_guarded = mmc > 16384 ? (mmc - 8192) / 2 : mmc / 4;
    }
    /* Up to half the mapping budget goes to slots with mappings of their own
     * (two mappings each whatever their state); the rest to live shared ones. */
    g->own_max = g->max_guarded / 2;
    g->frames = desc->frames ? desc->frames : HK_GUARD_DEFAULT_FRAMES;
    g->report_fd = desc->report_fd ? desc->report_fd : 2;
    g->skip = desc->skip_frames > 0 ? desc->skip_frames : 0;
    g->backing = nb == 4 ? desc->backing : hk__guard_libc_backing();
    g->rng = desc->seed ? desc->seed : 0x2545F4914F6CDD1Dull;
    g->secret = guard_mix(hk_os_now_ns() ^ (uint64_t)(uintptr_t)g ^ 0x9E3779B97F4A7C15ull) | 1u;
    if (!hk__guard_ctr_claim(g)) {
        hk__report(&g->core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, 0, NULL,
                   "too many guard heaps alive at once");
        goto fail;
    }
    /* Under an address-space limit (ulimit -v) the reservation is halved
     * until it fits, down to GUARD_MIN_RESERVE; reserve_size says what we got. */
    size_t want = desc->reserve ? desc->reserve : HK_GUARD_DEFAULT_RESERVE, got = want;
    while (!guard_reserve(g, got)) {
        guard_release_space(g);
        if (got / 2 < GUARD_MIN_RESERVE || got < 8 * page) {
            hk__report(&g->core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, want, NULL,
                       "the OS refused the address space or metadata (even %zu bytes)", got);
            goto fail;
        }
        got /= 2;
    }
    if (got < want)
        hk__report(&g->core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, want, NULL,
                   "address space limited: reserved %zu MiB for guarded blocks instead of %zu MiB",
                   g->arena_size >> 20, want >> 20);
    if ((g->core.flags & HK_GUARD_FAST_REUSE) && g->side == HK_GUARD_SIDE_START) guard_gi_start(g);
    hk__guard_report_init();
    if (!(g->core.flags & HK_GUARD_NO_TRACES)) hk_os_stack_init();
    if (!(g->core.flags & HK_GUARD_NO_SYMBOLIZE_LINES)) hk_os_symbolize_init();
    if (g->core.flags & HK_GUARD_FAULT_HANDLER) g->fault_attached = hk__guard_fault_attach(g);
    return g;
fail:
    hk_guard_destroy(g);
    return NULL;
}

void hk_guard_destroy(hk_guard *g) {
    if (!g) return;
    if (HK__TRACKED(&g->core)) (void)hk_guard_walk(g, hk__track_end_visit, &g->core); /* each block ends */
    hk__guard_fault_detach(g);
    hk__guard_ctr_release(g);
    guard_release_space(g);
    if (g->own_mutex) hk_os_mutex_destroy(&g->mutex);
    hk_os_release(g, g->self_size);
}

/* ---- sampling ------------------------------------------------------------------------ */

static _Thread_local uint32_t guard_tl_countdown __attribute__((tls_model("initial-exec")));
static _Thread_local uint64_t guard_tl_sample_gen __attribute__((tls_model("initial-exec")));
static _Thread_local uint64_t guard_tl_rng __attribute__((tls_model("initial-exec")));

/* True when this allocation is to be guarded: a per-thread random
 * countdown (as GWP-ASan), inline in the entry points (it runs on every
 * call in sampling mode). */
static inline bool guard_sample(hk_guard *g) {
    if (HK__UNLIKELY(hk__guard_tl_reporting)) return false; /* the symbolizer's allocations */
    if (g->sample_rate <= 1) return true;
    if (HK__UNLIKELY(guard_tl_sample_gen != g->ctr_gen)) { /* another heap sampled last on this thread */
        guard_tl_sample_gen = g->ctr_gen;
        guard_tl_countdown = 0;
    }
    if (guard_tl_countdown > 1) {
        guard_tl_countdown--;
        return false;
    }
    if (!guard_tl_rng) guard_tl_rng = g->rng ^ (uint64_t)(uintptr_t)&guard_tl_rng;
    guard_tl_countdown = 1u + (uint32_t)(guard_rand(&guard_tl_rng) % (2ull * g->sample_rate - 1));
    return true;
}

/* ---- allocation ----------------------------------------------------------------------- */

/* The alignment a block of `size` bytes gets from alloc and realloc: the
 * largest power of two dividing size, at least align_min and at most the
 * heap's alignment (a single object of n bytes never needs more than the
 * largest power of two dividing n, since a type's size is a multiple of
 * its alignment; a header followed by an odd-sized tail, or a runtime that
 * tags the low bits of its pointers, does: align_min, see docs/guard.md). With
 * side END the block then ends on the trailing guard page: a read or write
 * one byte past it faults, where a 16-byte-aligned 13-byte block would
 * leave 3 bytes of padding that a read crosses unseen. */
static inline size_t guard_size_align(const hk_guard *g, size_t size) {
    if (size == 0) return g->align;
    size_t low = size & (~size + 1);
    if (low < g->align_min) low = g->align_min;
    return low < g->align ? low : g->align;
}

static void *guard_alloc_any(hk_guard *g, size_t size, size_t align, void *const *frames, int nframes,
                             bool guarded) {
    if (align > g->page || !guarded) return hk__guard_fb_alloc(g, size, align);
    return hk__guard_alloc_guarded(g, size, align, frames, nframes);
}

HK__NOINLINE void *hk_guard_alloc(hk_guard *g, size_t size) {
    if (!g) return NULL;
    void *p;
    if (!guard_sample(g)) {
        p = hk__guard_fb_alloc(g, size, g->align);
    } else {
        void *frames[HK_GUARD_MAX_FRAMES];
        int n = hk__guard_capture(g, frames, 1);
        p = guard_alloc_any(g, size, guard_size_align(g, size), frames, n, true);
    }
    guard_after(g);
    return p;
}

HK__NOINLINE void *hk_guard_alloc_aligned(hk_guard *g, size_t align, size_t size) {
    if (!g) return NULL;
    if (!hk_is_pow2(align)) {
        hk__report(&g->core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, align, NULL,
                   "alignment %zu is not a power of two", align);
        return NULL;
    }
    /* exactly what was asked, or what the size needs when that is more */
    size_t need = guard_size_align(g, size);
    if (align < need) align = need;
    bool guarded = guard_sample(g);
    void *frames[HK_GUARD_MAX_FRAMES];
    int n = guarded ? hk__guard_capture(g, frames, 1) : 0;
    void *p = guard_alloc_any(g, size, align, frames, n, guarded);
    guard_after(g);
    return p;
}

void *hk_guard_alloc_unguarded(hk_guard *g, size_t size) {
    return g ? hk__guard_fb_alloc(g, size, g->align) : NULL;
}

void hk_guard_fork_prepare(hk_guard *g) {
    if (!g) return;
    guard_lock(g);
    (void)hk__guard_report_begin();
}
void hk_guard_fork_parent(hk_guard *g) {
    if (!g) return;
    hk__guard_report_end();
    guard_unlock(g);
}
void hk_guard_fork_child(hk_guard *g) {
    if (!g) return;
    hk__guard_report_end();
    guard_unlock(g); /* the child's one thread is the one that took it in prepare */
}

void hk_guard_lead_from_now(hk_guard *g) {
    if (!g) return;
    guard_lock(g);
    g->side = HK_GUARD_SIDE_START;
    g->q_max_bytes = 1; /* what is quarantined leaves at the next free that quarantines */
    g->core.flags |= HK_GUARD_FAST_REUSE;
    if (!g->gi) guard_gi_start(g);
    guard_unlock(g);
}

/* ---- free -------------------------------------------------------------------------------- */

static HK__NOINLINE hk_result guard_free(hk_guard *g, void *p, void *const *frames, int n) {
    if (guard_in_arena(g, p)) return hk__guard_free_guarded(g, p, frames, n);
    return hk__guard_fb_free(g, p, frames, n);
}

HK__NOINLINE hk_result hk_guard_free(hk_guard *g, void *p) {
    if (!g || !p) return HK_OK;
    hk_result r = HK_OK;
    if (!guard_in_arena(g, p) && (g->core.flags & HK_GUARD_PLAIN_UNGUARDED)) {
        g->backing.free(p);
    } else if (guard_in_arena(g, p) && hk__guard_free_quick(g, p)) {
        /* the second run (HK_GUARD_FAST_REUSE): a live block's free keeps no stack */
    } else if (guard_in_arena(g, p) || !hk__guard_fb_free_sound(g, p)) {
        /* a guarded block, or a suspect one: with the stack, for reports */
        void *frames[HK_GUARD_MAX_FRAMES];
        int n = hk__guard_capture(g, frames, 1);
        r = guard_free(g, p, frames, n);
    }
    guard_after(g);
    return r;
}

/* ---- realloc --------------------------------------------------------------------------- */

/* Copies min(old, size) bytes of p into a fresh block (stack frames/n if
 * guarded) and frees p; NULL (p kept) on exhaustion. */
static void *guard_move(hk_guard *g, void *p, size_t old, size_t size, void *const *frames, int n,
                        bool guarded) {
    void *q = guard_alloc_any(g, size, guarded ? guard_size_align(g, size) : g->align, frames, n, guarded);
    if (!q) return NULL;
    memcpy(q, p, old < size ? old : size);
    if (guard_in_arena(g, p))
        (void)hk__guard_free_guarded(g, p, frames, n);
    else
        (void)hk__guard_fb_free(g, p, NULL, 0);
    return q;
}

static HK__NOINLINE void *guard_realloc(hk_guard *g, void *p, size_t size, void **frames) {
    char what[300];
    if (guard_in_arena(g, p)) {
        guard_lock(g);
        uint32_t id = guard_slot_of(g, p);
        guard_blockinfo b = {0, 0, 0, 0, 0, 0};
        if (id && guard_slot_ok(g, &g->slots[id])) guard_blockinfo_from(g, &g->slots[id], &b);
        guard_unlock(g);
        int n = hk__guard_capture(g, frames, 2);
        if (!b.valid || b.user != (uintptr_t)p || b.state != GUARD_STATE_LIVE) {
            if (b.valid && b.user == (uintptr_t)p)
                hk__guard_misuse(
                    g, HK_ERR_STALE, HK_EK_USE_AFTER_FREE, p, b.requested, &b, frames, n,
                    hk__guard_fmt_what(what, sizeof what, "realloc of freed block", p, &b, NULL));
            else
                hk__guard_misuse(g, HK_ERR_FOREIGN, b.valid ? HK_EK_INTERIOR_PTR : HK_EK_FOREIGN_PTR, p, 0,
                                 b.valid ? &b : NULL, frames, n,
                                 hk__guard_fmt_what(what, sizeof what, "realloc of", p, b.valid ? &b : NULL,
                                                    ", which is not the start of a live block"));
            return NULL;
        }
        bool guarded = guard_sample(g);
        return guard_move(g, p, b.requested, size, frames, n, guarded);
    }
    if (g->core.flags & HK_GUARD_PLAIN_UNGUARDED) {
        if (!guard_sample(g)) {
            void *q = g->backing.realloc(p, size);
            if (!q && size) __atomic_add_fetch(&g->fail_count, 1, __ATOMIC_RELAXED);
            return q;
        }
        int n = hk__guard_capture(g, frames, 2);
        return guard_move(g, p, g->backing.usable_size(p), size, frames, n, true);
    }
    guard_fb_hdr h;
    int st = hk__guard_fb_read(g, p, &h);
    if (st != 1) {
        int n = hk__guard_capture(g, frames, 2);
        if (st == 2)
            hk__guard_misuse(
                g, HK_ERR_STALE, HK_EK_USE_AFTER_FREE, p, 0, NULL, frames, n,
                hk__guard_fmt_what(what, sizeof what, "realloc of freed (unguarded) block", p, NULL, NULL));
        else
            hk__guard_misuse(g, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, 0, NULL, frames, n,
                             hk__guard_fmt_what(what, sizeof what, "realloc of", p, NULL,
                                                ", which this heap never returned"));
        return NULL;
    }
    bool guarded = guard_sample(g);
    if (!guarded) {
        /* unguarded to unguarded: let the backing allocator grow in place */
        bool done;
        void *q = hk__guard_fb_resize(g, p, &h, size, &done);
        if (done) return q;
    }
    int n = guarded ? hk__guard_capture(g, frames, 2) : 0;
    return guard_move(g, p, (size_t)h.size, size, frames, n, guarded);
}

HK__NOINLINE void *hk_guard_realloc(hk_guard *g, void *p, size_t size) {
    if (!g) return NULL;
    void *frames[HK_GUARD_MAX_FRAMES];
    void *q;
    if (!p) {
        bool guarded = guard_sample(g);
        int n = guarded ? hk__guard_capture(g, frames, 1) : 0;
        q = guard_alloc_any(g, size, guarded ? guard_size_align(g, size) : g->align, frames, n, guarded);
    } else {
        q = guard_realloc(g, p, size, frames);
    }
    guard_after(g);
    return q;
}

/* ---- sizes and ownership -------------------------------------------------------------- */

/* The LIVE slot whose block starts at p (lock held), or NULL. */
static const guard_slot *guard_live_at(const hk_guard *g, const void *p) {
    uint32_t id = guard_slot_of(g, p);
    if (!id) return NULL;
    const guard_slot *s = &g->slots[id];
    return guard_slot_ok(g, s) && s->state == GUARD_STATE_LIVE && guard_user(g, s) == (uintptr_t)p ? s : NULL;
}

size_t hk_guard_usable_size(hk_guard *g, const void *p) {
    if (!g || !p) return 0;
    if (guard_in_arena(g, p)) {
        guard_lock(g);
        const guard_slot *s = guard_live_at(g, p);
        size_t r = s ? s->requested : 0;
        guard_unlock(g);
        if (!s)
            hk__report(&g->core.rep, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, 0, NULL,
                       "usable size of %p, which is not the start of a live block", p);
        return r;
    }
    if (g->core.flags & HK_GUARD_PLAIN_UNGUARDED) return g->backing.usable_size((void *)(uintptr_t)p);
    guard_fb_hdr h;
    if (hk__guard_fb_read(g, p, &h) == 1) return (size_t)h.size;
    hk__report(&g->core.rep, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, 0, NULL,
               "usable size of %p, which this heap never returned", p);
    return 0;
}

bool hk_guard_owns(hk_guard *g, const void *p) {
    if (!g || !p) return false;
    if (guard_in_arena(g, p)) {
        guard_lock(g);
        bool r = guard_live_at(g, p) != NULL;
        guard_unlock(g);
        return r;
    }
    if (g->core.flags & HK_GUARD_PLAIN_UNGUARDED) return true; /* cannot tell */
    return hk__guard_fb_owns(g, p);
}

/* ---- stats and info ---------------------------------------------------------------------- */

hk_result hk_guard_stats(const hk_guard *g, hk_stats *out) {
    if (!g || !out) return HK_ERR_INVALID;
    hk_guard *mg = (hk_guard *)(uintptr_t)g;
    guard_lock(mg);
    memset(out, 0, sizeof *out);
    out->size = (uint32_t)sizeof *out;
    out->version = HK_STATS_VERSION;
    out->allocator = "guard";
    size_t lu, uu;
    uint64_t ua, uf;
    hk__guard_ctr_read(g, &lu, &uu, &ua, &uf);
    out->capacity = g->arena_size;
    out->used = g->used_guarded + uu;
    out->used_blocks_bytes = g->live_guarded * g->page + uu + lu * (GUARD_FB_HDR + GUARD_FB_CANARY);
    out->free = g->arena_size - g->bump;
    out->largest_free = g->arena_size - g->bump > 2 * g->page ? g->arena_size - g->bump - 2 * g->page : 0;
    out->peak_used = g->peak_used;
    out->overhead = g->slot_reg.committed + g->map_reg.committed + g->trace_reg.committed +
                    g->bucket_reg.committed + g->self_size + lu * (GUARD_FB_HDR + GUARD_FB_CANARY);
    out->live_blocks = g->live_guarded + lu;
    out->free_blocks = g->q_blocks;
    out->alloc_count = g->alloc_count + ua;
    out->free_count = g->free_count + uf;
    out->fail_count = __atomic_load_n(&g->fail_count, __ATOMIC_RELAXED);
    out->error_count = g->core.rep.error_count;
    guard_unlock(mg);
    return HK_OK;
}

hk_result hk_guard_get_info(const hk_guard *g, hk_guard_info *out) {
    if (!out) return HK_ERR_INVALID;
    memset(out, 0, sizeof *out);
    if (!g) return HK_ERR_INVALID;
    hk_guard *mg = (hk_guard *)(uintptr_t)g;
    guard_lock(mg);
    out->live_guarded = g->live_guarded;
    hk__guard_ctr_read(g, &out->live_unguarded, NULL, NULL, NULL);
    out->max_guarded = g->max_guarded;
    out->quarantine_blocks = g->q_blocks;
    out->quarantine_bytes = g->q_bytes;
    out->reserve_used = g->bump;
    out->reserve_size = g->arena_size;
    out->traces = g->ntraces;
    out->reports = __atomic_load_n(&g->reports, __ATOMIC_RELAXED);
    out->over_cap = g->over_cap;
    guard_unlock(mg);
    return HK_OK;
}

uint64_t hk_guard_report_count(const hk_guard *g) {
    return g ? __atomic_load_n(&g->reports, __ATOMIC_RELAXED) : 0;
}
