/*
 * src/handles.c - the generational handle table (src/handles.h): storage,
 * allocation and release, retirement, recycling, the misuse verdict and its
 * report, and the check.
 *
 * Invariants (verified by hk__ht_check):
 *  - cap <= room <= ring_mask + 1, cap <= index_mask (the all-ones index is
 *    never a slot).
 *  - words[i] (i < cap) is either live, (gen << index_bits) | i with
 *    1 <= gen <= gmax, or dead, (gen << index_bits) | index_mask, where gen
 *    is the generation of the last occupant ((gbase - 1) for a slot that
 *    never issued one: the word + 1 is then gbase's handle minus the index).
 *  - a dead slot's state is FREE, HELD or RETIRED; the ring (head .. tail)
 *    holds exactly the FREE dead slots, each once, oldest first; nheld and
 *    nretired count the HELD and RETIRED slots. A live slot's state byte is
 *    FREE (the inline paths do not write it) apart from the WRAPPED bit.
 *  - reserved storage (HK__HT_RESERVED): block is a reservation holding
 *    words, ring and state of every slot the index allows at fixed offsets
 *    (ht_res_*); the first room words and state bytes and the first
 *    ring_mask + 1 ring entries are committed, block_size bytes in all.
 *  - chunked storage (wdir, sdir non-NULL): chunk k of both directories is
 *    allocated for every k < ceil(room / HK__HT_CHUNK_SLOTS), none beyond;
 *    room is a multiple of the chunk (or index_mask); the ring is one hook
 *    block of ring_mask + 1 entries; block_size counts all of it.
 *  - a RETIRED slot's word has generation gen_last and no WRAPPED bit; a
 *    FREE slot whose word has generation gen_last either is fresh (never
 *    issued: gbase - 1 == gen_last) or has WRAPPED (under HK__HT_WRAP).
 */
#include "handles.h"

#include <stdio.h>

static uint32_t ht_instances; /* seeds each table's instance tag */

static uint32_t ht_ring_size(uint32_t n) {
    uint32_t r = 1;
    while (r < n) r <<= 1; /* n < 2^30 */
    return r;
}

size_t hk__ht_storage_size(uint32_t cap, int own_words) {
    size_t r = (size_t)ht_ring_size(cap) * sizeof(uint32_t), n = r;
    if (own_words && !hk_size_add(n, (size_t)cap * sizeof(uint32_t), &n)) return 0;
    if (!hk_size_add(n, cap, &n)) return 0;
    return n;
}

static inline uint32_t ht_fresh_word(const hk__htab *t) {
    return ((t->gbase - 1u) << t->index_bits) | t->index_mask;
}

/* Lays the storage out: [words if own][ring][state]. */
static void ht_place(hk__htab *t, unsigned char *mem, uint32_t room) {
    uint32_t rs = ht_ring_size(room);
    if (t->flags & HK__HT_OWN_WORDS) {
        t->words = (uint32_t *)(void *)mem;
        mem += (size_t)room * sizeof(uint32_t);
    }
    t->ring = (uint32_t *)(void *)mem;
    mem += (size_t)rs * sizeof(uint32_t);
    t->state = mem;
    t->ring_mask = rs - 1u;
    t->room = room;
}

/* ---- reserved storage ------------------------------------------------------------ */

static size_t ht_pages(size_t n) {
    size_t pg = hk_os_page_size();
    return (n + pg - 1) / pg * pg;
}
/* Offsets in the reservation: [words][ring][state], each page-aligned. */
static size_t ht_res_ring_off(const hk__htab *t) {
    return ht_pages((size_t)t->index_mask * sizeof(uint32_t));
}
static size_t ht_res_state_off(const hk__htab *t) {
    return ht_res_ring_off(t) + ht_pages((size_t)ht_ring_size(t->index_mask) * sizeof(uint32_t));
}
static size_t ht_res_size(const hk__htab *t) { return ht_res_state_off(t) + ht_pages(t->index_mask); }
/* Bytes committed for `room` slots, per array. */
static size_t ht_res_words(uint32_t room) { return room ? ht_pages((size_t)room * sizeof(uint32_t)) : 0; }
static size_t ht_res_ring(uint32_t room) {
    return room ? ht_pages((size_t)ht_ring_size(room) * sizeof(uint32_t)) : 0;
}
static size_t ht_res_state(uint32_t room) { return room ? ht_pages(room) : 0; }

