/*
 * src/handles.h - the generational handle table shared by the pool (object
 * IDs), the cache (block handles) and the gc (object references).
 *
 * A handle is a uint32_t: (generation << index_bits) | index.
 *   - index_bits is the table's choice, 1..30 (the pool lets users pick
 *     2..24); the index 2^index_bits - 1 is never a slot (dead words use it,
 *     and an owner may use it for handles outside the table: the pool's
 *     overflow IDs), so a table has at most 2^index_bits - 1 slots.
 *   - generations run 1 .. gmax = 2^(32 - index_bits) - 1; 0 is never
 *     issued, so the handle value 0 means "none" everywhere.
 *   - Each slot issues the generations of one sequence, which starts at the
 *     table's gbase (its instance tag, spread over the generation space by a
 *     golden-ratio step per table created) and runs gbase, gbase + 1, ...,
 *     gmax, 1, ..., gbase - 1. A handle whose generation its slot never
 *     issued is recognised as not this table's (foreign): another table's
 *     handle is foreign unless its generation happens to fall among those its
 *     slot here has issued, a chance of (issued / gmax).
 *
 * Slots. A slot is LIVE when its word is a handle; otherwise its state byte
 * says what it is: FREE (on the ring, waiting for reuse), HELD (dead, off
 * the ring: its owner releases it later, as the pool does at the end of a
 * defer scope) or RETIRED (it issued every generation of its sequence and
 * is never reused, so no handle it gave out can name a later object; ABA
 * safety), plus the WRAPPED bit (under HK__HT_WRAP, it issued the whole
 * sequence once and restarted it: an old handle may alias). Reuse is FIFO:
 * a freed slot is reused as late as possible, which spreads generation wear
 * over every slot and delays retirement.
 *
 * Every operation is O(1) except init (O(cap)), grow (O(add) with reserved
 * or chunked storage; O(cap) with hook storage when the storage moves,
 * amortised O(1) per slot), recycle and check (O(cap)). The table never reports by itself
 * except through hk__ht_report / hk__ht_check, and never allocates except
 * in init, hk__ht_room and grow.
 *
 * Reserved storage (config.reserve, 64-bit hosts): init reserves address
 * space for every slot the index bits allow (words, ring and state bytes at
 * fixed places: nothing ever moves), and the table commits pages as it
 * grows, HK__HT_COMMIT_SLOTS slots at a time (one OS call per array). A
 * grow then costs O(add + free slots) plus, once per HK__HT_COMMIT_SLOTS
 * slots, the commit; never O(cap). block is the reservation's base,
 * block_size the bytes committed, room the slots committed.
 *
 * Chunked storage (the fallback of config.reserve when the host cannot
 * reserve: 32-bit hosts, or the OS refuses): the words and state bytes
 * live in chunks of HK__HT_CHUNK_SLOTS slots from the hooks, found through
 * two directories made at init for every chunk the index bits allow, and
 * the ring in one hook block. A grow allocates at most one chunk of each
 * (and, when the ring's size doubles, a new ring into which only the free
 * slots move): O(add + free slots), never O(cap); nothing that holds live
 * handles moves. Only the chunk-aware functions (the *_any inline ones and
 * everything in handles.c) may be used on such a table: the inline fast
 * paths of the other owners read `words` directly.
 *
 * Misuse: one answer for every owner (pool, cache, gc), given by
 * hk__ht_judge for a handle that hk__ht_find did not resolve:
 *
 *   handle                                        result              kind
 *   0 (the none handle)                           HK_ERR_INVALID      HK_EK_INVALID_ARG
 *   index beyond the table, generation 0, or a    HK_ERR_FOREIGN      HK_EK_FOREIGN_PTR
 *     generation its slot never issued (another
 *     instance's handle, a forged or damaged one)
 *   freed, and freed again: the slot is dead and  HK_ERR_DOUBLE_FREE  HK_EK_DOUBLE_FREE
 *     its generation says this handle is the one
 *     freed last (HELD, FREE or RETIRED)
 *   any other use of a handle whose slot has      HK_ERR_STALE        HK_EK_STALE
 *     moved on (freed, or reused since), a second
 *     free after the slot was reused included
 */
#ifndef HEAPKIT_HANDLES_H
#define HEAPKIT_HANDLES_H

#include "heapkit/detail/handles.h"
#include "internal.h"

#define HK__HT_MIN_INDEX_BITS 1u
#define HK__HT_MAX_INDEX_BITS 30u

/* State byte of a dead slot (the low two bits), and flags. */
enum {
    HK__HT_S_FREE = 0,    /* on the ring (or live: the word says) */
    HK__HT_S_HELD = 1,    /* dead, off the ring, held by the owner until hk__ht_release */
    HK__HT_S_RETIRED = 2, /* issued every generation: never reused until hk__ht_recycle */
    HK__HT_S_MASK = 3,
    HK__HT_S_WRAPPED = 4, /* HK__HT_WRAP: has issued the whole sequence */
    HK__HT_S_SEEN = 8     /* scratch of hk__ht_check */
};

