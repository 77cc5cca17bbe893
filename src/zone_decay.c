/*
 * src/zone_decay.c - giving the zone's free pages back to the OS: the decay
 * clock (epochs), sweeps over the free lists, and the bookkeeping of which
 * free blocks are clean. Calls zone_tlsf.c's data (the free lists, read
 * only), the region lookup and the OS layer (hk_os_unback, hk_os_coarse_ns);
 * called by zone.c (the free path's tick, hk_zone_trim, and the poll of
 * the small blocks' frees). Small blocks' runs give their pages back when
 * they empty (zone_small.c).
 *
 * How: a free block's span is its whole pages past its first 32 bytes
 * (header and list links), which the zone never reads while the block is
 * free. Giving a span back (madvise MADV_DONTNEED through hk_os_unback)
 * keeps it mapped, readable and writable: the next write faults in a zero
 * page, so the blocks later carved from it need nothing special, and a
 * stale pointer's header reads zeros instead of faulting.
 *
 * Decay: time runs in epochs of half the decay time. A free block dirtied
 * (freed or merged) in the current epoch carries the epoch bit
 * z->decay_young; when an epoch ends, the dirty blocks of the epoch before
 * (the other bit) have been free for at least one whole epoch and are
 * swept, then the bit flips. A page freed and reused within an epoch is
 * never given back, so alloc/free cycles shorter than half the decay time
 * cost no system call and no page fault; a page left free is given back
 * between half the decay time and the decay time after it was freed
 * (given calls into the zone meanwhile: the clock is read only on slow
 * paths; it is the OS's coarse clock, hk_os_coarse_ns, so both bounds
 * hold within its tick of a few milliseconds). Hysteresis: the clock runs
 * (decay_armed) only once ZONE_DECAY_ARM bytes were freed since the last
 * sweep, and a decay sweep skips spans below ZONE_DECAY_MIN_SPAN;
 * hk_zone_trim sweeps everything.
 *
 * Invariants (verified by hk_zone_check):
 *  - ZB_FREE_CLEAN and ZB_FREE_EPOCH appear only on free blocks; a clean
 *    block lies in the zone's own OS memory (zone_own_memory) and has
 *    a span (of at least a page); clean_bytes is the sum of the clean
 *    blocks' spans.
 *  - decay_epoch_ns is 0 (no decay by time) with a negative decay_ms, and
 *    with HK_ZONE_PREFAULT unless decay_ms is positive.
 *  - decay_on is 0 for a zone with HK_FLAG_FILL (the free fill must stay
 *    readable) or without any OS memory; then no block is ever clean.
 *  - decay_armed implies decay_epoch_ns != 0; decay_next is the end of the
 *    current epoch; decay_old is 0 whenever the zone is not armed; the
 *    free path's tick runs when decay_new reaches decay_check_at (at most
 *    ZONE_DECAY_ARM while not armed, ZONE_DECAY_CHECK past the last tick
 *    while armed).
 */
#include "zone_internal.h"

void hk__zone_decay_init(hk_zone *z, int decay_ms) {
    z->page = hk_os_page_size();
    z->decay_on = !(ZONE_FLAGS(z) & HK_FLAG_FILL) && (z->ctl_os || z->grow_size);
    uint64_t ms = decay_ms > 0 ? (uint64_t)decay_ms : ZONE_DECAY_DEFAULT_MS;
    /* HK_ZONE_PREFAULT promises no page fault on reuse: no decay unless asked for */
    int by_time = decay_ms > 0 || (decay_ms == 0 && !(ZONE_FLAGS(z) & HK_ZONE_PREFAULT));
    z->decay_epoch_ns = (z->decay_on && by_time) ? ms * 500000u : 0; /* half the decay time */
    z->decay_next = hk_os_coarse_ns() + z->decay_epoch_ns;
    z->decay_check_at = ZONE_DECAY_ARM;
    if (z->decay_on) hk_os_unback_prepare(); /* no lazy binding inside a sweep */
}

/* Gives back the span of dirty free block b when it has one of at least
 * min bytes in the zone's OS memory; marks it clean. Returns the bytes. */
static size_t zone_clean_block(hk_zone *z, zone_blk *b, size_t min) {
    size_t size = zone_bsize(b);
    uintptr_t lo;
    size_t span = zone_free_span(z, b, size, &lo);
    if (span == 0 || span < min || !zone_own_memory(z, b)) return 0;
    if (hk_os_unback((void *)lo, span) != HK_OK) return 0; /* left dirty: tried again at the next sweep */
    zone_set_hdr(b, size, 0, (b->bits & ZB_PREV_USED) | ZB_FREE_CLEAN, 0);
    z->clean_bytes += span;
    z->decommit_count++;
    return span;
}

size_t hk__zone_sweep(hk_zone *z, int all) {
    if (!z->decay_on) return 0;
    size_t min = all ? z->page : ZONE_DECAY_MIN_SPAN, total = 0;
    unsigned old = z->decay_young ^ ZB_FREE_EPOCH;
    /* only classes whose blocks can hold a span of min bytes */
    unsigned fl0, sl0;
    zone_mapping(min + sizeof(zone_blk), &fl0, &sl0);
    for (unsigned fl = fl0; fl < ZONE_FL_COUNT; fl++) {
        uint32_t slm = z->sl_map[fl];
        if (fl == fl0) slm &= ~0u << sl0;
        while (slm) {
            unsigned sl = (unsigned)__builtin_ctz(slm);
            slm &= slm - 1;
            for (zone_blk *b = z->heads[fl][sl]; b; b = b->next_free) {
                if (b->bits & ZB_FREE_CLEAN) continue;
                if (!all && (b->bits & ZB_FREE_EPOCH) != old) continue;
                total += zone_clean_block(z, b, min);
            }
        }
    }
    return total;
}

/* Ends the current epoch when it is over at `now`: sweeps the blocks of
 * the epoch before, flips the epoch bit, starts the next epoch, and stays
 * armed while the ended epoch freed something. Lock held. */
static void zone_decay_step(hk_zone *z, uint64_t now) {
    if (now < z->decay_next) return;
    if (z->decay_old) hk__zone_sweep(z, 0);
    z->decay_old = z->decay_new;
    z->decay_new = 0;
    z->decay_check_at = z->decay_old ? ZONE_DECAY_CHECK : ZONE_DECAY_ARM;
    z->decay_young ^= ZB_FREE_EPOCH;
    __atomic_store_n(&z->decay_next, now + z->decay_epoch_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&z->decay_armed, z->decay_old != 0, __ATOMIC_RELAXED);
}

void hk__zone_decay_tick(hk_zone *z) {
    if (!z->decay_epoch_ns) { /* no decay: nothing to count */
        z->decay_new = 0;
        return;
    }
    z->decay_check_at = z->decay_new + ZONE_DECAY_CHECK;
    if (!z->decay_armed) {
        if (z->decay_new < ZONE_DECAY_ARM) {
            z->decay_check_at = ZONE_DECAY_ARM;
            return;
        }
        __atomic_store_n(&z->decay_armed, 1, __ATOMIC_SEQ_CST);
    }
    zone_decay_step(z, hk_os_coarse_ns());
}

void hk__zone_decay_poll_at(hk_zone *z, uint64_t now, int locked) {
    if (now < __atomic_load_n(&z->decay_next, __ATOMIC_RELAXED)) return;
    if (!locked) hk__core_lock(&z->core);
    if (z->decay_armed) zone_decay_step(z, now);
    if (!locked) hk__core_unlock(&z->core);
}
