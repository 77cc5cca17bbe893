/*
 * heapkit/heapkit.h - the core of heapkit: results, statistics, block
 * descriptions, error reports, fill patterns, checked size arithmetic and the
 * host facts (page size, clock). Every allocator header includes this one.
 *
 * Conventions shared by every module (docs/architecture.md: the layers, what
 * each file owns and how a call flows from here to the OS):
 *
 *  - Allocation calls return NULL on failure; every other call that can fail
 *    returns an hk_result. HK_OK is zero; every error is negative.
 *  - Misuse (double free, foreign or interior pointer, stale ID or handle,
 *    damaged canary, exhausted memory) is reported through the instance's
 *    on_error hook as one hk_error, whose `message` is one human line naming
 *    the allocator, the address, the block and what was wrong. The instance
 *    stays consistent: its check() passes afterwards.
 *  - Each allocator offers stats (O(1)), walk (every block) and check (every
 *    invariant). Tools use only these.
 *  - Thread-safety: unless a header says otherwise, an instance is not
 *    thread-safe; a desc may carry lock hooks (hk_lock_hooks) which the
 *    instance then calls around every public operation. The functions in this
 *    header are thread-safe unless noted.
 */
#ifndef HEAPKIT_HEAPKIT_H
#define HEAPKIT_HEAPKIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Everything declared between HK_API_BEGIN and HK_API_END in the public
 * headers is the library's ABI: exported from libheapkit.so, which is built
 * with every other symbol hidden. */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(_WIN32)
#define HK_API_BEGIN _Pragma("GCC visibility push(default)")
#define HK_API_END   _Pragma("GCC visibility pop")
#else
#define HK_API_BEGIN
#define HK_API_END
#endif

#ifdef __cplusplus
extern "C" {
#endif
HK_API_BEGIN

#define HK_VERSION_MAJOR 0
#define HK_VERSION_MINOR 1
#define HK_VERSION_PATCH 0
#define HK_VERSION       ((HK_VERSION_MAJOR * 10000) + (HK_VERSION_MINOR * 100) + HK_VERSION_PATCH)

/* Returns HK_VERSION of the compiled library (compare with the header's). */
int hk_version(void);

/* Attributes on allocating functions, so compilers and sanitizers know what
 * they return: HK_MALLOC (a fresh block that aliases nothing),
 * HK_ALLOC_SIZE(i) / HK_ALLOC_SIZE2(i, j) (argument i, or i * j, is its
 * size), HK_ALLOC_ALIGN(i) (argument i is its alignment). Empty where the
 * compiler lacks them. */
#if defined(__GNUC__) || defined(__clang__)
#define HK_MALLOC            __attribute__((malloc))
#define HK_ALLOC_SIZE(i)     __attribute__((alloc_size(i)))
#define HK_ALLOC_SIZE2(i, j) __attribute__((alloc_size(i, j)))
#define HK_ALLOC_ALIGN(i)    __attribute__((alloc_align(i)))
#else
#define HK_MALLOC
#define HK_ALLOC_SIZE(i)
#define HK_ALLOC_SIZE2(i, j)
#define HK_ALLOC_ALIGN(i)
#endif

/* ------------------------------------------------------------------------ */
/* Results                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum hk_result {
    HK_OK = 0,
    HK_ERR_INVALID = -1,     /* bad argument: NULL where an object is needed, bad alignment, bad mark */
    HK_ERR_NOMEM = -2,       /* the request cannot be met with the memory the instance may use */
    HK_ERR_CORRUPT = -3,     /* an invariant is broken: damaged header, sentinel or canary */
    HK_ERR_STALE = -4,       /* an ID or handle that was valid once and is no longer */
    HK_ERR_FOREIGN = -5,     /* a pointer, ID or handle that belongs to another instance or none */
    HK_ERR_DOUBLE_FREE = -6, /* the block was already free */
    HK_ERR_LOCKED = -7,      /* the block is locked (pinned) and the operation needs it unlocked */
    HK_ERR_OVERFLOW = -8,    /* size arithmetic would overflow */
    HK_ERR_UNSUPPORTED = -9, /* the operation is not available in this configuration or platform */
    HK_ERR_STATE = -10       /* the call is not allowed in the instance's current state */
} hk_result;

