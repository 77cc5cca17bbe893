/*
 * heapkit/detail/cache.h - PRIVATE. The part of a cache that the inline
 * hk_cache_deref_fast and hk_cache_reader_deref (heapkit/cache.h) read. Not
 * API: names and layout change in any release. The cache itself:
 * src/cache_internal.h; the scheme: docs/cache.md, "deref_fast".
 *
 * A cache starts with an hk__cache_view, and its hot entries start
 * HK__CACHE_HOT_OFFSET bytes after it (so the fast path computes their
 * address from the cache pointer and loads nothing for it). Entry i is one
 * 64-bit word for handle index i (there are 2^index_bits entries, so
 * handle & idx_mask always lands in the array):
 *
 *   bits  0..31  the block's address minus the view's base, in 8-byte units
 *                (0 when the slot holds no block)
 *   bits 32..63  the tag: handle ^ epoch while the slot is live, its block
 *                resident and stamped in that epoch of the LRU clock
 *                (1 <= epoch <= epoch_max < 2^index_bits, so the epoch
 *                changes only the index bits and the generation stays
 *                exact); otherwise i, whose index bits no probe produces
 *
 * The view's probe word holds idx_mask (low half) and the epoch deref_fast
 * compares, fast_epoch (high half). A hit: entry word w for handle h,
 * i = h & idx_mask, and (w >> 32) == (h ^ fast_epoch); the address is
 * base + (uint32_t)w * 8. A cache whose deref_fast must always miss (lock
 * hooks, paranoid, a region the offsets cannot reach) has
 * fast_epoch = epoch_max + 1, which no tag carries.
 */
#ifndef HEAPKIT_DETAIL_CACHE_H
#define HEAPKIT_DETAIL_CACHE_H

#include <stdint.h>

#include "heapkit/heapkit.h"

#ifdef __cplusplus
extern "C" {
#endif

HK_API_BEGIN

#define HK__CACHE_HOT_OFFSET 1024u /* bytes from the cache to its hot entries */

typedef struct hk__cache_view {
    uint64_t base;      /* hot entries hold (block address - base) / 8 */
    uint64_t probe;     /* fast_epoch << 32 | idx_mask: one load for both */
    uint32_t tick;      /* LRU clock: even, non-zero */
    uint32_t epoch;     /* 1..epoch_max, a step per clock value */
    uint32_t epoch_max; /* 2^index_bits - 2 */
    uint32_t idx_mask;  /* 2^index_bits - 1 */
} hk__cache_view;

#if defined(__GNUC__) || defined(__clang__)
#define HK__CACHE_LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define HK__CACHE_LIKELY(x) (x)
#endif

/* The address of a hit: the entry's low half is the block's offset from
 * the base in 8-byte units. */
static inline void *hk__cache_hit(uint64_t base, uint64_t w) {
    return (void *)(uintptr_t)(base + (uint64_t)(uint32_t)w * 8u);
}

/* The hot entries of cache c (see above). */
static inline const uint64_t *hk__cache_hot_of(const void *c) {
    return (const uint64_t *)(const void *)((const unsigned char *)c + HK__CACHE_HOT_OFFSET);
}

struct hk_cache;
void *hk__cache_deref_miss(struct hk_cache *c, uint32_t handle);

HK_API_END

#ifdef __cplusplus
}
#endif

#endif /* HEAPKIT_DETAIL_CACHE_H */
