/*
 * src/guard_slots.c - guarded blocks: slots carved from the arena, the page
 * map, the FIFO quarantine, free bins, padding, and the mapping budget.
 * (The invariants are listed in guard_internal.h; this file is where they
 * are kept.)
 *
 * A slot's life: carved fresh (or taken from a bin, or split from a larger
 * FREE slot) -> LIVE (data pages read/write; on first use they become a
 * mapping of their own while the budget allows) -> QUAR at free (filled,
 * made inaccessible, appended to the quarantine) -> FREE when it leaves the
 * quarantine (oldest first; its pages kept resident up to
 * GUARD_RESIDENT_POOL bytes, else given back) -> LIVE again on reuse.
 *
 * Invariants kept here: every slot record is resealed after each change;
 * n_own <= own_max and n_own + live_shared <= max_guarded (a LIVE slot
 * that is not its own mapping splits the reservation's mapping in three);
 * resident_free is the data bytes of FREE slots with GUARD_SLOT_RESIDENT;
 * a GUARD_SLOT_PADDED slot's pages are HK_FILL_PAD but for its last block;
 * a GUARD_SLOT_OPEN slot (HK_GUARD_FAST_REUSE only) is FREE, its own
 * mapping, read/write, on a bin, and reused without a protection change;
 * GUARD_SLOT_GI slots are carved a batch at a time (guard_gi_carve_batch),
 * every slot of a batch with its guard page installed before any is used.
 */
#include "guard_internal.h"

int hk__guard_pads_damaged(const hk_guard *g, const guard_slot *s, uintptr_t *first, uintptr_t *last) {
    if (g->core.flags & HK_GUARD_FAST_REUSE) return 0; /* padding is not painted */
    const unsigned char *data = (const unsigned char *)guard_data(g, s);
    const unsigned char *user = data + s->user_off;
    const unsigned char *end = data + guard_data_bytes(g, s);
    const unsigned char *tail = user + s->requested;
    size_t ntail = (size_t)(end - tail);
    size_t off = hk__fill_find(tail, ntail, HK_FILL_PAD);
    if (off != ntail) {
        const unsigned char *q = end;
        while (q > tail + off + 1 && q[-1] == (unsigned char)HK_FILL_PAD) q--;
        *first = (uintptr_t)(tail + off);
        if (last) *last = (uintptr_t)(q - 1);
        return 1;
    }
    off = hk__fill_find(data, s->user_off, HK_FILL_PAD);
    if (off != s->user_off) {
        const unsigned char *q = user;
        while (q > data + off + 1 && q[-1] == (unsigned char)HK_FILL_PAD) q--;
        *first = (uintptr_t)(data + off);
        if (last) *last = (uintptr_t)(q - 1);
        return -1;
    }
    return 0;
}

/* ---- slots ------------------------------------------------------------------------ */

static uint32_t guard_new_id(hk_guard *g) {
    size_t need = (size_t)(g->nslots + 1) * sizeof(guard_slot);
    if (!guard_region_ensure(&g->slot_reg, need, g->page)) return 0;
    return g->nslots++;
}

static void guard_map_range(hk_guard *g, uintptr_t base, uint32_t pages_incl_guard, uint32_t id) {
    size_t first = (size_t)(base - (uintptr_t)g->arena) / g->page;
    for (uint32_t i = 0; i < pages_incl_guard; i++) g->pagemap[first + i] = id;
}

static void guard_push_free(hk_guard *g, uint32_t id) {
    guard_slot *s = &g->slots[id];
    s->state = GUARD_STATE_FREE;
    if (s->pages <= GUARD_BINS) {
        s->next = g->bins[s->pages];
        g->bins[s->pages] = id;
    } else {
        s->next = g->large;
        g->large = id;
    }
    guard_seal(g, s);
}

/* Cuts slot `id` (FREE, off any list) to `pages` data pages; the rest
 * becomes a new FREE slot. */