/* Slot status as hk__ht_status reports it. */
enum { HK__HT_FREE = 0, HK__HT_HELD = 1, HK__HT_RETIRED = 2, HK__HT_LIVE = 3 };

/* Table flags. */
enum {
    HK__HT_WRAP = 1u << 0,      /* generations wrap (gmax is followed by 1) instead of retiring slots */
    HK__HT_OWN_WORDS = 1u << 8, /* internal: the words are in the table's storage */
    HK__HT_RESERVED = 1u << 9   /* internal: the storage is an OS reservation committed as it grows */
};

typedef struct hk__ht_config {
    uint32_t index_bits; /* 1..30 */
    uint32_t cap;        /* slots at init, <= 2^index_bits - 1 (0 allowed with hook storage) */
    uint32_t flags;      /* HK__HT_WRAP */
    uint32_t tag;        /* 0: a fresh instance tag; else a fixed one (tests), any value */
    /* Storage: either caller memory (memory, size >= hk__ht_storage_size;
     * alignment 4; no growth), or hooks (allocated in init, grown by
     * hk__ht_grow, freed by hk__ht_fini). */
    void *memory;
    size_t size;
    const hk_alloc_hooks *hooks;
    /* Optional: the words live in the caller's own entries (e.g. next to the
     * data a fast path reads with them): words[i * step], caller memory of
     * at least cap entries, never grown. NULL: the table keeps a dense word
     * array in its storage. */
    uint32_t *words;
    uint32_t step;
    /* Non-zero (with the table's own words): reserve address space for
     * every slot up front and commit pages as the table grows (see
     * "Reserved storage" above), instead of hook storage that doubles. When
     * the host cannot reserve (32-bit hosts, or the OS refuses), the table
     * falls back to chunked storage from the hooks (see "Chunked storage";
     * no hooks: HK_ERR_NOMEM). */
    int reserve;
} hk__ht_config;

/* Slots committed at a time in reserved storage. */
#define HK__HT_COMMIT_SLOTS 16384u
/* Slots per chunk of chunked storage. */
#define HK__HT_CHUNK_BITS  12u
#define HK__HT_CHUNK_SLOTS (1u << HK__HT_CHUNK_BITS)

/* Slot i's word and state byte, whatever the storage (one more load and a
 * branch than hk__ht_word: for owners whose table may be chunked). */
static inline uint32_t *hk__ht_w(const hk__htab *t, uint32_t i) {
    if (HK__UNLIKELY(t->wdir != NULL)) return &t->wdir[i >> HK__HT_CHUNK_BITS][i & (HK__HT_CHUNK_SLOTS - 1u)];
    return hk__ht_word(t, i);
}
static inline unsigned char *hk__ht_st(const hk__htab *t, uint32_t i) {
    if (HK__UNLIKELY(t->sdir != NULL)) return &t->sdir[i >> HK__HT_CHUNK_BITS][i & (HK__HT_CHUNK_SLOTS - 1u)];
    return &t->state[i];
}

/* Bytes of storage a table of `cap` slots needs (ring, state bytes, and
 * the dense word array unless the words are external), or 0 on overflow.
 * O(1). */
size_t hk__ht_storage_size(uint32_t cap, int own_words);

/* Initialises a table: every slot FREE and fresh, on the ring in index
 * order. HK_ERR_INVALID for a bad config (index_bits out of range, cap too
 * large, no storage, caller memory too small, external words with hooks),
 * HK_ERR_NOMEM when the hooks fail. O(cap). */
hk_result hk__ht_init(hk__htab *t, const hk__ht_config *cfg);

/* Frees hook storage; the table is unusable afterwards. O(1). */
void hk__ht_fini(hk__htab *t);

/* Adds `add` fresh slots at the end of the ring (reserved or hook storage,
 * the table's own words only). HK_ERR_UNSUPPORTED otherwise, HK_ERR_OVERFLOW
 * past 2^index_bits - 1 slots, HK_ERR_NOMEM when the OS or the hooks fail
 * (no slot is added). Reserved storage: O(add + free slots), plus a
 * commit (three OS calls) when the slots pass the committed room. Chunked
 * storage: O(add + free slots), plus a chunk of words and one of state
 * bytes (two hook calls) per HK__HT_CHUNK_SLOTS slots and a new ring (one
 * hook call) when the slots pass a power of two. Hook storage: O(cap) when
 * the storage moves (doubling), else O(add). */
hk_result hk__ht_grow(hk__htab *t, uint32_t add);