/* Short, constant, English description of a result ("ok", "out of memory", ...).
 * Never returns NULL; unknown values give "unknown result". O(1). */
const char *hk_result_str(hk_result r);

/* ------------------------------------------------------------------------ */
/* Statistics                                                                */
/* ------------------------------------------------------------------------ */

#define HK_STATS_VERSION 1

/* Filled by every allocator's stats call in O(1). Versioned: the call sets
 * `size` to sizeof(hk_stats) and `version` to HK_STATS_VERSION, so a tool
 * built against an older header can tell which fields are valid. Fields an
 * allocator has no meaning for are zero. Byte counts are in bytes. */
typedef struct hk_stats {
    uint32_t size;            /* sizeof(hk_stats) as known to the library */
    uint32_t version;         /* HK_STATS_VERSION */
    const char *allocator;    /* "hunk", "zone", "cache", "pool", "gc", "guard" */
    size_t capacity;          /* bytes the instance manages (all regions) */
    size_t used;              /* bytes handed out to the user (requested sizes) */
    size_t used_blocks_bytes; /* bytes taken by used blocks, headers and padding included */
    size_t free;              /* bytes available for allocation */
    size_t largest_free;      /* largest single allocation that would succeed now (0 if unknown) */
    size_t peak_used;         /* high-water mark of `used` */
    size_t overhead;          /* bytes of metadata (headers, canaries, tables) */
    size_t live_blocks;       /* blocks currently allocated */
    size_t free_blocks;       /* free blocks (fragments) */
    uint64_t alloc_count;     /* successful allocations since creation */
    uint64_t free_count;      /* blocks freed since creation (purges included) */
    uint64_t fail_count;      /* allocations that returned NULL */
    uint64_t error_count;     /* misuse reports delivered through on_error */
} hk_stats;

/* ------------------------------------------------------------------------ */
/* Block description and walking                                             */
/* ------------------------------------------------------------------------ */

enum {
    HK_BLOCK_USED = 1u << 0,        /* allocated (otherwise free space) */
    HK_BLOCK_HIGH = 1u << 1,        /* hunk: allocated from the high end */
    HK_BLOCK_TEMP = 1u << 2,        /* hunk: the temp block */
    HK_BLOCK_LOCKED = 1u << 3,      /* cache: pinned (lock count > 0) */
    HK_BLOCK_PURGEABLE = 1u << 4,   /* zone, cache: may be purged */
    HK_BLOCK_PURGED = 1u << 5,      /* cache: handle whose block was purged (address NULL) */
    HK_BLOCK_QUARANTINED = 1u << 6, /* guard: freed and kept inaccessible */
    HK_BLOCK_OVERFLOW = 1u << 7,    /* pool: object lives on the overflow path */
    HK_BLOCK_GUARDED = 1u << 8      /* guard: block sits between guard pages */
};

/* One block as an allocator's walk reports it. Pointers are valid only
 * during the callback. */
typedef struct hk_block_info {
    void *address;         /* user address (NULL for a purged cache handle) */
    size_t size;           /* usable bytes of the block */
    size_t requested;      /* bytes the user asked for (0 when unknown) */
    size_t overhead;       /* header + padding + canary bytes of this block */
    uint32_t flags;        /* HK_BLOCK_* */
    int32_t tag;           /* zone tag; 0 elsewhere */
    uint32_t id;           /* pool ID or cache handle value; 0 when none */
    uint32_t lock_count;   /* cache lock count */
    uint32_t rank;         /* cache LRU rank (0 = most recently used) */
    void *owner;           /* zone owner pointer (void**), cache purge owner */
    const char *name;      /* name given at allocation, or NULL */
    const char *site_file; /* allocation site when recorded, or NULL */
    int site_line;         /* allocation site line, or 0 */
} hk_block_info;