static void guard_split(hk_guard *g, uint32_t id, uint32_t pages) {
    guard_slot *s = &g->slots[id];
    if (s->pages <= pages + 1) return; /* the rest would have no data page */
    if (s->sflags & GUARD_SLOT_OWN) {
        /* back into the reservation's mapping (pages discarded), so the cut
         * can put a guard page inside the range */
        if (hk_os_discard((void *)guard_data(g, s), guard_data_bytes(g, s)) != HK_OK) return;
        if (s->sflags & GUARD_SLOT_RESIDENT) g->resident_free -= guard_data_bytes(g, s);
        s->sflags = 0;
        g->n_own--;
    }
    if (s->sflags & GUARD_SLOT_GI) { /* the page that becomes the rest's guard */
        void *at = (void *)(guard_data(g, s) + (size_t)pages * g->page);
        if (hk_os_guard_install(at, g->page) != HK_OK && hk_os_protect(at, g->page, HK_PROT_NONE) != HK_OK)
            return;
    }
    uint32_t rid = guard_new_id(g);
    if (!rid) return;
    s = &g->slots[id];
    guard_slot *r = &g->slots[rid];
    memset(r, 0, sizeof *r);
    r->base_page = s->base_page + pages + 1;
    r->pages = s->pages - pages - 1;
    s->sflags &= (uint16_t)~GUARD_SLOT_PADDED; /* the old block may lie past the new end */
    r->sflags = s->sflags;
    if (s->sflags & GUARD_SLOT_RESIDENT) g->resident_free -= g->page; /* that page becomes r's guard */
    guard_map_range(g, guard_base(g, r), r->pages + 1, rid);
    s->pages = pages;
    guard_seal(g, s);
    guard_push_free(g, rid);
}

/* Gives a non-LIVE slot's data pages back to the OS; they stay inaccessible
 * and keep their own mapping if they had one. */
static hk_result guard_discard(hk_guard *g, guard_slot *s) {
    hk_result r = (s->sflags & GUARD_SLOT_OWN)
                      ? hk_os_map_own((void *)guard_data(g, s), guard_data_bytes(g, s), 0)
                      : hk_os_discard((void *)guard_data(g, s), guard_data_bytes(g, s));
    if (r == HK_OK) s->sflags &= (uint16_t) ~(GUARD_SLOT_RESIDENT | GUARD_SLOT_PADDED);
    return r;
}

static void guard_evict_one(hk_guard *g) {
    uint32_t id = g->q_head;
    if (!id) return;
    guard_slot *s = &g->slots[id];
    g->q_head = s->next;
    if (!g->q_head) g->q_tail = 0;
    g->q_blocks--;
    g->q_bytes -= guard_data_bytes(g, s);
    if (s->sflags & GUARD_SLOT_RESIDENT) {
        /* keep a bounded pool of evicted pages resident: reusing them costs
         * one mprotect and no page fault */
        if (g->resident_free + guard_data_bytes(g, s) <= GUARD_RESIDENT_POOL) {
            g->resident_free += guard_data_bytes(g, s);
        } else {
            guard_discard(g, s);
        }
    }
    guard_push_free(g, id);
}

/* GUARD_SLOT_GI carving: the `need` bytes at bump (a guard page, then data
 * pages) read/write, the guard page installed. false (nothing carved) when
 * the open chunk cannot grow or no guard can be put there. */
static bool guard_open_carve(hk_guard *g, size_t need) {
    unsigned char *base = g->arena + g->bump;
    if (g->bump + need > g->open_end) {
        size_t to = g->bump + need + GUARD_OPEN_CHUNK;
        to -= to % GUARD_OPEN_CHUNK;
        if (to > g->arena_size - g->page) to = g->arena_size - g->page;
        if (to < g->bump + need || hk_os_map_own(g->arena + g->open_end, to - g->open_end, 1) != HK_OK)
            return false;
        g->open_end = to;
    }
    return hk_os_guard_install(base, g->page) == HK_OK || hk_os_protect(base, g->page, HK_PROT_NONE) == HK_OK;
}

/* GUARD_SLOT_GI carving of a batch: up to GUARD_GI_BATCH_PAGES pages of
 * fresh slots of `pages` data pages each (at least one, at most
 * GUARD_GI_BATCH slots), their guard pages installed with one call
 * (hk_os_guard_install_many) instead of one madvise a slot. The first slot
 * is returned (off any list); the others go FREE onto bins[pages], the
 * lowest address on top. Their data pages are not touched: they cost
 * address space, not memory, until used. 0 when nothing could be carved. */
