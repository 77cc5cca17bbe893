/*
 * src/hunk_internal.h - what the hunk's two files share (heapkit/hunk.h):
 * the block header, the instance, and small inline helpers. Not part of the
 * API. src/hunk.c allocates and frees; src/hunk_check.c reads (check, walk,
 * where, stats, dump) and is called by hunk.c only through the core's
 * paranoid hook.
 *
 * Layout of a block (all offsets multiples of 16):
 *
 *   [hunk_hdr 16][user bytes n][slack up to round16(n), at least 16 bytes]
 *   ^ start      ^ start + 16                   ^ start + 16 + round16(max(n, 1))
 *
 * and, for a block allocated with HK_FLAG_CANARY (header flag HUNK_F_CANARY):
 *
 *   [hunk_hdr 16][user bytes n][canary: 8..23 bytes of HK_FILL_PAD]
 *   ^ start      ^ start + 16                        ^ start + 16 + round16(n + 8)
 *
 * The flag is per block, so a walk knows each block's length from its own
 * header. Without the canary an overrun is caught (later) when it reaches
 * the next header's sentinel; the slack bytes are not written.
 *
 * A padding block (flag HUNK_F_PAD) is a header followed by `requested`
 * bytes of HK_FILL_PAD; it fills the gap that an alignment above 16 leaves
 * (below the block on the low end, above it on the high end), so that every
 * header sits right before its user bytes and the region stays a plain
 * sequence of headers.
 */
#ifndef HEAPKIT_HUNK_INTERNAL_H
#define HEAPKIT_HUNK_INTERNAL_H

#include "common.h"
#include "heapkit/hunk.h"

#include <string.h>

#define HUNK_SENTINEL   0x1df001edu /* "id fooled", as in Quake */
#define HUNK_NAME_LEN   HK_HUNK_NAME_MAX
#define HUNK_NAMES      HK_HUNK_NAMES
#define HUNK_NAME_OTHER (HUNK_NAMES - 1)
#define HUNK_ALIGN      16u
#define HUNK_HDR        16u
#define HUNK_MIN_CANARY 8u
#define HUNK_REQ_BITS   48
#define HUNK_MAX_REQ    (((uint64_t)1 << HUNK_REQ_BITS) - 64)
#define HUNK_F_HIGH     1u
#define HUNK_F_TEMP     2u
#define HUNK_F_PAD      4u
#define HUNK_F_CANARY   8u /* the block has a trailing canary (HK_FLAG_CANARY) */
#define HUNK_PAD64      0xFDFDFDFDFDFDFDFDull

typedef struct hunk_hdr {
    uint32_t sentinel;
    uint32_t seq;
    uint64_t word; /* requested (48 bits) | name index (12) << 48 | flags (4) << 60 */
} hunk_hdr;

_Static_assert(sizeof(hunk_hdr) == HUNK_HDR, "hunk header is 16 bytes");
_Static_assert(HUNK_NAMES <= 4096, "name index has 12 bits");

static inline uint64_t hunk_word(size_t req, uint32_t name, uint32_t flags) {
    return (uint64_t)req | ((uint64_t)name << 48) | ((uint64_t)flags << 60);
}
static inline size_t hunk_req(uint64_t w) { return (size_t)(w & (((uint64_t)1 << 48) - 1)); }
static inline uint32_t hunk_name_of(uint64_t w) { return (uint32_t)((w >> 48) & 0xfffu); }
static inline uint32_t hunk_flags_of(uint64_t w) { return (uint32_t)(w >> 60); }
/* Length of a block without canary: header and n bytes rounded up to 16,
 * at least 16 (a block of 0 bytes keeps a pointer of its own). */
static inline size_t hunk_plain_len(size_t n) { return HUNK_HDR + ((n + (n == 0) + 15) & ~(size_t)15); }
/* Length of a block with canary: at least HUNK_MIN_CANARY bytes after n. */
static inline size_t hunk_canary_len(size_t n) {
    return HUNK_HDR + ((n + HUNK_MIN_CANARY + 15) & ~(size_t)15);
}
/* Length of a block from its header fields (requested must be sane). */
static inline size_t hunk_len(size_t req, uint32_t flags) {
    if (flags & HUNK_F_PAD) return HUNK_HDR + req;
    return (flags & HUNK_F_CANARY) ? hunk_canary_len(req) : hunk_plain_len(req);
}

typedef struct hunk_end {
    size_t used;       /* bytes taken from this end */
    size_t user_bytes; /* sum of requested sizes */
    size_t blocks;     /* non-padding blocks */
    size_t last;       /* low end: offset of the last block's header */
} hunk_end;

typedef struct hunk_name_cache {
    const char *ptr;
    uint32_t idx;
    uint64_t mask[2]; /* the bytes of the name that must match: its text and NUL */
} hunk_name_cache;

/* The cuts of one end that a mark may need to know about (hunk.c, marks):
 * cut number (cuts[end] after it) and the end's used bytes after it, both
 * rising from the first entry to the last. A cut pops every entry whose
 * level is at or above its own, so entry i's level is the lowest of every
 * cut numbered above entry i - 1's. When full, the first entry is dropped
 * (its number and level kept in lost / lost_level, the lowest level dropped
 * in lost_floor); a later cut at or below lost_floor makes the dropped
 * entries irrelevant again. */
