/*
 * tools/trace.h - the heapkit allocation trace: its file format (shared by
 * the recording preload, shim/record_malloc.c, which writes it without
 * allocating) and the reader the tools use (tools/trace.c).
 *
 * File layout (all fixed-width fields little-endian):
 *
 *   offset 0     header, HKT_HEADER_SIZE bytes:
 *                  0  magic "HKTRACE\0"
 *                  8  u32 version (HKT_VERSION)   12 u32 header size
 *                 16  u32 pid                      20 u32 parent pid
 *                 24  u64 start, CLOCK_MONOTONIC ns (event times are relative to it)
 *                 32  u64 start, Unix time in ns
 *                 40  u32 flags (HKT_F_CLOSED: the recorder ended it at exit)
 *                 44  u32 reserved (0)
 *   offset 4096  chunks, one after another: a 16-byte chunk header
 *                  u32 magic HKT_CHUNK_MAGIC, u32 thread (1-based),
 *                  u32 capacity (payload bytes), u32 used (committed bytes)
 *                followed by `capacity` payload bytes, of which the first
 *                `used` hold whole records. Each chunk belongs to one thread;
 *                a thread's chunks are in file order. A chunk header of
 *                zeros ends the trace (space reserved but never used).
 *
 * Records: a type byte (low 4 bits the kind, high 4 bits a detail), then
 * unsigned LEB128 varints:
 *   ALLOC   (detail: HKT_FN_*)  dt da size stack [align if the fn takes one]
 *   FREE                        dt da
 *   REALLOC_FROM                dt da            (before the real realloc runs)
 *   REALLOC (detail: HKT_RA_*)  dt da size stack (after it returned; no da if FAILED)
 *   STACK                       id n frame[0] then n-1 zigzag deltas
 *   THREAD                      dt tid
 *   MAPS                        n, then n x (start end offset pathlen path)
 *   CMDLINE                     len bytes (arguments separated by NUL)
 * dt is the time since the thread's previous record in this chunk (the
 * first record of a chunk: since the trace's start), in ns. da is a block
 * address, zigzag-encoded as the difference from the previous address in
 * this chunk (the first: from 0). The recorder keeps no table of blocks:
 * the reader turns addresses into objects, in time order (a FREE is
 * stamped before the real free runs, an ALLOC after the real malloc
 * returned, so an address is always freed before it is handed out again).
 * A REALLOC_FROM names the block passed to realloc; the same thread's next
 * REALLOC says what became of it (moved, kept in place, freed by a size of
 * 0, or left untouched when the call FAILED). Stacks are numbers defined
 * once by a STACK record anywhere in the file (stack 0: none captured).
 *
 * Crash safety: the recorder writes records into a shared file mapping and
 * publishes `used` after each whole record, so a program that ends by
 * _exit, a signal or SIGKILL leaves a trace readable up to its last
 * complete record.
 */
#ifndef HEAPKIT_TOOLS_TRACE_H
#define HEAPKIT_TOOLS_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define HKT_MAGIC        "HKTRACE"
#define HKT_VERSION      2u /* 1: objects numbered by the recorder */
#define HKT_HEADER_SIZE  48u
#define HKT_DATA_START   4096u
#define HKT_CHUNK_MAGIC  0x4b43484bu /* "KHCK" */
#define HKT_CHUNK_HEADER 16u
#define HKT_F_CLOSED     1u
#define HKT_MAX_FRAMES   64
#define HKT_MAX_PATH     4096

enum {
    HKT_R_ALLOC = 1,
    HKT_R_FREE,
    HKT_R_REALLOC,
    HKT_R_STACK,
    HKT_R_THREAD,
    HKT_R_MAPS,
    HKT_R_CMDLINE,
    HKT_R_REALLOC_FROM
};

/* The detail of a REALLOC record. */
enum {
    HKT_RA_INPLACE = 0, /* the block kept its address */
    HKT_RA_MOVED = 1,   /* a new address; the old block is gone */
    HKT_RA_FAILED = 2,  /* NULL returned: the old block is untouched (no address field) */
    HKT_RA_FREED = 3    /* realloc(p, 0) freed the block and returned NULL (no address field) */
};