/* Walk callback: called once per block in address order where the
 * allocator has one. Return 0 to continue, non-zero to stop the walk (the
 * walk call then returns that value). The callback must not allocate from
 * or free into the instance being walked. */
typedef int (*hk_walk_fn)(const hk_block_info *info, void *user);

/* ------------------------------------------------------------------------ */
/* Error reports                                                             */
/* ------------------------------------------------------------------------ */

typedef enum hk_error_kind {
    HK_EK_NONE = 0,
    HK_EK_NOMEM,             /* allocation could not be met */
    HK_EK_INVALID_ARG,       /* bad argument (alignment, mark, flags) */
    HK_EK_OVERFLOW,          /* size arithmetic overflow */
    HK_EK_DOUBLE_FREE,       /* block already free */
    HK_EK_FOREIGN_PTR,       /* pointer not from this instance */
    HK_EK_INTERIOR_PTR,      /* pointer inside a block, not its start */
    HK_EK_STALE,             /* stale ID or handle */
    HK_EK_CORRUPT_HEADER,    /* damaged header / sentinel / boundary tag */
    HK_EK_CORRUPT_CANARY,    /* damaged canary or padding fill */
    HK_EK_CORRUPT_FREE,      /* freed memory written after free (fill pattern damaged) */
    HK_EK_CORRUPT_STRUCTURE, /* list, bitmap or table inconsistent */
    HK_EK_LOCKED,            /* operation on a locked block */
    HK_EK_STATE,             /* call not allowed now (e.g. unlock of an unlocked block) */
    HK_EK_HEAP_OVERFLOW,     /* guard: access past the end of a block */
    HK_EK_HEAP_UNDERFLOW,    /* guard: access before the start of a block */
    HK_EK_USE_AFTER_FREE,    /* guard: access to a freed block */
    HK_EK_LEAK,              /* block still live at exit */
    HK_EK_COUNT
} hk_error_kind;

/* Name of an error kind ("double free", "heap overflow", ...). Never NULL. */
const char *hk_error_kind_str(hk_error_kind kind);

/* One misuse report. All pointers are valid only during the callback. */
typedef struct hk_error {
    hk_result result; /* what the failing call returns */
    hk_error_kind kind;
    const char *allocator;  /* "hunk", "zone", ... */
    const char *instance;   /* the instance's name from its desc, or NULL */
    const void *address;    /* the address (or ID/handle value cast) concerned */
    size_t size;            /* request size or block size, when meaningful */
    const char *block_name; /* name of the block concerned, or NULL */
    const char *message;    /* the whole report as one line, no trailing newline */
} hk_error;

typedef void (*hk_error_fn)(const hk_error *err, void *user);

/* The handler used by instances whose desc has no on_error: by default it
 * prints `message` to stderr prefixed with "heapkit: ". Setting NULL restores
 * that default. Not thread-safe with concurrent reports; set it at start-up. */
void hk_set_default_error_handler(hk_error_fn fn, void *user);

/* ------------------------------------------------------------------------ */
/* Text output                                                               */
/* ------------------------------------------------------------------------ */

/* Every dump takes one of these: it receives the text in pieces (each a
 * NUL-terminated string, usually one or more whole lines) in order. */
typedef void (*hk_print_fn)(const char *text, void *user);

/* An hk_print_fn that writes to the C stdio stream `user` (a FILE *; NULL
 * means stdout), e.g. hk_zone_dump(z, hk_print_file, stderr). */
void hk_print_file(const char *text, void *user);

/* ------------------------------------------------------------------------ */
/* Lock hooks                                                                */
/* ------------------------------------------------------------------------ */

/* An instance whose desc carries lock hooks calls lock() on entry to every
 * public operation and unlock() on exit, so one instance can be shared by
 * threads. Both must be set, or neither. */