#define HUNK_CUT_LOG 8
typedef struct hunk_cut_log {
    uint32_t count[HUNK_CUT_LOG]; /* a ring: entry i at (head + i) % HUNK_CUT_LOG */
    size_t level[HUNK_CUT_LOG];
    uint32_t head, n;
    uint32_t lost;     /* the last dropped entry's number (lost_any) */
    size_t lost_level; /* its level */
    size_t lost_floor; /* the lowest level dropped */
    int lost_any;
} hunk_cut_log;
_Static_assert((HUNK_CUT_LOG & (HUNK_CUT_LOG - 1)) == 0, "the cut log is a ring of 2^k entries");

/* The mark stack of one end (hunk.c, marks): entry i is the level of the
 * (i + 1)-th distinct level at which a mark still valid was taken, from the
 * bottom: levels rising. An entry is its stamp (the end's push count then,
 * low 32 bits) | (level / 16, low 32 bits) << 32; a registered mark carries
 * its depth (i + 1) and stamp, and is valid exactly while entry i is still
 * the one it was given. `stamps` lives in address space reserved at create
 * for every level the end can hold (cap / 32 + 1; HUNK_MSTACK_MAX32 at most
 * on a 32-bit host), committed HUNK_MSTACK_CHUNK bytes at a time; a hunk
 * without that reservation (caller memory, or the OS refused it) uses
 * hk_hunk.mfixed instead: HUNK_MSTACK_FIXED entries per end, never grown
 * (room and mcap HUNK_MSTACK_FIXED), and keeps the cut log as well for the
 * marks past them. */
#define HUNK_MSTACK_CHUNK 16384u
#define HUNK_MSTACK_FIXED 32u    /* entries per end without a reservation: 512 bytes in hk_hunk */
#define HUNK_MSTACK_MAX32 65536u /* levels per end on a 32-bit host (512 KiB of address space) */
#define HUNK_MARK_STACKED 0x100u /* in hk_hunk_mark.end: seq is the depth, cuts the stamp */
typedef struct hunk_mark_stack {
    uint64_t *stamps; /* the reservation's, or hk_hunk.mfixed (never NULL once created) */
    size_t height;    /* entries in use */
    size_t room;      /* entries committed */
    size_t top;       /* level of entry height - 1; 0 when height is 0 */
    uint32_t pushes;  /* stamps handed out (wraps) */
    int full;         /* a chunk was refused: no commit is tried until a cut to an entry, or a reset */
} hunk_mark_stack;

static inline uint64_t hunk_mstack_entry(uint32_t stamp, size_t level) {
    return (uint64_t)stamp | ((uint64_t)(uint32_t)(level >> 4) << 32);
}

struct hk_hunk {
    unsigned char *base; /* 16-aligned start of the block area */
    size_t cap;          /* bytes of the block area (multiple of 16) */
    hunk_end low, high;
    uint64_t allocs; /* blocks ever allocated (their seq is the low 32 bits) */
    uint64_t frees;
    uint64_t fail_count;
    size_t peak_used; /* updated lazily: before every decrease, and by stats */
    int temp_active;
    hunk_end temp_mark;
    int slow;      /* lock hooks, zero/fill/canary flags, paranoid, a sanitizer, a tool (core.track) or a
                    * tenant: no fast path */
    void *os_base; /* the OS mapping to release, or NULL for caller memory */
    size_t os_size;
    hk__core core; /* names, reporter, lock hooks, flags, paranoid check */
    int slow_base; /* `slow` without the tenant */
    /* tenant (hk_hunk_set_tenant): a claim inside the free middle */
    hk_hunk_reclaim_fn tenant_fn;
    void *tenant_user;
    unsigned char *tenant_start;
    size_t tenant_size;
    uint32_t id;            /* instance id carried by marks (never 0, unique in the process) */
    uint32_t cuts[2];       /* per end (0 low, 1 high): frees to a mark that freed blocks, resets */
    hunk_cut_log cutlog[2]; /* kept only without a reservation (mres NULL) */
    hunk_mark_stack mstack[2];
    void *mres;       /* the mark stacks' reservation (low end's, then high end's), or NULL: mfixed */
    size_t mres_size; /* its bytes */
    size_t mcap;      /* entries reserved per end (HUNK_MSTACK_FIXED without a reservation) */
    uint64_t mfixed[2][HUNK_MSTACK_FIXED]; /* the mark stacks without a reservation */
    uint32_t nnames;
    hunk_name_cache name_cache[8];
    char names[HUNK_NAMES][HUNK_NAME_LEN];
};

static inline size_t hunk_total_used(const hk_hunk *h) { return h->low.used + h->high.used; }

static inline void hunk_note_peak(hk_hunk *h) {
    size_t u = hunk_total_used(h);
    if (u > h->peak_used) h->peak_used = u;
}

static inline size_t hunk_free_bytes(const hk_hunk *h) { return h->cap - hunk_total_used(h); }

/* The name with table index idx, NUL-terminated, into out. */
static inline void hunk_name_text(const hk_hunk *h, uint32_t idx, char out[HUNK_NAME_LEN + 1]) {
    if (idx >= h->nnames && idx != HUNK_NAME_OTHER) idx = 0;
    memcpy(out, h->names[idx], HUNK_NAME_LEN);
    out[HUNK_NAME_LEN] = 0;
}

/* Reads the header at `p` (which may be poisoned) into *out. */
static inline void hunk_read_hdr(const unsigned char *p, hunk_hdr *out) {
    hk__asan_unpoison(p, HUNK_HDR);
    memcpy(out, p, HUNK_HDR);
    hk__asan_poison(p, HUNK_HDR);
}

/* The full check (every sentinel, size, canary, count and the tenant's
 * claim) without the lock: the core's paranoid hook. */
hk_result hk__hunk_check(void *self);

#endif /* HEAPKIT_HUNK_INTERNAL_H */
