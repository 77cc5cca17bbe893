/*
 * heapkit/detail/cache.h - PRIVATE. The part of a cache that the inline
 * hk_cache_deref_fast (heapkit/cache.h) reads. Not API: names and layout
 * change in any release. The cache itself: src/cache_internal.h.
 *
 * A cache starts with an hk__cache_view. Its hot entries are indexed by
 * handle & idx_mask (2^index_bits entries, so every masked value lands in
 * the array); entry i holds slot i's word of the shared handle table
 * (src/handles.h: the live handle, or a dead word that equals no handle),
 * the slot's LRU stamp (0 when the slot is not live) and its block's
 * address (NULL when the slot is not live or its block was purged).
 * Entries past the table's slots stay all zero. deref_fast reads the view's
 * `probe` word alone (clock and mask in one load) besides the entry.
 */
#ifndef HEAPKIT_DETAIL_CACHE_H
#define HEAPKIT_DETAIL_CACHE_H

#include <stdint.h>
#include <string.h>

#include "heapkit/heapkit.h"

#ifdef __cplusplus
extern "C" {
#endif

HK_API_BEGIN

typedef struct hk__cache_hot {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    uint32_t stamp;  /* LRU stamp; 0 unless live */
    uint32_t handle; /* the handle table's word for this slot */
#else
    uint32_t handle; /* the handle table's word for this slot */
    uint32_t stamp;  /* LRU stamp; 0 unless live */
#endif
    void *data; /* block address, NULL when empty or not live */
} hk__cache_hot;

/* The entry's handle and stamp as one 64-bit key: handle | stamp << 32 (one
 * load; memcpy keeps it within the aliasing rules). */
static inline uint64_t hk__cache_hot_key(const hk__cache_hot *e) {
    uint64_t k;
    memcpy(&k, e, sizeof k);
    return k;
}

typedef struct hk__cache_view {
    hk__cache_hot *hot; /* indexed by handle & idx_mask */
    uint64_t probe;     /* what deref_fast reads: LRU clock << 32 | idx_mask; clock 0 (no live
                           entry's stamp) when deref_fast must always miss */
    uint64_t tick_key;  /* LRU clock << 32; low 32 bits all ones when deref_fast must always miss */
    uint32_t idx_mask;  /* 2^index_bits - 1 */
    uint32_t reserved;
} hk__cache_view;

struct hk_cache;
void *hk__cache_deref_miss(struct hk_cache *c, uint32_t handle);

HK_API_END

#ifdef __cplusplus
}
#endif

#endif /* HEAPKIT_DETAIL_CACHE_H */