static int ht_res_commit(unsigned char *base, size_t from, size_t to) {
    return to <= from || hk_os_commit(base + from, to - from) == HK_OK;
}

/* Commits storage for `want` slots (rounded up to HK__HT_COMMIT_SLOTS) and
 * moves the free ring's entries to their places under the new ring mask
 * (O(free slots)): entries only move to ring positions past the old ring,
 * so none is overwritten before it is read. */
static hk_result ht_res_room(hk__htab *t, uint32_t want) {
    if (want <= t->room) return HK_OK;
    uint64_t up = ((uint64_t)want + HK__HT_COMMIT_SLOTS - 1u) / HK__HT_COMMIT_SLOTS * HK__HT_COMMIT_SLOTS;
    uint32_t room = up > t->index_mask ? t->index_mask : (uint32_t)up;
    unsigned char *b = (unsigned char *)t->block;
    size_t ro = ht_res_ring_off(t), so = ht_res_state_off(t);
    if (!ht_res_commit(b, ht_res_words(t->room), ht_res_words(room)) ||
        !ht_res_commit(b + ro, ht_res_ring(t->room), ht_res_ring(room)) ||
        !ht_res_commit(b + so, ht_res_state(t->room), ht_res_state(room)))
        return HK_ERR_NOMEM; /* committed pages stay committed: harmless, reused next time */
    uint32_t omask = t->ring_mask, nmask = ht_ring_size(room) - 1u;
    if (nmask != omask)
        for (uint64_t q = t->head; q != t->tail; q++)
            t->ring[(uint32_t)q & nmask] = t->ring[(uint32_t)q & omask];
    t->ring_mask = nmask;
    t->room = room;
    t->block_size = ht_res_words(room) + ht_res_ring(room) + ht_res_state(room);
    return HK_OK;
}

/* Reserves the address space; 0 when the host cannot (the caller falls
 * back to hook storage). */
static int ht_res_init(hk__htab *t) {
    if (sizeof(void *) < 8) return 0; /* the reservation would take too much of a 32-bit space */
    void *b = hk_os_reserve(ht_res_size(t));
    if (!b) return 0;
    t->flags |= HK__HT_RESERVED;
    t->block = b;
    t->block_size = 0;
    t->words = (uint32_t *)b;
    t->ring = (uint32_t *)(void *)((unsigned char *)b + ht_res_ring_off(t));
    t->state = (unsigned char *)b + ht_res_state_off(t);
    t->ring_mask = 0;
    t->room = 0;
    return 1;
}

/* ---- chunked storage ------------------------------------------------------------ */

static uint32_t ht_chunks_for(uint32_t room) { return (room + HK__HT_CHUNK_SLOTS - 1u) >> HK__HT_CHUNK_BITS; }
static size_t ht_dir_bytes(const hk__htab *t, size_t elem) {
    return ((size_t)(t->index_mask >> HK__HT_CHUNK_BITS) + 1u) * elem;
}

/* Makes the two directories (every chunk the index bits allow, none
 * allocated yet). */
static hk_result ht_chunk_init(hk__htab *t) {
    size_t wb = ht_dir_bytes(t, sizeof(uint32_t *)), sb = ht_dir_bytes(t, sizeof(unsigned char *));
    t->wdir = (uint32_t **)t->hooks.alloc(wb, t->hooks.user);
    t->sdir = (unsigned char **)t->hooks.alloc(sb, t->hooks.user);
    if (!t->wdir || !t->sdir) return HK_ERR_NOMEM; /* hk__ht_fini frees what was made */
    memset(t->wdir, 0, wb);
    memset(t->sdir, 0, sb);
    t->words = NULL;
    t->state = NULL;
    t->block_size = wb + sb;
    return HK_OK;
}