static uint32_t guard_gi_carve_batch(hk_guard *g, uint32_t pages) {
    size_t need = ((size_t)pages + 1) * g->page;
    uint32_t want = GUARD_GI_BATCH_PAGES / (pages + 1);
    if (want < 1) want = 1;
    if (want > GUARD_GI_BATCH) want = GUARD_GI_BATCH;
    /* keep the last page of the arena as a guard */
    size_t room = g->bump + g->page <= g->arena_size ? (g->arena_size - g->bump - g->page) / need : 0;
    if (want > room) want = (uint32_t)room;
    if (!want ||
        !guard_region_ensure(&g->map_reg, (g->bump + want * need) / g->page * sizeof(uint32_t), g->page))
        return 0;
    /* the open chunk, read/write, grown to hold the whole batch */
    if (g->bump + want * need > g->open_end) {
        size_t to = g->bump + want * need + GUARD_OPEN_CHUNK;
        to -= to % GUARD_OPEN_CHUNK;
        if (to > g->arena_size - g->page) to = g->arena_size - g->page;
        if (to < g->bump + need || hk_os_map_own(g->arena + g->open_end, to - g->open_end, 1) != HK_OK)
            return 0;
        g->open_end = to;
        if (g->bump + want * need > g->open_end) want = (uint32_t)((g->open_end - g->bump) / need);
    }
    void *at[GUARD_GI_BATCH] = {0};
    for (uint32_t k = 0; k < want; k++) at[k] = g->arena + g->bump + k * need;
    if (hk_os_guard_install_many(at, want, g->page) != HK_OK) {
        /* no guard install here after all: protect the guard pages */
        for (uint32_t k = 0; k < want; k++)
            if (hk_os_guard_install(at[k], g->page) != HK_OK &&
                hk_os_protect(at[k], g->page, HK_PROT_NONE) != HK_OK)
                return 0;
    }
    uint32_t first = 0;
    for (uint32_t k = 0; k < want; k++) {
        uint32_t id = guard_new_id(g);
        if (!id) break; /* the guard pages past here stay installed in uncarved space: inaccessible anyway */
        guard_slot *s = &g->slots[id];
        memset(s, 0, sizeof *s);
        s->base_page = (uint32_t)(g->bump / g->page);
        s->pages = pages;
        s->sflags = GUARD_SLOT_GI;
        g->bump += need;
        guard_map_range(g, guard_base(g, s), pages + 1, id);
        guard_seal(g, s);
        if (!first) first = id;
    }
    /* onto the bin highest address first, so the next carved is popped next */
    for (uint32_t id = g->nslots - 1; first && id > first; id--) guard_push_free(g, id);
    return first;
}

/* Unlinks and returns a FREE slot with at least `pages` data pages, 0 if none. */
static uint32_t guard_pop_fit(hk_guard *g, uint32_t pages) {
    if (pages <= GUARD_BINS && g->bins[pages]) {
        uint32_t id = g->bins[pages];
        g->bins[pages] = g->slots[id].next;
        return id;
    }
    /* carve fresh address space; keep the last page of the arena as a guard */
    size_t need = ((size_t)pages + 1) * g->page;
    if (g->gi && pages <= GUARD_BINS) {
        uint32_t id = guard_gi_carve_batch(g, pages);
        if (id) return id;
    } else if (g->bump + need + g->page <= g->arena_size) {
        size_t map_need = (g->bump + need) / g->page * sizeof(uint32_t);
        uint32_t id = 0;
        if (guard_region_ensure(&g->map_reg, map_need, g->page)) id = guard_new_id(g);
        if (id && g->gi && !guard_open_carve(g, need)) id = 0;
        if (id) {
            guard_slot *s = &g->slots[id];
            memset(s, 0, sizeof *s);
            s->base_page = (uint32_t)(g->bump / g->page);
            s->pages = pages;
            if (g->gi) s->sflags = GUARD_SLOT_GI;
            g->bump += need;
            guard_map_range(g, guard_base(g, s), pages + 1, id);
            return id;
        }
    }
    /* large list, first fit */
    for (uint32_t *link = &g->large; *link; link = &g->slots[*link].next) {
        uint32_t id = *link;
        if (g->slots[id].pages >= pages) {
            *link = g->slots[id].next;
            guard_split(g, id, pages);
            return id;
        }
    }
    /* a bigger bin, split */
    for (uint32_t k = pages + 2; k <= GUARD_BINS; k++) {
        if (g->bins[k]) {
            uint32_t id = g->bins[k];
            g->bins[k] = g->slots[id].next;
            guard_split(g, id, pages);
            return id;
        }
    }
    return 0;
}

