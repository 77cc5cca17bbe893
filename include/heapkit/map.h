/*
 * heapkit/map.h - heap maps: an SVG picture of any heapkit heap, drawn from
 * nothing but its public stats, walk and check calls (MacsBug's `hd`, as a
 * picture).
 *
 * The picture: the heap's blocks as cells in address order, one row after
 * another, each cell as wide as the block's bytes (headers and padding
 * between blocks show as the background); a jump in addresses (another
 * region, the hunk's middle) starts a new row. Cells are coloured by state
 * (free, used, by zone tag, locked, purgeable, temp, high, run, quarantined,
 * guarded, overflow) with a legend; hovering a cell names the block: address,
 * size, requested size, state, tag, name, id, lock count, allocation site.
 * Blocks narrower than a few pixels are drawn together as one cell ("12
 * blocks, ...") coloured by the state with the most bytes. Above the map: the
 * title, the stats and the check's verdict.
 *
 * Output goes through an hk_print_fn in pieces (heapkit.h). The print
 * function is called from inside the allocator's walk: it must not allocate
 * from, or free into, the heap being drawn (with libheapkit-malloc.so, use
 * write(2), not stdio). The map itself allocates nothing.
 *
 * Cost: three walks of the heap (O(blocks) each) and output of O(cells)
 * bytes, about 150 bytes per cell, at most about 12 cells per 100 pixels of
 * row. Thread-safety: that of the allocator's walk (each walk takes the
 * instance's lock hooks, if any; the heap must not change between the three
 * walks).
 */
#ifndef HEAPKIT_MAP_H
#define HEAPKIT_MAP_H

#include "cache.h"
#include "gc.h"
#include "guard.h"
#include "heapkit.h"
#include "hunk.h"
#include "pool.h"
#include "zone.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_API_BEGIN

enum {
    HK_MAP_NO_CHECK = 1u << 0, /* do not call the check (it is O(heap) and may report) */
    HK_MAP_NO_HEADER = 1u << 1 /* the map and legend only: no title and stats lines */
};

/* Zero-initialisable. */
typedef struct hk_map_options {
    const char *title;  /* first line (NULL: "<allocator> heap map") */
    uint32_t width;     /* picture width in pixels (0: 960; at least 200) */
    uint32_t row_bytes; /* bytes per row (0: chosen so the heap takes about 40 rows) */
    uint32_t row_height; /* pixels per row (0: 16) */
    uint32_t flags;     /* HK_MAP_* */
} hk_map_options;

/* A walk of any heap, for hk_map_heap: calls fn for every block. */
typedef int (*hk_map_walk_fn)(void *heap, hk_walk_fn fn, void *user);

/* Draws a heap described by its stats (as filled by its stats call), its
 * walk, and the result of its check (HK_OK, or the error it returned; pass
 * HK_OK with HK_MAP_NO_CHECK to leave the verdict out). Returns HK_OK,
 * HK_ERR_INVALID for NULL stats, walk or out, or the walk's non-zero value
 * as HK_ERR_CORRUPT when a walk stopped early (the picture is then
 * complete but marked "walk stopped"). */
hk_result hk_map_heap(void *heap, const hk_stats *stats, hk_map_walk_fn walk, hk_result check,
                      const hk_map_options *opt, hk_print_fn out, void *user);

/* The same for each heapkit allocator: its stats, walk and check calls.
 * opt may be NULL (defaults). Each returns as hk_map_heap, or
 * HK_ERR_INVALID for a NULL instance. */
hk_result hk_map_zone(hk_zone *z, const hk_map_options *opt, hk_print_fn out, void *user);
hk_result hk_map_hunk(hk_hunk *h, const hk_map_options *opt, hk_print_fn out, void *user);
hk_result hk_map_cache(hk_cache *c, const hk_map_options *opt, hk_print_fn out, void *user);
hk_result hk_map_pool(hk_pool *p, const hk_map_options *opt, hk_print_fn out, void *user);
hk_result hk_map_gc(hk_gc *gc, const hk_map_options *opt, hk_print_fn out, void *user);
hk_result hk_map_guard(hk_guard *g, const hk_map_options *opt, hk_print_fn out, void *user);

HK_API_END

#ifdef __cplusplus
}
#endif

#endif /* HEAPKIT_MAP_H */