/* Room for `want` slots: the missing chunks (one per grow of at most a
 * chunk), and a ring of the next power of two into which the free slots
 * move (the old ring is freed: only its free entries were ever needed). */
static hk_result ht_chunk_room(hk__htab *t, uint32_t want) {
    const size_t wcb = (size_t)HK__HT_CHUNK_SLOTS * sizeof(uint32_t), scb = HK__HT_CHUNK_SLOTS;
    for (uint32_t k = ht_chunks_for(t->room); k < ht_chunks_for(want); k++) {
        uint32_t *w = (uint32_t *)t->hooks.alloc(wcb, t->hooks.user);
        unsigned char *st = w ? (unsigned char *)t->hooks.alloc(scb, t->hooks.user) : NULL;
        if (!st) {
            if (w) t->hooks.free(w, wcb, t->hooks.user);
            return HK_ERR_NOMEM; /* the chunks made so far stay: room counts them */
        }
        t->wdir[k] = w;
        t->sdir[k] = st;
        t->block_size += wcb + scb;
        uint64_t r = (uint64_t)(k + 1u) << HK__HT_CHUNK_BITS;
        t->room = r > t->index_mask ? t->index_mask : (uint32_t)r;
    }
    uint32_t rs = ht_ring_size(t->room);
    if (rs > t->ring_mask + 1u || !t->ring) {
        uint32_t *ring = (uint32_t *)t->hooks.alloc((size_t)rs * sizeof(uint32_t), t->hooks.user);
        if (!ring) return HK_ERR_NOMEM;
        for (uint64_t q = t->head; q != t->tail; q++)
            ring[(uint32_t)q & (rs - 1u)] = t->ring[(uint32_t)q & t->ring_mask];
        if (t->ring) {
            t->hooks.free(t->ring, ((size_t)t->ring_mask + 1u) * sizeof(uint32_t), t->hooks.user);
            t->block_size -= ((size_t)t->ring_mask + 1u) * sizeof(uint32_t);
        }
        t->ring = ring;
        t->ring_mask = rs - 1u;
        t->block_size += (size_t)rs * sizeof(uint32_t);
    }
    return HK_OK;
}

static void ht_chunk_fini(hk__htab *t) {
    const size_t wcb = (size_t)HK__HT_CHUNK_SLOTS * sizeof(uint32_t), scb = HK__HT_CHUNK_SLOTS;
    uint32_t n = (t->index_mask >> HK__HT_CHUNK_BITS) + 1u;
    for (uint32_t k = 0; k < n; k++) {
        if (t->wdir && t->wdir[k]) t->hooks.free(t->wdir[k], wcb, t->hooks.user);
        if (t->sdir && t->sdir[k]) t->hooks.free(t->sdir[k], scb, t->hooks.user);
    }
    if (t->wdir) t->hooks.free(t->wdir, ht_dir_bytes(t, sizeof(uint32_t *)), t->hooks.user);
    if (t->sdir) t->hooks.free(t->sdir, ht_dir_bytes(t, sizeof(unsigned char *)), t->hooks.user);
    if (t->ring) t->hooks.free(t->ring, ((size_t)t->ring_mask + 1u) * sizeof(uint32_t), t->hooks.user);
    t->wdir = NULL;
    t->sdir = NULL;
    t->ring = NULL;
}