/* Which call made a block (the detail of ALLOC). */
enum {
    HKT_FN_MALLOC = 0,
    HKT_FN_CALLOC,
    HKT_FN_REALLOC,  /* realloc(NULL, n) */
    HKT_FN_MEMALIGN, /* memalign, aligned_alloc, posix_memalign: has an align field */
    HKT_FN_VALLOC,   /* valloc, pvalloc: page-aligned, has an align field */
    HKT_FN_COUNT
};
static inline int hkt_fn_has_align(unsigned fn) { return fn == HKT_FN_MEMALIGN || fn == HKT_FN_VALLOC; }

/* ---- encoding (used by the recorder: no allocation, no libc) ------------ */

static inline uint8_t *hkt_put_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}
static inline uint64_t hkt_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t hkt_unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

/* ---- the reader -------------------------------------------------------- */

enum { HKT_EV_ALLOC = 1, HKT_EV_FREE, HKT_EV_REALLOC };

/* One allocation event, in a whole trace's order. Objects are renumbered
 * densely from 1 in the order of their allocation. */
typedef struct hkt_event {
    uint64_t ts;     /* ns since the trace's start */
    uint64_t size;   /* ALLOC, REALLOC: requested bytes */
    uint32_t obj;    /* ALLOC, REALLOC: the new block; FREE: the block freed */
    uint32_t old;    /* REALLOC: the block passed in */
    uint32_t stack;  /* index into trace.stacks (0: none) */
    uint16_t thread; /* 1-based index into trace.threads */
    uint8_t kind;    /* HKT_EV_* */
    uint8_t fn;      /* ALLOC: HKT_FN_*; REALLOC: 1 when the block moved */
    uint32_t align;  /* aligned calls: the alignment; else 0 */
} hkt_event;

typedef struct hkt_stack {
    uint32_t n;
    const uint64_t *frames; /* innermost first: frames[0] is in the allocating call's caller */
} hkt_stack;

typedef struct hkt_module {
    uint64_t start, end, offset;
    const char *path;
} hkt_module;

typedef struct hkt_trace {
    uint32_t pid, ppid, flags;
    uint64_t start_ns, start_unix_ns;
    const char *cmdline; /* arguments joined by spaces ("" if none recorded) */
    hkt_event *events;   /* sorted by time; a block's allocation always before its free */
    size_t nevents;
    uint32_t nobjects; /* objects are 1..nobjects */
    hkt_stack *stacks; /* stacks[0] is the empty stack */
    uint32_t nstacks;
    uint32_t *thread_tids; /* OS thread id of thread i (index 0 unused) */
    uint32_t nthreads;     /* threads are 1..nthreads */
    hkt_module *modules;
    uint32_t nmodules;
    uint64_t end_ns;     /* time of the last event */
    uint64_t file_bytes; /* bytes of the file holding data */
    uint64_t unknown_frees, dropped; /* frees of blocks the trace never saw; records past the end */
    uint64_t implied_frees; /* addresses handed out again before their free was recorded: freed then */
    int complete;        /* 1: closed at exit; 0: ended by _exit or a signal (read to the last record) */
    void *arena_;        /* reader-owned storage */
} hkt_trace;

/* Reads a trace from memory or a file. On failure returns -1 and writes one
 * line to err: "<what> at offset N" for truncated, corrupt or foreign
 * input. Never crashes on bad input. */
int hkt_read_mem(const uint8_t *data, size_t n, hkt_trace *out, char *err, size_t errn);
int hkt_read_file(const char *path, hkt_trace *out, char *err, size_t errn);
void hkt_free(hkt_trace *t);

/* A whole trace (header page, one closed chunk of thread `thread`) holding
 * the records [rec, rec + len), in memory from malloc; its size in *size.
 * NULL when out of memory. For tests and the fuzz target. */
uint8_t *hkt_wrap_records(const uint8_t *rec, size_t len, uint32_t thread, size_t *size);

/* The module holding a code address, or NULL. */
const hkt_module *hkt_find_module(const hkt_trace *t, uint64_t addr);

#endif /* HEAPKIT_TOOLS_TRACE_H */