/* Makes storage for at least `room` slots (<= 2^index_bits - 1) without
 * adding any, so that grows up to that many slots need no memory: commits
 * reserved pages, allocates chunks, or moves hook storage once. Errors as
 * hk__ht_grow. O(free slots) + the commit (reserved); O(free slots +
 * chunks) (chunked); O(cap) (hooks). */
hk_result hk__ht_room(hk__htab *t, uint32_t room);

/* True when the next hk__ht_grow(t, add) commits pages or moves storage:
 * its cost is then the OS's or O(cap). O(1). */
static inline int hk__ht_grow_needs_memory(const hk__htab *t, uint32_t add) { return add > t->room - t->cap; }

/* Retired slots become FREE with a fresh sequence, queued in index order.
 * Only when no handle of those slots is kept anywhere. Returns how many.
 * O(cap). */
uint32_t hk__ht_recycle(hk__htab *t);

/* Slot status (HK__HT_LIVE / FREE / HELD / RETIRED). O(1). */
static inline int hk__ht_status(const hk__htab *t, uint32_t i) {
    if (hk__ht_word_live(t, *hk__ht_w(t, i))) return HK__HT_LIVE;
    return *hk__ht_st(t, i) & HK__HT_S_MASK;
}

/* The handle slot i issued last (live or not), 0 when it never issued one.
 * O(1). */
uint32_t hk__ht_last_handle(const hk__htab *t, uint32_t i);

/* Generations slot i has issued since init or recycle, saturating at gmax
 * (every one issued). O(1). */
uint32_t hk__ht_uses(const hk__htab *t, uint32_t i);

/* The generation after `gen` in this table's sequences (gbase after 0;
 * 1 after gmax), and a generation's place in the sequence (0 for gbase).
 * Owners that mint handles outside the table (the pool's overflow IDs) use
 * them to share the table's sequence. O(1). */
static inline uint32_t hk__ht_gen_next(const hk__htab *t, uint32_t gen) {
    return gen == 0 ? t->gbase : gen >= t->gmax ? 1u : gen + 1u;
}
static inline uint32_t hk__ht_gen_ord(const hk__htab *t, uint32_t gen) {
    return (gen + t->gmax - t->gbase) % t->gmax;
}

/* Pops the oldest free slot and makes it live with its next generation;
 * returns the handle, or 0 when no slot is free. O(1). */
static inline uint32_t hk__ht_alloc(hk__htab *t) {
    if (t->head == t->tail) return 0;
    uint32_t s = t->ring[(uint32_t)t->head & t->ring_mask];
    t->head++;
    uint32_t *w = hk__ht_word(t, s);
    uint32_t h = (hk__ht_gen_next(t, *w >> t->index_bits) << t->index_bits) | s;
    *w = h;
    t->state[s] &= HK__HT_S_WRAPPED;
    return h;
}

/* Live slot i becomes HELD: dead to every lookup, not reusable. O(1). */
static inline void hk__ht_kill(hk__htab *t, uint32_t i) {
    *hk__ht_word(t, i) |= t->index_mask; /* dead; the generation stays */
    t->state[i] = (unsigned char)((t->state[i] & HK__HT_S_WRAPPED) | HK__HT_S_HELD);
    t->nheld++;
}

/* HELD slot i becomes FREE (queued for reuse) or, when it issued the last
 * generation of its sequence, RETIRED (or WRAPPED and queued under
 * HK__HT_WRAP). Returns 1 when it retired. O(1). */
static inline int hk__ht_release(hk__htab *t, uint32_t i) {
    unsigned char st = (unsigned char)(t->state[i] & HK__HT_S_WRAPPED);
    t->nheld--;
    if (*hk__ht_word(t, i) == t->last_dead && !st) {
        /* the slot has issued every generation of its sequence */
        if (!(t->flags & HK__HT_WRAP)) {
            t->state[i] = HK__HT_S_RETIRED;
            t->nretired++;
            return 1;
        }
        st = HK__HT_S_WRAPPED;
    }
    t->state[i] = st; /* FREE */
    t->ring[(uint32_t)t->tail & t->ring_mask] = i;
    t->tail++;
    return 0;
}

/* hk__ht_release, but a slot that becomes FREE goes to the FRONT of the
 * ring: the next allocation takes it (LIFO reuse, for owners that want the
 * slot they released last while it is still in the cache). Returns 0 when
 * it was queued at the front, 1 when it retired, 2 when it wrapped (under
 * HK__HT_WRAP; queued at the back as hk__ht_release does). The ring's head
 * moves back for each front release, so head no longer counts pops: an
 * owner that derives an allocation count from head adds those back. O(1). */
