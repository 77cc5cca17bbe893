/*
 * heapkit/detail/handles.h - PRIVATE. The layout of heapkit's generational
 * handle table and its inline fast paths, for the inline functions of the
 * public headers (pool.h). Not API: names and layout change in any release.
 * The table itself, its full paths and its documentation are src/handles.h
 * and src/handles.c.
 *
 * A handle is a uint32_t: (generation << index_bits) | index, generation
 * 1 .. 2^(32 - index_bits) - 1, so 0 is never a handle. Slot i's word is
 * the live handle while the slot is live, and (generation << index_bits) |
 * index_mask while it is not ("dead": the generation of its last occupant,
 * the index bits all ones, which no slot index is, so a dead word equals no
 * handle of the table). Free slots wait in a FIFO ring.
 */
#ifndef HEAPKIT_DETAIL_HANDLES_H
#define HEAPKIT_DETAIL_HANDLES_H

#include "heapkit/heapkit.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_API_BEGIN

#define HK__HT_NONE 0xFFFFFFFFu /* "no slot" */

typedef struct hk__htab {
    /* read by the inline fast paths */
    uint32_t *words;     /* slot i's word is words[i * step] */
    uint32_t *ring;      /* free slots, FIFO: ring[head & ring_mask] .. ring[(tail - 1) & ring_mask] */
    uint64_t head, tail; /* ring pops and pushes ever made */
    uint32_t ring_mask;  /* ring slots - 1 (a power of two >= cap) */
    uint32_t index_mask; /* 2^index_bits - 1: the index bits of a dead word; never a slot index */
    uint32_t cap;        /* slots 0 .. cap - 1 */
    uint32_t last_dead;  /* the dead word of a slot whose occupant had the last generation of its sequence */
    uint32_t step;       /* uint32_t units between words (1: a dense word array) */
    /* read by the full paths only */
    uint32_t index_bits;
    uint32_t gmax;        /* generations per sequence: 2^(32 - index_bits) - 1 */
    uint32_t gbase;       /* first generation of every sequence: the instance tag */
    uint32_t gen_last;    /* last generation of a sequence (the one before gbase) */
    uint32_t nheld;       /* dead slots off the ring that the owner holds (hk__ht_kill) */
    uint32_t nretired;    /* slots that issued every generation (RETIRE policy) */
    uint32_t room;        /* slots the storage holds (>= cap) */
    uint32_t flags;       /* HK__HT_WRAP, HK__HT_OWN_* */
    unsigned char *state; /* per slot: HK__HT_S_* (meaningful while the word is dead) */
    hk_alloc_hooks hooks; /* growable storage (alloc NULL: fixed caller storage) */
    void *block;          /* the hook-allocated block (ring, words, state) */
    size_t block_size;
    /* chunked storage (src/handles.h): words and state bytes in chunks of
     * 4096 slots from the hooks; NULL otherwise */
    uint32_t **wdir;
    unsigned char **sdir;
} hk__htab;

/* Slot i's word (any step). */
static inline uint32_t *hk__ht_word(const hk__htab *t, uint32_t i) { return &t->words[(size_t)i * t->step]; }

/* True when the word is a live handle. */
static inline int hk__ht_word_live(const hk__htab *t, uint32_t w) {
    return (w & t->index_mask) != t->index_mask;
}

/* Index of the live slot that handle h names, or HK__HT_NONE (h == 0
 * included). One mask, one load, one compare. */
static inline uint32_t hk__ht_find(const hk__htab *t, uint32_t h) {
    uint32_t i = h & t->index_mask;
    return (i < t->cap && *hk__ht_word(t, i) == h) ? i : HK__HT_NONE;
}

/* The inline allocation: pops the oldest free slot and makes it live with
 * the next generation, when that needs no decision (the ring is not empty
 * and the generation field does not wrap). Returns the handle and stores
 * its slot in *slot, or returns 0: then call hk__ht_alloc (the full path),
 * which handles every case. Dense tables (step 1) only. */
static inline uint32_t hk__ht_alloc_fast(hk__htab *t, uint32_t *slot) {
    if (t->head == t->tail) return 0;
    uint32_t s = t->ring[(uint32_t)t->head & t->ring_mask];
    uint32_t x = t->words[s];
    if (x == 0xFFFFFFFFu) return 0;
    uint32_t v = (x + 1u) | s; /* dead word + 1: the next generation, index bits 0 */
    t->head++;
    t->words[s] = v;
    *slot = s;
    return v;
}

/* The inline free of live slot s = h & index_mask (the caller checked
 * words[s] == h): makes it dead and queues it, unless its generation was
 * the last of the sequence (then it returns 0 and the caller takes the full
 * path, hk__ht_free, which retires or wraps the slot). Dense tables only. */
static inline int hk__ht_free_fast(hk__htab *t, uint32_t s, uint32_t h) {
    uint32_t dead = h | t->index_mask;
    if (dead == t->last_dead) return 0;
    t->words[s] = dead;
    t->ring[(uint32_t)t->tail & t->ring_mask] = s;
    t->tail++;
    return 1;
}

HK_API_END

#ifdef __cplusplus
}
#endif

#endif /* HEAPKIT_DETAIL_HANDLES_H */
