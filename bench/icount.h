/*
 * bench/icount.h - the one way heapkit's benchmarks count the instructions
 * of a single call: under callgrind (started with --instr-atstart=no), the
 * costs are zeroed right before the call and dumped right after it, with a
 * label as the dump's trigger. bench/icount_dumps.awk turns the dumps into
 * one line per call ("label instructions"). Used by bench/zone_icount.c
 * (the frame trace, bench/icount.sh) and by the worst-case drivers of
 * bench/bounds_*.c (bench/bounds.sh).
 *
 *   ICOUNT_ON();                          instrumentation on (after a native setup)
 *   ICOUNT(hkb_label(buf, "zone.free", "merge both neighbours", 0), hk_zone_free(z, p));
 *   ICOUNT_OFF();                         back to native speed for the next setup
 *
 * Each count includes the constant cost of the two client requests (a few
 * instructions, the same for every allocator). Without <valgrind/callgrind.h>
 * ICOUNT_AVAILABLE is 0 and the macros run the call uncounted.
 *
 * Invariant: a label is "call|path|units" with no newline; units is the
 * number of work units of an O(n)-by-design call (blocks walked, bytes
 * moved...), 0 for O(1) calls (ICOUNT_RELABEL renames a call after it). Dumps are numbered in the order they
 * were made (callgrind's OUT.N files), which is the order the readers sort them by.
 */
#ifndef HEAPKIT_BENCH_ICOUNT_H
#define HEAPKIT_BENCH_ICOUNT_H

#include <stddef.h>
#include <stdio.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define ICOUNT_AVAILABLE 1
#endif
#endif
#ifndef ICOUNT_AVAILABLE
#define ICOUNT_AVAILABLE 0
#endif

#if ICOUNT_AVAILABLE
#define ICOUNT_ON()  CALLGRIND_START_INSTRUMENTATION
#define ICOUNT_OFF() CALLGRIND_STOP_INSTRUMENTATION
/* Counts the statement `call` alone; `label` is a string (see above). */
#define ICOUNT(label, call)                                                                                  \
    do {                                                                                                     \
        const char *icount_label_ = (label); /* formatted before the costs are zeroed */                     \
        CALLGRIND_ZERO_STATS;                                                                                \
        call;                                                                                                \
        CALLGRIND_DUMP_STATS_AT(icount_label_);                                                              \
    } while (0)
/* Names the call counted just before anew, when its path or its units are
 * known only after the call: an empty dump labelled "@relabel|call|path|
 * units", which bench/bounds.sh applies to the dump before it (dumps are
 * read in the order they were made). */
#define ICOUNT_RELABEL(buf, call, path, units)                                                               \
    do {                                                                                                     \
        snprintf(buf, 160, "@relabel|%s|%s|%zu", call, path, (size_t)(units));                               \
        CALLGRIND_DUMP_STATS_AT(buf);                                                                        \
    } while (0)
#else
#define ICOUNT_ON()                            ((void)0)
#define ICOUNT_OFF()                           ((void)0)
#define ICOUNT(label, call)                    ((void)(label), call)
#define ICOUNT_RELABEL(buf, call, path, units) ((void)(buf), (void)(call), (void)(path), (void)(units))
#endif

/* Writes "call|path|units" into buf (at least 160 bytes) and returns it. */
static inline const char *hkb_label(char *buf, const char *call, const char *path, size_t units) {
    snprintf(buf, 160, "%s|%s|%zu", call, path, units);
    return buf;
}

#endif /* HEAPKIT_BENCH_ICOUNT_H */