hk_result hk__ht_init(hk__htab *t, const hk__ht_config *cfg) {
    memset(t, 0, sizeof *t);
    if (!cfg || cfg->index_bits < HK__HT_MIN_INDEX_BITS || cfg->index_bits > HK__HT_MAX_INDEX_BITS)
        return HK_ERR_INVALID;
    uint32_t imask = (1u << cfg->index_bits) - 1u;
    if (cfg->cap > imask) return HK_ERR_INVALID;
    int hooks = cfg->hooks && cfg->hooks->alloc && cfg->hooks->free;
    if (!cfg->memory && !hooks) return HK_ERR_INVALID;
    t->index_bits = cfg->index_bits;
    t->index_mask = imask;
    t->gmax = (uint32_t)((1ull << (32u - cfg->index_bits)) - 1u);
    uint32_t k = cfg->tag ? cfg->tag - 1u : __atomic_fetch_add(&ht_instances, 1u, __ATOMIC_RELAXED);
    uint64_t spread = cfg->tag ? (uint64_t)k : (uint64_t)k * 0x9E3779B1u;
    t->gbase = (uint32_t)(spread % t->gmax) + 1u;
    t->gen_last = t->gbase == 1u ? t->gmax : t->gbase - 1u;
    t->last_dead = (t->gen_last << t->index_bits) | imask;
    t->flags = cfg->flags & HK__HT_WRAP;
    t->step = 1;
    if (cfg->words) {
        t->words = cfg->words;
        t->step = cfg->step ? cfg->step : 1u;
    } else {
        t->flags |= HK__HT_OWN_WORDS;
    }
    size_t need = hk__ht_storage_size(cfg->cap, !cfg->words);
    int reserve = cfg->reserve && !cfg->words && !cfg->memory;
    if (reserve && ht_res_init(t)) {
        if (ht_res_room(t, cfg->cap) != HK_OK) {
            hk__ht_fini(t);
            return HK_ERR_NOMEM;
        }
        t->hooks = *cfg->hooks;    /* checked above */
    } else if (reserve && hooks) { /* the host cannot reserve: chunked storage */
        t->hooks = *cfg->hooks;
        if (ht_chunk_init(t) != HK_OK || ht_chunk_room(t, cfg->cap) != HK_OK) {
            hk__ht_fini(t);
            return HK_ERR_NOMEM;
        }
    } else if (cfg->memory) {
        if (need == 0 || cfg->size < need || ((uintptr_t)cfg->memory & 3u)) return HK_ERR_INVALID;
        ht_place(t, (unsigned char *)cfg->memory, cfg->cap);
    } else {
        t->hooks = *cfg->hooks;
        if (cfg->cap) {
            if (need == 0) return HK_ERR_NOMEM;
            t->block = t->hooks.alloc(need, t->hooks.user);
            if (!t->block) return HK_ERR_NOMEM;
            t->block_size = need;
            ht_place(t, (unsigned char *)t->block, cfg->cap);
        }
    }
    uint32_t fresh = ht_fresh_word(t);
    for (uint32_t i = 0; i < cfg->cap; i++) {
        *hk__ht_w(t, i) = fresh;
        *hk__ht_st(t, i) = HK__HT_S_FREE;
        t->ring[i] = i;
    }
    t->cap = cfg->cap;
    t->head = 0;
    t->tail = cfg->cap;
    return HK_OK;
}

void hk__ht_fini(hk__htab *t) {
    if (t->wdir || t->sdir)
        ht_chunk_fini(t);
    else if (t->flags & HK__HT_RESERVED)
        hk_os_release(t->block, ht_res_size(t));
    else if (t->block)
        t->hooks.free(t->block, t->block_size, t->hooks.user);
    t->flags &= ~(uint32_t)HK__HT_RESERVED;
    t->block = NULL;
    t->block_size = 0;
    t->cap = 0;
    t->room = 0;
    t->head = t->tail = 0;
}

hk_result hk__ht_room(hk__htab *t, uint32_t want) {
    int reserved = (t->flags & HK__HT_RESERVED) != 0;
    if ((!reserved && !t->hooks.alloc) || !(t->flags & HK__HT_OWN_WORDS)) return HK_ERR_UNSUPPORTED;
    if (want > t->index_mask) return HK_ERR_OVERFLOW;
    if (want <= t->room) return HK_OK;
    if (reserved) return ht_res_room(t, want);
    if (t->wdir) return ht_chunk_room(t, want);
    uint32_t room = t->room > t->index_mask / 2 ? t->index_mask : t->room * 2;
    if (room < want) room = want;
    size_t need = hk__ht_storage_size(room, 1);
    if (need == 0) return HK_ERR_NOMEM;
    unsigned char *blk = (unsigned char *)t->hooks.alloc(need, t->hooks.user);
    if (!blk) return HK_ERR_NOMEM;
    hk__htab old = *t;
    ht_place(t, blk, room);
    for (uint64_t q = old.head; q != old.tail; q++)
        t->ring[(uint32_t)q & t->ring_mask] = old.ring[(uint32_t)q & old.ring_mask];
    if (old.cap) {
        memcpy(t->words, old.words, (size_t)old.cap * sizeof(uint32_t));
        memcpy(t->state, old.state, old.cap);
    }
    if (old.block) t->hooks.free(old.block, old.block_size, t->hooks.user);
    t->block = blk;
    t->block_size = need;
    return HK_OK;
}

