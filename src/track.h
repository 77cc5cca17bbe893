/*
 * src/track.h - the one interface through which every heapkit allocator
 * tells the tools people already run about its blocks: Valgrind memcheck
 * (mempool client requests), heaptrack (its custom-allocator entry points,
 * found at run time) and Tracy (its C memory events, a build option).
 * AddressSanitizer needs none of this: the allocators poison with
 * hk__san_* / hk__asan_* (internal.h) as before.
 *
 * Which tools are on is decided once per process (hk__track_tools) and
 * copied into each instance core at create (hk__core.track). With no tool
 * on, an allocator pays one predictable branch on that byte per event:
 *
 *     if (HK__TRACKED(&x->core)) hk__track_alloc(&x->core, p, n, 0);
 *
 * and nothing more: everything else is out of line in track.c. With a tool
 * on, the core also sends every public call through hk__core_lock (as lock
 * hooks do), so the allocators leave their lock-free fast paths and every
 * event passes one of the announcing paths below.
 *
 * Events, each announced once by the allocator that makes it:
 *   hk__track_create / _destroy  an instance begins / ends
 *   hk__track_heap               memory becomes the allocator's (own = 1:
 *                                memcheck marks it unaddressable) or is
 *                                given back (own = 0)
 *   hk__track_alloc              a block [p, p+n) is handed out
 *   hk__track_free               the block at p ends (bulk frees: once per
 *                                block they end)
 *   hk__track_realloc            a block changes size, in place or moved
 *   hk__track_move               the allocator moved a live block (cache
 *                                compaction): same contents, new address
 *
 * Under memcheck the allocator's own code runs with error reporting off
 * (hk__track_enter / _leave, called by hk__core_lock / _unlock), so it may
 * read and write its headers and free space, which memcheck keeps
 * unaddressable for the program: a program's use after free, overflow into
 * a neighbour's header or free space, or read of a fresh block's bytes is
 * a memcheck error with the block's allocation stack.
 */
#ifndef HEAPKIT_TRACK_H
#define HEAPKIT_TRACK_H

#include "internal.h"

struct hk__core;

/* Tools (bits of hk__core.track and of hk__track_tools()). */
#define HK__TRACK_VALGRIND  1u /* under Valgrind memcheck (not callgrind...), headers found at build */
#define HK__TRACK_HEAPTRACK 2u /* heaptrack_malloc / _free / _realloc found in the process */
#define HK__TRACK_TRACY     4u /* built with HK_TRACY (CMake HEAPKIT_TRACY) */

/* One predictable branch on the instance's byte: true when any tool is on. */
#define HK__TRACKED(core) HK__UNLIKELY((core)->track != 0)

/* The tools on in this process: probed at the first call (RUNNING_ON_VALGRIND,
 * a lookup of heaptrack's three entry points, the Tracy build option) and
 * fixed afterwards. HEAPKIT_TRACK=0 in the environment turns every tool off
 * (used to measure the cost). Thread-safe. */
unsigned hk__track_tools(void);

/* No tool for this process's instances, when nothing probed yet: the malloc
 * shims call it before creating their heap (the tools see malloc calls
 * themselves, and the probe's dlsym may call malloc). */
void hk__track_off(void);

/* An instance whose core is in its final place begins / ends (call
 * hk__track_free for each block it still holds first: every tool must see
 * them end). None of today's tools keeps per-instance state. */
void hk__track_create(const struct hk__core *c);
void hk__track_destroy(const struct hk__core *c);

/* [p, p+n) becomes the allocator's memory (own = 1: headers and free space
 * from now on, unaddressable for the program under memcheck) or goes back
 * to its owner (own = 0: addressable, undefined). Only memcheck cares. */
void hk__track_heap(const struct hk__core *c, const void *p, size_t n, int own);

/* A block of n bytes at p was handed out; `defined`: its bytes are set
 * (HK_FLAG_ZERO), so reading them is no memcheck error. */
void hk__track_alloc(const struct hk__core *c, const void *p, size_t n, int defined);

/* The block at p ended (freed, purged, collected, dropped by a mark). */
void hk__track_free(const struct hk__core *c, const void *p);

/* The block at old (old_n bytes) is now the block at p (n bytes): in place
 * when p == old. The first min(old_n, n) bytes keep their memcheck state. */
void hk__track_realloc(const struct hk__core *c, const void *old, size_t old_n, const void *p, size_t n);

/* The allocator moved the live block at old (n bytes) to p (compaction). */
void hk__track_move(const struct hk__core *c, const void *old, const void *p, size_t n);

/* A walk callback (hk_walk_fn; user: the instance's core) that announces
 * the end of every used block it is shown: an instance's destroy runs its
 * own walk with it, so heaptrack and Tracy see the blocks end. */
int hk__track_end_visit(const hk_block_info *info, void *core);

/* The allocator's own code begins / ends (memcheck: its reports are off in
 * between, per thread, nesting). Called by hk__core_lock / _unlock. */
void hk__track_enter(const struct hk__core *c);
void hk__track_leave(const struct hk__core *c);

#endif /* HEAPKIT_TRACK_H */