static uint32_t guard_take_slot(hk_guard *g, uint32_t pages) {
    uint32_t id = guard_pop_fit(g, pages);
    while (!id && g->q_head) { /* out of address space: shorten the quarantine */
        guard_evict_one(g);
        id = guard_pop_fit(g, pages);
    }
    return id;
}

/* ---- allocation -------------------------------------------------------------------- */

/* Makes a taken slot's data pages accessible, within the mapping budget. */
static hk_result guard_open_pages(hk_guard *g, guard_slot *s, size_t bytes, bool *was_resident,
                                  bool *padded) {
    unsigned char *data = (unsigned char *)guard_data(g, s);
    if (!(s->sflags & GUARD_SLOT_OWN) && g->n_own < g->own_max && hk_os_map_own(data, bytes, 1) == HK_OK) {
        /* first use of these pages as a mapping of their own: from now on
         * each alloc/free is one mprotect of a whole mapping */
        g->n_own++;
        if (*was_resident) g->resident_free -= bytes;
        *was_resident = *padded = false; /* fresh zero pages */
        s->sflags = GUARD_SLOT_OWN;
        return HK_OK;
    }
    if (!(s->sflags & GUARD_SLOT_OWN) && g->n_own + g->live_shared >= g->max_guarded)
        return HK_ERR_NOMEM; /* one more split mapping would pass the budget */
    return hk_os_protect(data, bytes, HK_PROT_READ_WRITE);
}

void *hk__guard_alloc_guarded(hk_guard *g, size_t size, size_t align, void *const *frames, int nframes) {
    size_t span, bytes;
    if (size == 0)
        span = align;
    else if (!hk_size_align(size, align, &span))
        span = SIZE_MAX;
    if (span == SIZE_MAX || !hk_size_align(span, g->page, &bytes) || bytes / g->page > UINT32_MAX - 2 ||
        bytes >= g->arena_size / 2) {
        if (span == SIZE_MAX || size > SIZE_MAX / 2) {
            __atomic_add_fetch(&g->fail_count, 1, __ATOMIC_RELAXED);
            hk__report(&g->core.rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, size, NULL,
                       "asked %zu bytes, which overflows with guard pages and alignment", size);
            return NULL;
        }
        return hk__guard_fb_alloc(g, size, align); /* too big for the reservation: unguarded */
    }
    uint32_t pages = (uint32_t)(bytes / g->page);
    guard_lock(g);
    if (g->live_guarded >= g->max_guarded && !g->gi) { /* GI slots cost no mapping */
        g->over_cap++;
        guard_unlock(g);
        return hk__guard_fb_alloc(g, size, align);
    }
    uint32_t id = guard_take_slot(g, pages);
    if (!id) {
        guard_unlock(g);
        return hk__guard_fb_alloc(g, size, align);
    }
    guard_slot *s = &g->slots[id];
    unsigned char *data = (unsigned char *)guard_data(g, s);
    bytes = guard_data_bytes(g, s); /* a reused slot may hold one page more than asked */
    bool was_resident = (s->sflags & GUARD_SLOT_RESIDENT) != 0;
    bool padded =
        was_resident && (s->sflags & GUARD_SLOT_PADDED) && (size_t)s->user_off + s->requested <= bytes;
    size_t old_off = s->user_off, old_req = s->requested;
    bool reopened = (s->sflags & GUARD_SLOT_OPEN) != 0; /* its last block's bytes are still there */
    if (s->sflags & (GUARD_SLOT_OPEN | GUARD_SLOT_GI)) {
        s->sflags &= (uint16_t)~GUARD_SLOT_OPEN; /* freed with HK_GUARD_FAST_REUSE, or GI: read/write */
    } else if (guard_open_pages(g, s, bytes, &was_resident, &padded) != HK_OK) {
        /* over the mapping budget, or the kernel refused: serve it unguarded */
        guard_push_free(g, id);
        g->over_cap++;
        guard_unlock(g);
        return hk__guard_fb_alloc(g, size, align);
    }
    if (was_resident) {
        g->resident_free -= bytes;
        s->sflags &= (uint16_t) ~(GUARD_SLOT_RESIDENT | GUARD_SLOT_PADDED);
    }
    if (!(s->sflags & (GUARD_SLOT_OWN | GUARD_SLOT_GI))) g->live_shared++;
    int at_start =
        g->side == HK_GUARD_SIDE_START || (g->side == HK_GUARD_SIDE_RANDOM && (guard_rand(&g->rng) & 1u));
    s->user_off = (uint32_t)(at_start ? 0 : bytes - span);
    s->requested = size;
    s->state = GUARD_STATE_LIVE;
    s->next = 0;
    s->alloc_trace = hk__guard_trace_put(g, frames, nframes);
    s->free_trace = 0;
    guard_seal(g, s);
    unsigned char *user = data + s->user_off;
    hk__san_access(data, bytes); /* a reused range may still be poisoned from its last free */
    /* fill: padding everywhere but the block; the block HK_FILL_ALLOC
     * (fresh pages read as zero, so HK_FLAG_ZERO costs nothing; with
     * HK_GUARD_FAST_REUSE they are left zero, untouched: the page faults
     * of bytes the program never writes are saved) */
    bool zero_pages = !was_resident && !reopened;
    if (g->core.flags & HK_GUARD_FAST_REUSE) {
        /* no padding: nothing checks it */
    } else if (padded) {
        /* the pages are padding but for the last block (checked at its
         * free): repaint only that; the new block is painted below */
        hk_fill(data + old_off, old_req, HK_FILL_PAD);
    } else {
        hk_fill(data, s->user_off, HK_FILL_PAD);
        hk_fill(user + size, bytes - s->user_off - size, HK_FILL_PAD);
    }
    if (g->core.flags & HK_FLAG_ZERO) {
        if (!zero_pages) memset(user, 0, size);
    } else if (!(g->core.flags & HK_GUARD_NO_FILL) &&
               !(zero_pages && (g->core.flags & HK_GUARD_FAST_REUSE))) {
        hk_fill(user, size, HK_FILL_ALLOC);
    }
    g->live_guarded++;
    g->used_guarded += size;
    if (g->used_guarded > g->peak_used) g->peak_used = g->used_guarded;
    g->alloc_count++;
    guard_unlock(g);
    hk__san_alloc(user, size, (g->core.flags & HK_FLAG_ZERO) != 0);
    if (HK__TRACKED(&g->core)) hk__track_alloc(&g->core, user, size, (g->core.flags & HK_FLAG_ZERO) != 0);
    return user;
}