hk_result hk__ht_grow(hk__htab *t, uint32_t add) {
    if ((!(t->flags & HK__HT_RESERVED) && !t->hooks.alloc) || !(t->flags & HK__HT_OWN_WORDS))
        return HK_ERR_UNSUPPORTED;
    if (add > t->index_mask - t->cap) return HK_ERR_OVERFLOW;
    uint32_t want = t->cap + add;
    hk_result r = hk__ht_room(t, want);
    if (r != HK_OK) return r;
    uint32_t fresh = ht_fresh_word(t);
    if (t->wdir) { /* chunked: a chunk at a time */
        for (uint32_t i = t->cap; i < want;) {
            uint32_t k = i >> HK__HT_CHUNK_BITS, m = HK__HT_CHUNK_SLOTS - 1u;
            uint32_t end =
                want - i > HK__HT_CHUNK_SLOTS - (i & m) ? i + (HK__HT_CHUNK_SLOTS - (i & m)) : want;
            uint32_t *w = t->wdir[k];
            unsigned char *st = t->sdir[k];
            for (; i < end; i++) {
                w[i & m] = fresh;
                st[i & m] = HK__HT_S_FREE;
                t->ring[(uint32_t)t->tail & t->ring_mask] = i;
                t->tail++;
            }
        }
    } else {
        for (uint32_t i = t->cap; i < want; i++) {
            t->words[i] = fresh;
            t->state[i] = HK__HT_S_FREE;
            t->ring[(uint32_t)t->tail & t->ring_mask] = i;
            t->tail++;
        }
    }
    t->cap = want;
    return HK_OK;
}

uint32_t hk__ht_recycle(hk__htab *t) {
    uint32_t n = 0, fresh = ht_fresh_word(t);
    for (uint32_t i = 0; i < t->cap && t->nretired; i++) {
        if ((*hk__ht_st(t, i) & HK__HT_S_MASK) != HK__HT_S_RETIRED || hk__ht_word_live(t, *hk__ht_w(t, i)))
            continue;
        *hk__ht_w(t, i) = fresh; /* the sequence restarts */
        *hk__ht_st(t, i) = HK__HT_S_FREE;
        t->ring[(uint32_t)t->tail & t->ring_mask] = i;
        t->tail++;
        t->nretired--;
        n++;
    }
    return n;
}

uint32_t hk__ht_uses(const hk__htab *t, uint32_t i) {
    uint32_t w = *hk__ht_w(t, i), g = w >> t->index_bits;
    if (*hk__ht_st(t, i) & HK__HT_S_WRAPPED) return t->gmax;
    if (!hk__ht_word_live(t, w) && (*hk__ht_st(t, i) & HK__HT_S_MASK) == HK__HT_S_FREE && g == t->gbase - 1u)
        return 0; /* fresh: never issued (see the invariants) */
    return hk__ht_gen_ord(t, g) + 1u;
}

uint32_t hk__ht_last_handle(const hk__htab *t, uint32_t i) {
    if (!hk__ht_uses(t, i)) return 0;
    return (*hk__ht_w(t, i) & ~t->index_mask) | i;
}

