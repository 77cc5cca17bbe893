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
 *   bits  0..31  the tag: (generation << index_bits) | epoch while the
 *                slot is live, its block resident and stamped in that epoch
 *                of the LRU clock (1 <= epoch <= the view's epoch_max); 0
 *                otherwise (not hittable)
 *   bits 32..63  the block's address minus the base, in 16-byte units
 *                (0 when not resident)
 *
 * The view's probe word gives the rest in one load:
 *
 *   bits  0..23  idx_mask (2^index_bits - 1)
 *   bits 24..46  the base: a 16 MiB boundary at or below every address the
 *                data region can hold, at most 64 GiB below its end
 *   bits 47..63  the current epoch; a cache whose deref_fast must always
 *                miss (lock hooks, paranoid, a region the base cannot reach)
 *                probes with epoch_max + 1, which no tag carries
 *
 * A hit: entry word w for handle h, idx = h & idx_mask, and
 * (uint32_t)w == ((h ^ idx) | epoch) (h ^ idx is h with its index bits
 * cleared, so the compare checks the generation and the epoch at once);
 * the address is base + (w >> 32) * 16.
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
#define HK__CACHE_PROBE_MASK ((uint64_t)0xFFFFFFu)
#define HK__CACHE_PROBE_BASE ((uint64_t)0x00007FFFFF000000u)
#define HK__CACHE_EPOCH_SHIFT 47

typedef struct hk__cache_view {
    uint64_t probe;     /* base | epoch << 47 | idx_mask: all deref_fast reads of the cache */
    uint32_t tick;      /* LRU clock: even, non-zero */
    uint32_t epoch;     /* deref_fast's epoch: 1..epoch_max, a step per clock value */
    uint32_t epoch_max; /* 2^min(index_bits, 17) - 2 */
    uint32_t idx_mask;  /* 2^index_bits - 1 */
} hk__cache_view;

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