/* ---- free ------------------------------------------------------------------------------ */

/* Quarantines the LIVE slot id (lock held): fill, protect, append. Returns
 * the padding damage found (hk__guard_pads_damaged), *at and *last. */
static int guard_quarantine(hk_guard *g, uint32_t id, void *const *cur, int ncur, uintptr_t *at,
                            uintptr_t *last) {
    guard_slot *s = &g->slots[id];
    void *p = (void *)guard_user(g, s);
    if ((g->core.flags & HK_GUARD_FAST_REUSE) && (s->sflags & (GUARD_SLOT_OWN | GUARD_SLOT_GI))) {
        /* no quarantine, no protection change: the slot goes back to its
         * bin read/write and is the next of its size handed out */
        hk__san_free(p, s->requested);
        if (HK__TRACKED(&g->core)) hk__track_free(&g->core, p);
        s->sflags = (uint16_t)((s->sflags & (GUARD_SLOT_OWN | GUARD_SLOT_GI)) | GUARD_SLOT_OPEN);
        s->free_trace = hk__guard_trace_put(g, cur, ncur);
        g->live_guarded--;
        g->used_guarded -= s->requested;
        g->free_count++;
        guard_push_free(g, id);
        return 0;
    }
    int dmg = hk__guard_pads_damaged(g, s, at, last);
    size_t dbytes = guard_data_bytes(g, s);
    if (!(g->core.flags & (HK_GUARD_DISCARD_FREED | HK_GUARD_NO_FILL)))
        hk_fill(p, s->requested, HK_FILL_FREE);
    hk__san_free(p, s->requested);
    if (HK__TRACKED(&g->core)) hk__track_free(&g->core, p);
    if (!(s->sflags & GUARD_SLOT_OWN)) g->live_shared--;
    if (!(g->core.flags & HK_GUARD_DISCARD_FREED)) {
        if (hk_os_protect((void *)guard_data(g, s), dbytes, HK_PROT_NONE) == HK_OK)
            s->sflags |= (uint16_t)(GUARD_SLOT_RESIDENT | (dmg == 0 ? GUARD_SLOT_PADDED : 0));
        else
            (void)guard_discard(g, s);
    } else if (guard_discard(g, s) != HK_OK) {
        (void)hk_os_protect((void *)guard_data(g, s), dbytes, HK_PROT_NONE);
    }
    s->state = GUARD_STATE_QUAR;
    s->free_trace = hk__guard_trace_put(g, cur, ncur);
    s->next = 0;
    guard_seal(g, s);
    if (g->q_tail) {
        guard_slot *t = &g->slots[g->q_tail];
        t->next = id;
        guard_seal(g, t);
    } else {
        g->q_head = id;
    }
    g->q_tail = id;
    g->q_blocks++;
    g->q_bytes += dbytes;
    g->live_guarded--;
    g->used_guarded -= s->requested;
    g->free_count++;
    while (g->q_head && (g->q_bytes > g->q_max_bytes || g->q_blocks > g->q_max_blocks)) guard_evict_one(g);
    return dmg;
}