hk__ht_verdict hk__ht_judge(const hk__htab *t, uint32_t h, int freeing) {
    hk__ht_verdict v;
    memset(&v, 0, sizeof v);
    v.index = h & t->index_mask;
    v.gen = h >> t->index_bits;
    v.status = -1;
    v.result = HK_ERR_FOREIGN;
    v.kind = HK_EK_FOREIGN_PTR;
    if (h == 0) {
        v.why = HK__HT_WHY_NONE;
        v.result = HK_ERR_INVALID;
        v.kind = HK_EK_INVALID_ARG;
        return v;
    }
    if (v.index >= t->cap) {
        v.why = HK__HT_WHY_RANGE;
        return v;
    }
    uint32_t w = *hk__ht_w(t, v.index), uses = hk__ht_uses(t, v.index);
    v.slot_gen = w >> t->index_bits;
    v.status = hk__ht_status(t, v.index);
    if (w == h) {
        v.why = HK__HT_WHY_OK;
        v.result = HK_OK;
        v.kind = HK_EK_NONE;
    } else if (v.gen == 0 || uses == 0) {
        v.why = HK__HT_WHY_NEVER;
    } else if (v.gen == v.slot_gen) { /* dead, and this handle was its last */
        v.why = freeing ? HK__HT_WHY_DOUBLE_FREE : HK__HT_WHY_FREED;
        v.result = freeing ? HK_ERR_DOUBLE_FREE : HK_ERR_STALE;
        v.kind = freeing ? HK_EK_DOUBLE_FREE : HK_EK_STALE;
    } else if (uses >= t->gmax || hk__ht_gen_ord(t, v.gen) < hk__ht_gen_ord(t, v.slot_gen)) {
        v.why = HK__HT_WHY_STALE;
        v.result = HK_ERR_STALE;
        v.kind = HK_EK_STALE;
    } else {
        v.why = HK__HT_WHY_NEVER;
    }
    return v;
}

static const char *ht_status_name(int st) {
    switch (st) {
    case HK__HT_LIVE: return "live";
    case HK__HT_HELD: return "freed, release pending";
    case HK__HT_RETIRED: return "freed, retired";
    default: return "free";
    }
}

hk_result hk__ht_report(const hk__htab *t, hk__reporter *rep, uint32_t h, int freeing, const char *op,
                        const char *noun, const void *addr, size_t size, const char *block_name) {
    hk__ht_verdict v = hk__ht_judge(t, h, freeing);
    const void *a = addr ? addr : (const void *)(uintptr_t)h;
    switch (v.why) {
    case HK__HT_WHY_OK: return HK_OK;
    case HK__HT_WHY_NONE:
        return hk__report(rep, v.result, v.kind, NULL, 0, NULL, "%s of the none %s (0)", op, noun);
    case HK__HT_WHY_RANGE:
        return hk__report(rep, v.result, v.kind, a, size, block_name,
                          "%s of foreign %s 0x%08x: slot %u is beyond this instance's %u slots (another "
                          "instance's %s, or one never issued)",
                          op, noun, h, v.index, t->cap, noun);
    case HK__HT_WHY_NEVER:
        return hk__report(rep, v.result, v.kind, a, size, block_name,
                          "%s of foreign %s 0x%08x: generation %u was never issued for slot %u (another "
                          "instance's %s, or a damaged one)",
                          op, noun, h, v.gen, v.index, noun);
    case HK__HT_WHY_DOUBLE_FREE:
        return hk__report(rep, v.result, v.kind, a, size, block_name,
                          "%s of %s 0x%08x: it was already freed (slot %u, generation %u, %s)", op, noun, h,
                          v.index, v.gen, ht_status_name(v.status));
    case HK__HT_WHY_FREED:
        return hk__report(rep, v.result, v.kind, a, size, block_name,
                          "%s of stale %s 0x%08x: it was freed (slot %u, generation %u, %s)", op, noun, h,
                          v.index, v.gen, ht_status_name(v.status));
    case HK__HT_WHY_STALE:
    default:
        return hk__report(rep, v.result, v.kind, a, size, block_name,
                          "%s of stale %s 0x%08x: slot %u is at generation %u (%s), the %s has %u", op, noun,
                          h, v.index, v.slot_gen, ht_status_name(v.status), noun, v.gen);
    }
}

#define HT_BAD(...)                                                                                          \
    do {                                                                                                     \
        r = hk__report(rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, NULL, 0, NULL, __VA_ARGS__);            \
        goto out;                                                                                            \
    } while (0)