static inline int hk__ht_release_front(hk__htab *t, uint32_t i) {
    unsigned char st = (unsigned char)(t->state[i] & HK__HT_S_WRAPPED);
    if (HK__UNLIKELY(*hk__ht_word(t, i) == t->last_dead && !st)) return hk__ht_release(t, i) ? 1 : 2;
    t->nheld--;
    t->state[i] = st; /* FREE */
    t->head--;
    t->ring[(uint32_t)t->head & t->ring_mask] = i;
    return 0;
}

/* Live slot i: kill and release in one. Returns 1 when it retired. O(1). */
static inline int hk__ht_free(hk__htab *t, uint32_t i) {
    hk__ht_kill(t, i);
    return hk__ht_release(t, i);
}

/* hk__ht_find, hk__ht_alloc and hk__ht_free for a table whose storage
 * may be chunked (the gc's). O(1). */
static inline uint32_t hk__ht_find_any(const hk__htab *t, uint32_t h) {
    uint32_t i = h & t->index_mask;
    return (i < t->cap && *hk__ht_w(t, i) == h) ? i : HK__HT_NONE;
}
static inline uint32_t hk__ht_alloc_any(hk__htab *t) {
    if (t->head == t->tail) return 0;
    uint32_t s = t->ring[(uint32_t)t->head & t->ring_mask];
    t->head++;
    uint32_t *w = hk__ht_w(t, s);
    uint32_t h = (hk__ht_gen_next(t, *w >> t->index_bits) << t->index_bits) | s;
    *w = h;
    *hk__ht_st(t, s) &= HK__HT_S_WRAPPED;
    return h;
}
static inline int hk__ht_free_any(hk__htab *t, uint32_t i) {
    uint32_t *w = hk__ht_w(t, i);
    unsigned char *st = hk__ht_st(t, i);
    *w |= t->index_mask; /* dead; the generation stays */
    unsigned char wrapped = (unsigned char)(*st & HK__HT_S_WRAPPED);
    if (*w == t->last_dead && !wrapped) { /* the slot has issued every generation of its sequence */
        if (!(t->flags & HK__HT_WRAP)) {
            *st = HK__HT_S_RETIRED;
            t->nretired++;
            return 1;
        }
        wrapped = HK__HT_S_WRAPPED;
    }
    *st = wrapped; /* FREE */
    t->ring[(uint32_t)t->tail & t->ring_mask] = i;
    t->tail++;
    return 0;
}

/* Counts. O(1). */
static inline uint32_t hk__ht_nfree(const hk__htab *t) { return (uint32_t)(t->tail - t->head); }
static inline uint32_t hk__ht_nlive(const hk__htab *t) {
    return t->cap - hk__ht_nfree(t) - t->nheld - t->nretired;
}

/* What is wrong with handle h, which hk__ht_find did not resolve. `freeing`
 * says whether the caller frees it (a repeated free of the handle freed
 * last is a double free; any other use is stale). See the table above. */
typedef enum hk__ht_why {
    HK__HT_WHY_OK,          /* h is live: not misuse (result HK_OK) */
    HK__HT_WHY_NONE,        /* h == 0 */
    HK__HT_WHY_RANGE,       /* index beyond the table */
    HK__HT_WHY_NEVER,       /* generation never issued by that slot (or 0) */
    HK__HT_WHY_DOUBLE_FREE, /* freeing the handle freed last */
    HK__HT_WHY_FREED,       /* using the handle freed last */
    HK__HT_WHY_STALE        /* the slot moved on */
} hk__ht_why;

typedef struct hk__ht_verdict {
    hk_result result;
    hk_error_kind kind;
    hk__ht_why why;
    uint32_t index, gen; /* of h */
    uint32_t slot_gen;   /* the slot's current (or last) generation; 0 when out of range */
    int status;          /* the slot's HK__HT_* status; -1 when out of range */
} hk__ht_verdict;

hk__ht_verdict hk__ht_judge(const hk__htab *t, uint32_t h, int freeing);

/* Judges h and reports it through rep with one message the three owners
 * share: "<op> of <noun> 0x........: <what is wrong>". addr is the address
 * reported (the slot's object when the owner has one; NULL: the handle's
 * value), size and block_name as in hk__report. Returns the verdict's
 * result. */
hk_result hk__ht_report(const hk__htab *t, hk__reporter *rep, uint32_t h, int freeing, const char *op,
                        const char *noun, const void *addr, size_t size, const char *block_name);

/* Verifies the table: the ring holds exactly the FREE dead slots, each once,
 * in range; live words carry their own index and a generation; dead words
 * carry all-ones index bits; the HELD and RETIRED counts. Reports the first
 * problem through rep (HK_EK_CORRUPT_STRUCTURE, naming `noun`) and returns
 * HK_ERR_CORRUPT. Uses a scratch bit of the state bytes (restored). O(cap). */
hk_result hk__ht_check(hk__htab *t, hk__reporter *rep, const char *noun);

#endif /* HEAPKIT_HANDLES_H */
