/*
 * src/all.c - the whole library as one translation unit. Add this file to
 * your own build (with include/ on the include path) instead of linking
 * libheapkit: nothing else is needed. The test suite checks that every
 * source of the library is listed here and that the result links.
 *
 * Static names are unique across the sources so that they can share this
 * one translation unit.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "common.c"
#include "os_common.c"
#ifdef _WIN32
#include "os_win32.c"
#include "os_win32_stack.c"
#include "os_win32_fault.c"
#include "os_win32_symbols.c"
#include "os_win32_world.c"
#else
#include "os_posix.c"
#include "os_posix_stack.c"
#include "os_posix_fault.c"
#include "os_posix_symbols.c"
#include "os_posix_world.c"
#endif
#include "handles.c"
#include "track.c"
#include "hunk.c"
#include "hunk_check.c"
#include "map.c"
#include "pool_overflow.c"
#include "pool_links.c"
#include "pool_slots.c"
#include "pool_lists.c"
#include "pool_tree.c"
#include "pool_frame.c"
#include "pool_check.c"
#include "cache_handles.c"
#include "cache_region.c"
#include "cache_compact.c"
#include "cache_hunk.c"
#include "cache_alloc.c"
#include "cache.c"
#include "cache_check.c"
#include "gc_slots.c"
#include "gc_reclaim.c"
#include "gc_objects.c"
#include "gc_check.c"
#include "zone_tlsf.c"
#include "zone_region.c"
#include "zone_decay.c"
#include "zone_space.c"
#include "zone_small.c"
#include "zone_small_check.c"
#include "zone_heaps.c"
#include "zone_lookup.c"
#include "zone_tags.c"
#include "zone.c"
#include "zone_check.c"
#include "guard_trace.c"
#include "guard_report.c"
#include "guard_fallback.c"
#include "guard_slots.c"
#include "guard_fault.c"
#include "guard_check.c"
#include "guard_leak.c"
#include "guard.c"