typedef struct hk_lock_hooks {
    void (*lock)(void *user);
    void (*unlock)(void *user);
    void *user;
} hk_lock_hooks;

/* Backing memory for allocators that take memory from another allocator
 * (pool overflow, gc objects): alloc returns NULL on failure; free receives
 * the size given to alloc. Both must be set, or neither (the C library's
 * malloc and free). */
typedef struct hk_alloc_hooks {
    void *(*alloc)(size_t size, void *user);
    void (*free)(void *ptr, size_t size, void *user);
    void *user;
} hk_alloc_hooks;

/* ------------------------------------------------------------------------ */
/* Debug flags and fill patterns                                             */
/* ------------------------------------------------------------------------ */

/* Desc flags understood by every allocator that has the feature. */
enum {
    HK_FLAG_ZERO = 1u << 0,        /* zero every new allocation */
    HK_FLAG_FILL = 1u << 1,        /* fill new memory with HK_FILL_ALLOC, freed with HK_FILL_FREE */
    HK_FLAG_CANARY = 1u << 2,      /* trailing canary after each block, checked on free and by check */
    HK_FLAG_PARANOID = 1u << 3,    /* run the full check after every operation (slow) */
    HK_FLAG_RECORD_SITE = 1u << 4, /* keep the allocation site (file, line) of each block */
    HK_FLAG_QUIET = 1u << 5        /* do not call the default error handler (on_error still called) */
};

/* Compile-time debug level: 0 none, 1 cheap API checks (default), 2 internal
 * asserts, 3 full check after every operation. */
#ifndef HK_DEBUG
#define HK_DEBUG 1
#endif

#define HK_FILL_ALLOC   0xCDu /* fresh, never-written memory */
#define HK_FILL_FREE    0xDDu /* freed memory */
#define HK_FILL_PAD     0xFDu /* padding and canary bytes ("no man's land") */
#define HK_CANARY_BYTES 8u    /* size of a trailing canary */

/* Fill n bytes at p with byte b (memset with the pattern's intent). */
void hk_fill(void *p, size_t n, unsigned b);

/* Returns the offset of the first byte in [p, p+n) that differs from b, or
 * n when all bytes equal b. O(n). */
size_t hk_fill_check(const void *p, size_t n, unsigned b);

/* ------------------------------------------------------------------------ */
/* Checked size arithmetic                                                   */
/* ------------------------------------------------------------------------ */

/* Each returns true and stores the result when it fits in size_t, false
 * (leaving *out untouched) when it would overflow. */
static inline bool hk_size_add(size_t a, size_t b, size_t *out) {
    if (a > SIZE_MAX - b) return false;
    *out = a + b;
    return true;
}
static inline bool hk_size_mul(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return false;
    *out = a * b;
    return true;
}
static inline bool hk_is_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }
/* Rounds n up to a multiple of align (a power of two). */
static inline bool hk_size_align(size_t n, size_t align, size_t *out) {
    size_t r;
    if (!hk_is_pow2(align) || !hk_size_add(n, align - 1, &r)) return false;
    *out = r & ~(align - 1);
    return true;
}
static inline uintptr_t hk_align_ptr(uintptr_t p, size_t align) {
    return (p + (align - 1)) & ~(uintptr_t)(align - 1);
}

/* ------------------------------------------------------------------------ */
/* Host facts                                                                */
/* ------------------------------------------------------------------------ */
/* heapkit's host layer (pages, protection, stack capture, faults) is
 * private; these are the parts of it a program may need. */

/* The system's page size in bytes: a power of two, cached after the first
 * call. Thread-safe, O(1). */
size_t hk_page_size(void);

/* A monotonic clock in nanoseconds (the gc's default clock). Thread-safe,
 * O(1). */
uint64_t hk_now_ns(void);

HK_API_END

#ifdef __cplusplus
}
#endif

#endif /* HEAPKIT_HEAPKIT_H */