bool hk__guard_free_quick(hk_guard *g, void *p) {
    if (!(g->core.flags & HK_GUARD_FAST_REUSE)) return false;
    guard_lock(g);
    uint32_t id = guard_slot_of(g, p);
    const guard_slot *s = id ? &g->slots[id] : NULL;
    if (!s || !guard_slot_ok(g, s) || s->state != GUARD_STATE_LIVE || guard_user(g, s) != (uintptr_t)p ||
        !(s->sflags & (GUARD_SLOT_OWN | GUARD_SLOT_GI))) {
        guard_unlock(g);
        return false;
    }
    uintptr_t at = 0, last = 0;
    (void)guard_quarantine(g, id, NULL, 0, &at, &last); /* the fast-reuse branch: no padding, no damage */
    guard_unlock(g);
    return true;
}

hk_result hk__guard_free_guarded(hk_guard *g, void *p, void *const *cur, int ncur) {
    char what[300];
    guard_lock(g);
    uint32_t id = guard_slot_of(g, p);
    if (!id) {
        guard_unlock(g);
        return hk__guard_misuse(
            g, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, 0, NULL, cur, ncur,
            hk__guard_fmt_what(what, sizeof what, "free of", p, NULL,
                               ", an address in the guard heap's reservation that was never allocated"));
    }
    guard_slot *s = &g->slots[id];
    if (!guard_slot_ok(g, s)) {
        guard_unlock(g);
        return hk__guard_misuse(
            g, HK_ERR_CORRUPT, HK_EK_CORRUPT_HEADER, p, 0, NULL, cur, ncur,
            hk__guard_fmt_what(what, sizeof what, "free of", p, NULL,
                               ": the slot record is damaged (stray write into the heap's metadata)"));
    }
    guard_blockinfo b;
    guard_blockinfo_from(g, s, &b);
    if (s->state == GUARD_STATE_LIVE && (uintptr_t)p == b.user) {
        uintptr_t at = 0, last = 0;
        int dmg = guard_quarantine(g, id, cur, ncur, &at, &last);
        guard_blockinfo_from(g, s, &b);
        b.state = GUARD_STATE_LIVE; /* report damage with the allocation stack only */
        guard_unlock(g);
        if (dmg) return hk__guard_pad_report(g, &b, dmg, at, last, "at free", cur, ncur);
        return HK_OK;
    }
    uintptr_t data = guard_data(g, s), end = data + guard_data_bytes(g, s);
    guard_unlock(g);
    if ((uintptr_t)p == b.user && (b.state == GUARD_STATE_QUAR || b.state == GUARD_STATE_FREE))
        return hk__guard_misuse(g, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, p, b.requested, &b, cur, ncur,
                                hk__guard_fmt_what(what, sizeof what, "free of", p, &b,
                                                   b.state == GUARD_STATE_QUAR
                                                       ? ", which was already freed"
                                                       : ", which was already freed (and has left "
                                                         "the quarantine)"));
    if (b.state == GUARD_STATE_LIVE && (uintptr_t)p >= data && (uintptr_t)p < end)
        return hk__guard_misuse(
            g, HK_ERR_FOREIGN, HK_EK_INTERIOR_PTR, p, b.requested, &b, cur, ncur,
            hk__guard_fmt_what(what, sizeof what, "free of interior pointer", p, &b, NULL));
    return hk__guard_misuse(
        g, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, b.requested, &b, cur, ncur,
        hk__guard_fmt_what(what, sizeof what, "free of", p, &b,
                           " (not the start of a live block: guard page, padding or freed block)"));
}