hk_result hk__ht_check(hk__htab *t, hk__reporter *rep, const char *noun) {
    hk_result r = HK_OK;
    uint32_t nfree = hk__ht_nfree(t), n = 0, held = 0, retired = 0, free_dead = 0;
    uint64_t q = t->head;
    if (t->cap > t->room || t->cap > t->index_mask || (t->room && t->room > t->ring_mask + 1u))
        return hk__report(rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, NULL, 0, NULL,
                          "%s table damaged: %u slots, room %u, ring %u", noun, t->cap, t->room,
                          t->ring_mask + 1u);
    if (nfree > t->cap)
        return hk__report(rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, NULL, 0, NULL,
                          "%s table: the free ring holds %u entries for %u slots (head/tail damaged)", noun,
                          nfree, t->cap);
    for (uint32_t k = 0; t->wdir && k < ht_chunks_for(t->room); k++)
        if (!t->wdir[k] || !t->sdir || !t->sdir[k])
            return hk__report(rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, NULL, 0, NULL,
                              "%s table damaged: chunk %u of %u slots is missing", noun, k, t->room);
    for (; q != t->tail; q++, n++) {
        uint32_t s = t->ring[(uint32_t)q & t->ring_mask];
        if (s >= t->cap) HT_BAD("%s table: free ring entry %u names slot %u, beyond %u", noun, n, s, t->cap);
        if (hk__ht_word_live(t, *hk__ht_w(t, s)) || (*hk__ht_st(t, s) & HK__HT_S_MASK) != HK__HT_S_FREE)
            HT_BAD("%s table: free ring entry %u names slot %u, which is %s", noun, n, s,
                   ht_status_name(hk__ht_status(t, s)));
        if (*hk__ht_st(t, s) & HK__HT_S_SEEN) HT_BAD("%s table: slot %u is on the free ring twice", noun, s);
        *hk__ht_st(t, s) |= HK__HT_S_SEEN;
    }
    for (uint32_t i = 0; i < t->cap; i++) {
        uint32_t w = *hk__ht_w(t, i), g = w >> t->index_bits;
        unsigned char st = *hk__ht_st(t, i);
        if (st & ~(HK__HT_S_MASK | HK__HT_S_WRAPPED | HK__HT_S_SEEN) || (st & HK__HT_S_MASK) == 3)
            HT_BAD("%s table: slot %u has a bad state byte 0x%02x", noun, i, st);
        if (hk__ht_word_live(t, w)) {
            if ((w & t->index_mask) != i || g == 0)
                HT_BAD("%s table: slot %u holds 0x%08x, not a handle of that slot", noun, i, w);
            if (st & (HK__HT_S_MASK | HK__HT_S_SEEN))
                HT_BAD("%s table: live slot %u (0x%08x) is also %s", noun, i, w,
                       (st & HK__HT_S_SEEN) ? "on the free ring" : "marked dead");
            continue;
        }
        switch (st & HK__HT_S_MASK) {
        case HK__HT_S_FREE:
            free_dead++;
            if (!(st & HK__HT_S_SEEN)) HT_BAD("%s table: free slot %u is not on the free ring", noun, i);
            break;
        case HK__HT_S_HELD: held++; break;
        default:
            retired++;
            if (g != t->gen_last || (st & HK__HT_S_WRAPPED))
                HT_BAD("%s table: retired slot %u is at generation %u, not the last one %u", noun, i, g,
                       t->gen_last);
            break;
        }
    }
    if (free_dead != nfree) HT_BAD("%s table: %u free slots, the free ring holds %u", noun, free_dead, nfree);
    if (held != t->nheld) HT_BAD("%s table: %u held slots found, the count says %u", noun, held, t->nheld);
    if (retired != t->nretired)
        HT_BAD("%s table: %u retired slots found, the count says %u", noun, retired, t->nretired);
out:
    for (uint64_t e = t->head; e != q; e++) {
        uint32_t s = t->ring[(uint32_t)e & t->ring_mask];
        if (s < t->cap) *hk__ht_st(t, s) &= (unsigned char)~HK__HT_S_SEEN;
    }
    return r;
}
