/*
 * src/guard.c - the guard heap: every block on its own pages between
 * inaccessible guard pages, a FIFO quarantine of freed pages, fill patterns,
 * stack traces, fault reports and leak detection. See heapkit/guard.h.
 *
 * Address space: ONE reservation ("arena") carved, from its start, into
 * slots. A slot is one guard page followed by `pages` data pages:
 *
 *   arena: [G|D D][G|D][G|D D D][G|D] ... bump ... (never carved, inaccessible)
 *
 * The guard page of the next slot (or the uncarved space) is the trailing
 * guard of the one before it, so a block with k data pages costs k + 1
 * pages of address space.
 *
 * Invariants (verified by hk_guard_check):
 *  - slots tile [arena, arena + bump) with no gap; pagemap[i] is the id of
 *    the slot holding arena page i (its guard page included) for every
 *    page below bump; ids are never reused for another range.
 *  - a slot is LIVE (data pages read/write, user block at data + user_off,
 *    requested bytes, the rest of the data pages HK_FILL_PAD), QUAR (freed,
 *    data pages inaccessible, on the quarantine FIFO) or FREE (evicted,
 *    pages decommitted and inaccessible, on bins[pages] or the large list).
 *    Guard pages are always inaccessible.
 *  - every slot record's `sum` is the checksum of its other fields keyed by
 *    the instance secret: a stray write into the metadata is detected on
 *    the next use of the record.
 *  - live_guarded / used_guarded / q_blocks / q_bytes equal the sums over the
 *    slots in those states; q_bytes <= quarantine_bytes and q_blocks <=
 *    quarantine_blocks after every free.
 *  - live_guarded <= max_guarded, so the process's mapping count stays under
 *    vm.max_map_count: a live slot is two mappings (RW data + the NONE run
 *    after it); QUAR/FREE slots are NONE like the guards and merge with them.
 *
 * Unguarded blocks (sampling, over the cap, huge alignments, reentrant calls
 * from the preload) come from the backing allocator behind a 16-byte header
 * {size, offset to the raw pointer, magic keyed by the address} and are
 * followed by an 8-byte HK_FILL_PAD canary, checked on free.
 *
 * Locking: one mutex (or the desc hooks) around every state change; the
 * unguarded path takes no lock (its counters are atomic). The fault handler
 * reads the metadata without the lock: it only runs when the program is
 * about to die.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "heapkit/guard.h"
#include "guard_internal.h"
#include "internal.h"

#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_STATE_LIVE    1u
#define GUARD_STATE_QUAR    2u
#define GUARD_STATE_FREE    3u
#define GUARD_SLOT_RESIDENT 1u
#define GUARD_SLOT_OWN      2u /* the data pages are a kernel mapping of their own (see hk__guard_os_map_own) */
#define GUARD_SLOT_PADDED                                                                                    \
    4u /* resident pages hold HK_FILL_PAD everywhere but [user_off, user_off + requested) */
#define GUARD_RESIDENT_POOL ((size_t)16 << 20) /* evicted pages kept for reuse without a page fault */
#define GUARD_BINS          64
#define GUARD_FB_HDR        16u
#define GUARD_FB_CANARY     8u
#define GUARD_FB_MAGIC      0x6b680a11u
#define GUARD_FB_DEAD       0x6b68deadu
#define GUARD_TRACE_BUCKETS (1u << 16)
#define GUARD_TRACE_RESERVE ((size_t)64 << 20)
#define GUARD_COMMIT_CHUNK  ((size_t)1 << 20)
#define GUARD_MAX_INSTANCES 8
#define GUARD_REPORT_CAP    (1u << 16)
#define GUARD_SCAN_WHOLE    ((uintptr_t)1 << 30) /* roots larger than this: resident pages only */
#define GUARD_SCAN_STEP     ((uintptr_t)64 << 20)

typedef struct guard_slot { /* 40 bytes: per live block, this and 8 bytes of page map */
    size_t requested;       /* bytes asked for (LIVE, QUAR; kept while FREE for reports) */
    uint32_t base_page;     /* arena page index of the slot's leading guard page */
    uint32_t pages;         /* data pages after the guard */
    uint32_t user_off;      /* user pointer - first data page */
    uint32_t next;          /* free-list / quarantine link (slot id, 0 = none) */
    uint32_t alloc_trace, free_trace;
    uint16_t state;  /* GUARD_STATE_* */
    uint16_t sflags; /* GUARD_SLOT_RESIDENT: the data pages hold memory (inaccessible unless LIVE);
                        GUARD_SLOT_OWN: they are a mapping of their own */
    uint32_t sum;    /* keyed checksum of the fields above */
} guard_slot;
_Static_assert(sizeof(guard_slot) == 40, "slot records are 40 bytes");

typedef struct guard_trace_hdr {
    uint32_t next; /* hash chain (trace id) */
    uint32_t hash;
    uint32_t depth;
    uint32_t pad;
} guard_trace_hdr;

typedef struct guard_fb_hdr {
    uint64_t size;
    uint32_t off;   /* user - raw */
    uint32_t magic; /* GUARD_FB_MAGIC ^ address bits (live) or GUARD_FB_DEAD ^ address bits (freed) */
} guard_fb_hdr;

typedef struct guard_region { /* a metadata reservation committed from its start */
    unsigned char *base;      /* reservation start (its first page is never committed) */
    size_t size;              /* reserved bytes */
    size_t committed;         /* bytes committed after the first page */
} guard_region;

struct hk_guard {
    /* configuration */
    uint32_t flags;
    hk_guard_side side;
    size_t align, page;
    size_t q_max_bytes, q_max_blocks;
    uint32_t sample_rate;
    size_t max_guarded;
    int frames, report_fd, skip;
    hk_guard_backing backing;
    uint64_t rng, secret;
    /* address space */
    unsigned char *arena;
    size_t arena_size, bump;
    /* metadata */
    guard_region slot_reg, map_reg, trace_reg, bucket_reg;
    guard_slot *slots; /* slots[0] unused */
    uint32_t nslots;   /* ids handed out so far (including 0) */
    uint32_t *pagemap;
    uint32_t bins[GUARD_BINS + 1];
    uint32_t large;
    uint32_t q_head, q_tail;
    size_t q_blocks, q_bytes;
    size_t resident_free;  /* data bytes of FREE slots whose pages are kept resident */
    size_t n_own, own_max; /* slots whose data pages are a mapping of their own, and the cap */
    size_t live_shared;    /* LIVE slots without a mapping of their own */
    size_t trace_stride;
    uint32_t ntraces;
    uint32_t *buckets;
    /* counters (guarded path, under the lock) */
    size_t live_guarded, used_guarded, peak_used;
    uint64_t alloc_count, free_count, fail_count, over_cap;
    /* counters (unguarded path, atomic) */
    uint32_t ctr; /* index in guard_ctrs (unguarded-path counters) */
    uint64_t ctr_gen;
    uint64_t reports;
    hk__reporter rep;
    hk_lock_hooks lock;
    pthread_mutex_t mutex;
    int registered;
    size_t self_size;
};

/* ---- process-wide state ------------------------------------------------------ */

static hk_guard *guard_instances[GUARD_MAX_INSTANCES];
static unsigned char guard_own_marker; /* its address tells which module we are */
static uintptr_t guard_own_base, guard_main_base;
static int guard_report_busy;
static char guard_report_buf[GUARD_REPORT_CAP];

/* Unguarded-path counters. Atomic read-modify-writes on every malloc/free
 * would cost more than the rest of that path, so each thread batches its
 * deltas (up to GUARD_TL_BATCH operations) and adds them to the instance's
 * counters in one go; stats() flushes the calling thread's batch and a
 * thread's exit flushes its own. The counters live in a static table, not
 * in the instance, so a late flush after hk_guard_destroy is harmless (the
 * generation no longer matches and the deltas are dropped). */
#define GUARD_MAX_CTRS 64
#define GUARD_TL_BATCH 64
typedef struct guard_ctr {
    uint64_t gen; /* 0: unused */
    size_t live, used;
    uint64_t allocs, frees;
    char pad[24];
} guard_ctr;
static guard_ctr guard_ctrs[GUARD_MAX_CTRS];
static uint64_t guard_ctr_gen;
typedef struct guard_tl_batch {
    uint32_t idx;
    uint64_t gen;
    int64_t live, used;
    uint64_t allocs, frees;
    uint32_t ops;
} guard_tl_batch;
static _Thread_local guard_tl_batch guard_tl_b __attribute__((tls_model("initial-exec")));
static pthread_key_t guard_tl_key;
static pthread_once_t guard_tl_once = PTHREAD_ONCE_INIT;

static _Thread_local uint32_t guard_tl_countdown __attribute__((tls_model("initial-exec")));
static _Thread_local uint64_t guard_tl_sample_gen __attribute__((tls_model("initial-exec")));
static _Thread_local uint64_t guard_tl_rng __attribute__((tls_model("initial-exec")));

/* ---- small helpers -------------------------------------------------------------- */

static void guard_tl_flush(void) {
    guard_tl_batch *b = &guard_tl_b;
    if (b->ops && b->gen && __atomic_load_n(&guard_ctrs[b->idx].gen, __ATOMIC_RELAXED) == b->gen) {
        guard_ctr *c = &guard_ctrs[b->idx];
        __atomic_add_fetch(&c->live, (size_t)b->live, __ATOMIC_RELAXED);
        __atomic_add_fetch(&c->used, (size_t)b->used, __ATOMIC_RELAXED);
        __atomic_add_fetch(&c->allocs, b->allocs, __ATOMIC_RELAXED);
        __atomic_add_fetch(&c->frees, b->frees, __ATOMIC_RELAXED);
    }
    b->live = b->used = 0;
    b->allocs = b->frees = 0;
    b->ops = 0;
}
static void guard_tl_exit(void *arg) {
    (void)arg;
    guard_tl_flush();
}
static void guard_tl_key_init(void) { (void)pthread_key_create(&guard_tl_key, guard_tl_exit); }

static inline void guard_count(const hk_guard *g, int64_t live, int64_t used, int alloc) {
    guard_tl_batch *b = &guard_tl_b;
    if (HK__UNLIKELY(b->gen != g->ctr_gen || b->idx != g->ctr)) {
        guard_tl_flush();
        if (b->gen == 0) (void)pthread_setspecific(guard_tl_key, &guard_tl_b); /* first use in this thread */
        b->idx = g->ctr;
        b->gen = g->ctr_gen;
    }
    b->live += live;
    b->used += used;
    if (alloc > 0)
        b->allocs++;
    else if (alloc < 0)
        b->frees++;
    if (++b->ops >= GUARD_TL_BATCH) guard_tl_flush();
}

static void guard_lock(hk_guard *g) {
    if (g->lock.lock)
        g->lock.lock(g->lock.user);
    else
        pthread_mutex_lock(&g->mutex);
}
static void guard_unlock(hk_guard *g) {
    if (g->lock.unlock)
        g->lock.unlock(g->lock.user);
    else
        pthread_mutex_unlock(&g->mutex);
}

static uint64_t guard_mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static uint64_t guard_rand(uint64_t *s) {
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static uint32_t guard_slot_hash(const hk_guard *g, const guard_slot *s) {
    uint64_t h = g->secret;
    h = guard_mix(h ^ ((uint64_t)s->base_page << 32 | s->pages));
    h = guard_mix(h ^ (uint64_t)s->requested);
    h = guard_mix(h ^ ((uint64_t)s->user_off << 32 | s->next));
    h = guard_mix(h ^ ((uint64_t)s->alloc_trace << 32 | s->free_trace));
    h = guard_mix(h ^ ((uint64_t)s->sflags << 16 | s->state));
    return (uint32_t)(h ^ (h >> 32));
}
static void guard_seal(const hk_guard *g, guard_slot *s) { s->sum = guard_slot_hash(g, s); }
static bool guard_slot_ok(const hk_guard *g, const guard_slot *s) { return s->sum == guard_slot_hash(g, s); }

static inline bool guard_in_arena(const hk_guard *g, const void *p) {
    return (uintptr_t)p - (uintptr_t)g->arena < g->arena_size;
}
static inline uintptr_t guard_base(const hk_guard *g, const guard_slot *s) {
    return (uintptr_t)g->arena + (uintptr_t)s->base_page * g->page;
}
static inline uintptr_t guard_data(const hk_guard *g, const guard_slot *s) {
    return guard_base(g, s) + g->page;
}
static inline uintptr_t guard_user(const hk_guard *g, const guard_slot *s) {
    return guard_data(g, s) + s->user_off;
}
static inline size_t guard_data_bytes(const hk_guard *g, const guard_slot *s) {
    return (size_t)s->pages * g->page;
}

/* Slot id of the arena page holding p, 0 when none (not carved yet). */
static uint32_t guard_slot_of(const hk_guard *g, const void *p) {
    if (!guard_in_arena(g, p)) return 0;
    size_t off = (size_t)((uintptr_t)p - (uintptr_t)g->arena);
    if (off >= g->bump) return 0;
    return g->pagemap[off / g->page];
}

/* ---- metadata regions ----------------------------------------------------------- */

static bool guard_region_init(guard_region *r, size_t bytes, size_t page) {
    size_t sz;
    if (!hk_size_add(bytes, 2 * page, &sz) || !hk_size_align(sz, page, &sz)) return false;
    r->base = (unsigned char *)hk_os_reserve(sz);
    if (!r->base) return false;
    r->size = sz;
    r->committed = 0;
    return true;
}
static void guard_region_free(guard_region *r) {
    if (r->base) hk_os_release(r->base, r->size);
    r->base = NULL;
}
static inline unsigned char *guard_region_data(const guard_region *r, size_t page) { return r->base + page; }
/* Makes the first `need` bytes after the leading guard page usable. */
static bool guard_region_ensure(guard_region *r, size_t need, size_t page) {
    if (need <= r->committed) return true;
    size_t want;
    if (!hk_size_align(need, GUARD_COMMIT_CHUNK, &want)) return false;
    if (want > r->size - 2 * page) want = r->size - 2 * page;
    if (want < need) return false;
    if (hk_os_commit(guard_region_data(r, page) + r->committed, want - r->committed) != HK_OK) return false;
    r->committed = want;
    return true;
}

/* ---- output formatting (async-signal-safe: no stdio, no malloc) ----------------- */

typedef struct guard_out {
    char *buf;
    size_t n, cap;
} guard_out;

static void guard_out_mem(guard_out *o, const char *s, size_t n) {
    if (o->n + n >= o->cap) n = o->cap > o->n + 1 ? o->cap - o->n - 1 : 0;
    memcpy(o->buf + o->n, s, n);
    o->n += n;
    o->buf[o->n] = 0;
}
static void guard_out_str(guard_out *o, const char *s) {
    guard_out_mem(o, s ? s : "(null)", strlen(s ? s : "(null)"));
}
static void guard_out_dec(guard_out *o, uint64_t v) {
    char t[24];
    int k = 0;
    do {
        t[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    char r[24];
    for (int i = 0; i < k; i++) r[i] = t[k - 1 - i];
    guard_out_mem(o, r, (size_t)k);
}
static void guard_out_sdec(guard_out *o, int64_t v) {
    if (v < 0) {
        guard_out_str(o, "-");
        guard_out_dec(o, (uint64_t)0 - (uint64_t)v);
    } else {
        guard_out_str(o, "+");
        guard_out_dec(o, (uint64_t)v);
    }
}
static void guard_out_hex(guard_out *o, uint64_t v) {
    char t[20];
    int k = 0;
    do {
        unsigned d = (unsigned)(v & 15u);
        t[k++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
        v >>= 4;
    } while (v);
    char r[20];
    r[0] = '0';
    r[1] = 'x';
    for (int i = 0; i < k; i++) r[2 + i] = t[k - 1 - i];
    guard_out_mem(o, r, (size_t)k + 2);
}
static void guard_out_ptr(guard_out *o, const void *p) { guard_out_hex(o, (uint64_t)(uintptr_t)p); }

/* ---- symbolization --------------------------------------------------------------- */

#define GUARD_SYM_MAX (3 * (HK_GUARD_MAX_FRAMES + 24))
typedef struct guard_sym {
    uintptr_t pc;       /* as recorded */
    uintptr_t lookup;   /* address given to addr2line */
    const char *module; /* dli_fname */
    uintptr_t base;
    const char *sname;
    uintptr_t saddr;
    char func[160];
    char loc[224];
} guard_sym;
static guard_sym guard_syms[GUARD_SYM_MAX];
static int guard_nsyms;
static char guard_a2l_out[1 << 15];

static int guard_sym_add(uintptr_t pc, int is_return_address) {
    if (guard_nsyms >= GUARD_SYM_MAX) return -1;
    guard_sym *s = &guard_syms[guard_nsyms];
    memset(s, 0, sizeof *s);
    s->pc = pc;
    Dl_info info;
    if (dladdr((void *)pc, &info)) {
        s->module = info.dli_fname;
        s->base = (uintptr_t)info.dli_fbase;
        s->sname = info.dli_sname;
        s->saddr = (uintptr_t)info.dli_saddr;
        uintptr_t a = is_return_address ? pc - 1 : pc;
        /* ET_EXEC modules want absolute addresses, ET_DYN ones offsets. */
        uint16_t e_type = 3;
        if (s->base) memcpy(&e_type, (const void *)(s->base + 16), sizeof e_type);
        s->lookup = e_type == 2 ? a : a - s->base;
    }
    return guard_nsyms++;
}

/* Runs addr2line once per module over every recorded frame. */
static void guard_sym_resolve(int use_addr2line) {
    const char *tool = use_addr2line ? hk__guard_os_addr2line_path() : "";
    if (!tool || !tool[0]) return;
    static char done[GUARD_SYM_MAX];
    memset(done, 0, sizeof done);
    for (int i = 0; i < guard_nsyms; i++) {
        if (done[i] || !guard_syms[i].module || !guard_syms[i].module[0]) continue;
        uintptr_t addrs[128];
        int idx[128];
        int n = 0;
        for (int j = i; j < guard_nsyms && n < 128; j++) {
            if (done[j] || !guard_syms[j].module || strcmp(guard_syms[j].module, guard_syms[i].module) != 0)
                continue;
            done[j] = 1;
            idx[n] = j;
            addrs[n++] = guard_syms[j].lookup;
        }
        long got =
            hk__guard_os_addr2line(tool, guard_syms[i].module, addrs, n, guard_a2l_out, sizeof guard_a2l_out);
        if (got <= 0) continue;
        char *p = guard_a2l_out;
        for (int k = 0; k < n && *p; k++) {
            char *l1 = p;
            char *e1 = strchr(l1, '\n');
            if (!e1) break;
            *e1 = 0;
            char *l2 = e1 + 1;
            char *e2 = strchr(l2, '\n');
            if (!e2) break;
            *e2 = 0;
            p = e2 + 1;
            guard_sym *s = &guard_syms[idx[k]];
            if (strcmp(l1, "??") != 0) {
                size_t m = strlen(l1);
                if (m >= sizeof s->func) m = sizeof s->func - 1;
                memcpy(s->func, l1, m);
                s->func[m] = 0;
            }
            if (l2[0] != '?' || l2[1] != '?') {
                /* strip " (discriminator N)" */
                char *d = strstr(l2, " (discriminator");
                if (d) *d = 0;
                size_t m = strlen(l2);
                if (m >= sizeof s->loc) m = sizeof s->loc - 1;
                memcpy(s->loc, l2, m);
                s->loc[m] = 0;
            }
        }
    }
}

static void guard_sym_print(guard_out *o, int first, int count) {
    for (int i = 0; i < count; i++) {
        const guard_sym *s = &guard_syms[first + i];
        guard_out_str(o, "    #");
        guard_out_dec(o, (uint64_t)i);
        guard_out_str(o, " ");
        guard_out_hex(o, s->pc);
        guard_out_str(o, " in ");
        if (s->func[0])
            guard_out_str(o, s->func);
        else if (s->sname) {
            guard_out_str(o, s->sname);
            guard_out_str(o, "+");
            guard_out_hex(o, s->pc - s->saddr);
        } else
            guard_out_str(o, "???");
        if (s->loc[0]) {
            guard_out_str(o, " at ");
            guard_out_str(o, s->loc);
        }
        if (s->module) {
            const char *b = strrchr(s->module, '/');
            guard_out_str(o, " (");
            guard_out_str(o, b ? b + 1 : s->module);
            guard_out_str(o, "+");
            guard_out_hex(o, s->pc - s->base);
            guard_out_str(o, ")");
        }
        guard_out_str(o, "\n");
    }
}

/* Adds a stack to the symbol table; leading frames inside this library are
 * dropped when the library is a shared object of its own (the preload).
 * Returns the first index; *count gets the number added. */
static int guard_sym_stack(void *const *frames, int n, int fault_first, int *count) {
    int first = guard_nsyms;
    int i = 0;
    if (guard_own_base && guard_own_base != guard_main_base) {
        while (i < n - 1) {
            Dl_info info;
            if (!dladdr(frames[i], &info) || (uintptr_t)info.dli_fbase != guard_own_base) break;
            i++;
        }
    }
    for (; i < n; i++)
        if (guard_sym_add((uintptr_t)frames[i], !(fault_first && i == 0)) < 0) break;
    *count = guard_nsyms - first;
    return first;
}

/* ---- traces ------------------------------------------------------------------------ */

static HK__NOINLINE int guard_capture(const hk_guard *g, void **frames) {
    if (g->flags & HK_GUARD_NO_TRACES) return 0;
    /* skip: this function and the public entry point that called it */
    int n = (g->flags & HK_GUARD_EXACT_STACKS) ? hk_os_stack_capture(frames, g->frames, 2 + g->skip)
                                               : hk__guard_os_stack(frames, g->frames, 2 + g->skip);
    __asm__ volatile("" ::: "memory"); /* no tail call: the skip counts this frame */
    return n;
}

static const void *const *guard_trace_get(const hk_guard *g, uint32_t id, int *n) {
    *n = 0;
    if (id == 0 || id > g->ntraces) return NULL;
    const unsigned char *rec = guard_region_data(&g->trace_reg, g->page) + (size_t)(id - 1) * g->trace_stride;
    const guard_trace_hdr *h = (const guard_trace_hdr *)(const void *)rec;
    *n = (int)h->depth;
    return (const void *const *)(const void *)(rec + sizeof *h);
}

/* Interns a stack (under the lock). 0 when none or the depot is full. */
static uint32_t guard_trace_put(hk_guard *g, void *const *frames, int n) {
    if (n <= 0) return 0;
    uint64_t h64 = 0x51ed270b27a5c1d3ull;
    for (int i = 0; i < n; i++) h64 = guard_mix(h64 ^ (uint64_t)(uintptr_t)frames[i]);
    uint32_t h = (uint32_t)h64;
    uint32_t *bucket = &g->buckets[h & (GUARD_TRACE_BUCKETS - 1)];
    for (uint32_t id = *bucket; id;) {
        const unsigned char *rec =
            guard_region_data(&g->trace_reg, g->page) + (size_t)(id - 1) * g->trace_stride;
        const guard_trace_hdr *th = (const guard_trace_hdr *)(const void *)rec;
        if (th->hash == h && th->depth == (uint32_t)n &&
            memcmp(rec + sizeof *th, frames, (size_t)n * sizeof(void *)) == 0)
            return id;
        id = th->next;
    }
    size_t need = (size_t)(g->ntraces + 1) * g->trace_stride;
    if (!guard_region_ensure(&g->trace_reg, need, g->page)) return 0;
    uint32_t id = ++g->ntraces;
    unsigned char *rec = guard_region_data(&g->trace_reg, g->page) + (size_t)(id - 1) * g->trace_stride;
    guard_trace_hdr *th = (guard_trace_hdr *)(void *)rec;
    th->next = *bucket;
    th->hash = h;
    th->depth = (uint32_t)n;
    th->pad = 0;
    memcpy(rec + sizeof *th, frames, (size_t)n * sizeof(void *));
    *bucket = id;
    return id;
}

/* ---- detailed reports ------------------------------------------------------------ */

typedef struct guard_blockinfo { /* a copy of a slot, taken under the lock */
    int valid;
    uintptr_t user;
    size_t requested;
    uint32_t state;
    uint32_t alloc_trace, free_trace;
} guard_blockinfo;

static void guard_blockinfo_from(const hk_guard *g, const guard_slot *s, guard_blockinfo *b) {
    b->valid = 1;
    b->user = guard_user(g, s);
    b->requested = s->requested;
    b->state = s->state;
    b->alloc_trace = s->alloc_trace;
    b->free_trace = s->free_trace;
}

static void guard_report_begin(void) {
    while (__atomic_exchange_n(&guard_report_busy, 1, __ATOMIC_ACQUIRE)) {
    }
}
static void guard_report_end(void) { __atomic_store_n(&guard_report_busy, 0, __ATOMIC_RELEASE); }

static void guard_out_prefix(guard_out *o) {
    guard_out_str(o, "==");
    guard_out_dec(o, (uint64_t)hk__guard_os_getpid());
    guard_out_str(o, "== heapkit guard: ");
}

/* Writes the multi-line report: headline (already in o), the current stack,
 * and the block's allocation and free stacks. Caller holds guard_report_begin. */
static void guard_report_finish(hk_guard *g, guard_out *o, void *const *cur, int ncur, int fault,
                                const guard_blockinfo *b) {
    guard_nsyms = 0;
    int c0 = 0, cn = 0, a0 = 0, an = 0, f0 = 0, fn = 0;
    c0 = guard_sym_stack(cur, ncur, fault, &cn);
    if (b && b->valid) {
        int n;
        const void *const *fr = guard_trace_get(g, b->alloc_trace, &n);
        if (fr) a0 = guard_sym_stack((void *const *)(uintptr_t)fr, n, 0, &an);
        fr = guard_trace_get(g, b->free_trace, &n);
        if (fr && b->state != GUARD_STATE_LIVE) f0 = guard_sym_stack((void *const *)(uintptr_t)fr, n, 0, &fn);
    }
    guard_sym_resolve(!(g->flags & HK_GUARD_NO_SYMBOLIZE_LINES));
    guard_out_str(o, "\n");
    guard_sym_print(o, c0, cn);
    if (b && b->valid) {
        guard_out_str(o, "  block ");
        guard_out_hex(o, b->user);
        guard_out_str(o, " (");
        guard_out_dec(o, b->requested);
        guard_out_str(o, " bytes) allocated at:\n");
        if (an)
            guard_sym_print(o, a0, an);
        else
            guard_out_str(o, "    (no stack recorded)\n");
        if (b->state != GUARD_STATE_LIVE) {
            guard_out_str(o, "  freed at:\n");
            if (fn)
                guard_sym_print(o, f0, fn);
            else
                guard_out_str(o, "    (no stack recorded)\n");
        }
    }
    if (g->flags & HK_GUARD_ABORT) {
        guard_out_prefix(o);
        guard_out_str(o, "aborting\n");
    }
    hk__guard_os_write(g->report_fd, o->buf, o->n);
}

/* One misuse: the one-line report through hk__report and, with
 * HK_GUARD_REPORT, the detailed one; then abort with HK_GUARD_ABORT. */
static hk_result guard_misuse(hk_guard *g, hk_result res, hk_error_kind kind, const void *addr, size_t size,
                              const guard_blockinfo *b, void *const *cur, int ncur, const char *what) {
    __atomic_add_fetch(&g->reports, 1, __ATOMIC_RELAXED);
    hk__report(&g->rep, res, kind, addr, size, NULL, "%s", what);
    if (g->flags & HK_GUARD_REPORT) {
        guard_report_begin();
        guard_out o = {guard_report_buf, 0, sizeof guard_report_buf};
        guard_out_prefix(&o);
        guard_out_str(&o, hk_error_kind_str(kind));
        guard_out_str(&o, ": ");
        guard_out_str(&o, what);
        guard_report_finish(g, &o, cur, ncur, 0, b);
        guard_report_end();
    }
    if (g->flags & HK_GUARD_ABORT) hk__guard_os_abort();
    return res;
}

/* Formats "what" lines for misuse with the address and block. */
static const char *guard_fmt_what(char *buf, size_t n, const char *lead, const void *p,
                                  const guard_blockinfo *b, const char *tail) {
    guard_out o = {buf, 0, n};
    buf[0] = 0;
    guard_out_str(&o, lead);
    guard_out_str(&o, " ");
    guard_out_ptr(&o, p);
    if (b && b->valid) {
        guard_out_str(&o, ": ");
        int64_t off = (int64_t)((uintptr_t)p - b->user);
        if (off != 0) {
            guard_out_str(&o, "offset ");
            guard_out_sdec(&o, off);
            guard_out_str(&o, " of ");
        }
        guard_out_dec(&o, b->requested);
        guard_out_str(&o, "-byte block ");
        guard_out_hex(&o, b->user);
    }
    if (tail) guard_out_str(&o, tail);
    return buf;
}

/* ---- slots -------------------------------------------------------------------------- */

static uint32_t guard_new_id(hk_guard *g) {
    size_t need = (size_t)(g->nslots + 1) * sizeof(guard_slot);
    if (!guard_region_ensure(&g->slot_reg, need, g->page)) return 0;
    return g->nslots++;
}

static void guard_map_range(hk_guard *g, uintptr_t base, uint32_t pages_incl_guard, uint32_t id) {
    size_t first = (size_t)(base - (uintptr_t)g->arena) / g->page;
    for (uint32_t i = 0; i < pages_incl_guard; i++) g->pagemap[first + i] = id;
}

static void guard_push_free(hk_guard *g, uint32_t id) {
    guard_slot *s = &g->slots[id];
    s->state = GUARD_STATE_FREE;
    if (s->pages <= GUARD_BINS) {
        s->next = g->bins[s->pages];
        g->bins[s->pages] = id;
    } else {
        s->next = g->large;
        g->large = id;
    }
    guard_seal(g, s);
}

/* Cuts slot `id` (FREE, off any list) to `pages` data pages; the rest
 * becomes a new FREE slot. */
static void guard_split(hk_guard *g, uint32_t id, uint32_t pages) {
    guard_slot *s = &g->slots[id];
    if (s->pages <= pages + 1) return; /* the rest would have no data page */
    if (s->sflags & GUARD_SLOT_OWN) {
        /* back into the reservation's mapping (pages discarded), so the cut
         * can put a guard page inside the range */
        if (hk__guard_os_discard((void *)guard_data(g, s), guard_data_bytes(g, s)) != HK_OK) return;
        if (s->sflags & GUARD_SLOT_RESIDENT) g->resident_free -= guard_data_bytes(g, s);
        s->sflags = 0;
        g->n_own--;
    }
    uint32_t rid = guard_new_id(g);
    if (!rid) return;
    s = &g->slots[id];
    guard_slot *r = &g->slots[rid];
    memset(r, 0, sizeof *r);
    r->base_page = s->base_page + pages + 1;
    r->pages = s->pages - pages - 1;
    s->sflags &= (uint16_t)~GUARD_SLOT_PADDED; /* the old block may lie past the new end */
    r->sflags = s->sflags;
    if (s->sflags & GUARD_SLOT_RESIDENT) g->resident_free -= g->page; /* that page becomes r's guard */
    guard_map_range(g, guard_base(g, r), r->pages + 1, rid);
    s->pages = pages;
    guard_seal(g, s);
    guard_push_free(g, rid);
}

/* Gives a non-LIVE slot's data pages back to the OS; they stay inaccessible
 * and keep their own mapping if they had one. */
static hk_result guard_discard(hk_guard *g, guard_slot *s) {
    hk_result r = (s->sflags & GUARD_SLOT_OWN)
                      ? hk__guard_os_map_own((void *)guard_data(g, s), guard_data_bytes(g, s), 0)
                      : hk__guard_os_discard((void *)guard_data(g, s), guard_data_bytes(g, s));
    if (r == HK_OK) s->sflags &= (uint16_t) ~(GUARD_SLOT_RESIDENT | GUARD_SLOT_PADDED);
    return r;
}

static void guard_evict_one(hk_guard *g) {
    uint32_t id = g->q_head;
    if (!id) return;
    guard_slot *s = &g->slots[id];
    g->q_head = s->next;
    if (!g->q_head) g->q_tail = 0;
    g->q_blocks--;
    g->q_bytes -= guard_data_bytes(g, s);
    if (s->sflags & GUARD_SLOT_RESIDENT) {
        /* keep a bounded pool of evicted pages resident: reusing them costs
         * one mprotect and no page fault */
        if (g->resident_free + guard_data_bytes(g, s) <= GUARD_RESIDENT_POOL) {
            g->resident_free += guard_data_bytes(g, s);
        } else {
            guard_discard(g, s);
        }
    }
    guard_push_free(g, id);
}

/* Unlinks and returns a FREE slot with at least `pages` data pages, 0 if none. */
static uint32_t guard_pop_fit(hk_guard *g, uint32_t pages) {
    if (pages <= GUARD_BINS && g->bins[pages]) {
        uint32_t id = g->bins[pages];
        g->bins[pages] = g->slots[id].next;
        return id;
    }
    /* carve fresh address space; keep the last page of the arena as a guard */
    size_t need = ((size_t)pages + 1) * g->page;
    if (g->bump + need + g->page <= g->arena_size) {
        size_t map_need = (g->bump + need) / g->page * sizeof(uint32_t);
        uint32_t id = 0;
        if (guard_region_ensure(&g->map_reg, map_need, g->page)) id = guard_new_id(g);
        if (id) {
            guard_slot *s = &g->slots[id];
            memset(s, 0, sizeof *s);
            s->base_page = (uint32_t)(g->bump / g->page);
            s->pages = pages;
            g->bump += need;
            guard_map_range(g, guard_base(g, s), pages + 1, id);
            return id;
        }
    }
    /* large list, first fit */
    for (uint32_t *link = &g->large; *link; link = &g->slots[*link].next) {
        uint32_t id = *link;
        if (g->slots[id].pages >= pages) {
            *link = g->slots[id].next;
            guard_split(g, id, pages);
            return id;
        }
    }
    /* a bigger bin, split */
    for (uint32_t k = pages + 2; k <= GUARD_BINS; k++) {
        if (g->bins[k]) {
            uint32_t id = g->bins[k];
            g->bins[k] = g->slots[id].next;
            guard_split(g, id, pages);
            return id;
        }
    }
    return 0;
}

static uint32_t guard_take_slot(hk_guard *g, uint32_t pages) {
    uint32_t id = guard_pop_fit(g, pages);
    while (!id && g->q_head) { /* out of address space: shorten the quarantine */
        guard_evict_one(g);
        id = guard_pop_fit(g, pages);
    }
    return id;
}

/* ---- unguarded blocks ------------------------------------------------------------- */

static inline uint32_t guard_fb_key(const void *user) { return (uint32_t)((uintptr_t)user >> 4); }
static inline bool guard_fb_canary_ok(const unsigned char *at) {
    uint64_t c;
    memcpy(&c, at, sizeof c);
    return c == 0x0101010101010101ull * HK_FILL_PAD;
}

static void *guard_fb_alloc(hk_guard *g, size_t size, size_t align) {
    if (g->flags & HK_GUARD_PLAIN_UNGUARDED) {
        void *p = align > 16 ? g->backing.memalign(align, size) : g->backing.malloc(size);
        if (HK__UNLIKELY(!p)) {
            __atomic_add_fetch(&g->fail_count, 1, __ATOMIC_RELAXED);
            return NULL;
        }
        if (g->flags & HK_FLAG_ZERO) memset(p, 0, size);
        return p; /* not counted: its free would have to tell it from a foreign pointer */
    }
    size_t total;
    size_t off = align > GUARD_FB_HDR ? align : GUARD_FB_HDR;
    if (!hk_size_add(size, off + GUARD_FB_CANARY, &total)) {
        __atomic_add_fetch(&g->fail_count, 1, __ATOMIC_RELAXED);
        hk__report(&g->rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, size, NULL,
                   "asked %zu bytes, which overflows with the block overhead", size);
        return NULL;
    }
    unsigned char *raw = (unsigned char *)(align > GUARD_FB_HDR ? g->backing.memalign(align, total)
                                                                : g->backing.malloc(total));
    if (!raw) {
        __atomic_add_fetch(&g->fail_count, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    unsigned char *user = raw + off;
    guard_fb_hdr h = {(uint64_t)size, (uint32_t)off, GUARD_FB_MAGIC ^ guard_fb_key(user)};
    memcpy(user - GUARD_FB_HDR, &h, sizeof h);
    memset(user + size, (int)HK_FILL_PAD, GUARD_FB_CANARY);
    if (g->flags & HK_FLAG_ZERO) memset(user, 0, size);
    guard_count(g, 1, (int64_t)size, 1);
    return user;
}

/* Reads the header of a would-be unguarded block. 1 live, 2 freed, 0 not ours. */
static int guard_fb_read(const hk_guard *g, const void *p, guard_fb_hdr *h) {
    if (((uintptr_t)p & 7u) != 0) return 0;
#ifdef HK__ASAN
    /* a stack or global pointer: the bytes before it are ASan redzone */
    if (__asan_region_is_poisoned((void *)((uintptr_t)p - GUARD_FB_HDR), GUARD_FB_HDR)) return 0;
#endif
    if (((uintptr_t)p & (g->page - 1)) < GUARD_FB_HDR &&
        !hk__guard_os_readable((const char *)p - GUARD_FB_HDR, GUARD_FB_HDR))
        return 0;
    memcpy(h, (const char *)p - GUARD_FB_HDR, sizeof *h);
    if (h->magic == (GUARD_FB_MAGIC ^ guard_fb_key(p)) && h->off >= GUARD_FB_HDR) return 1;
    if (h->magic == (GUARD_FB_DEAD ^ guard_fb_key(p))) return 2;
    return 0;
}

static hk_result guard_fb_free(hk_guard *g, void *p, void *const *cur, int ncur) {
    if (g->flags & HK_GUARD_PLAIN_UNGUARDED) {
        g->backing.free(p);
        return HK_OK;
    }
    guard_fb_hdr h;
    int st = guard_fb_read(g, p, &h);
    char what[256];
    if (st == 2)
        return guard_misuse(g, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, p, 0, NULL, cur, ncur,
                            guard_fmt_what(what, sizeof what, "free of", p, NULL,
                                           ": an unguarded block that was already freed"));
    if (st == 0)
        return guard_misuse(g, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, 0, NULL, cur, ncur,
                            guard_fmt_what(what, sizeof what, "free of", p, NULL,
                                           ", which this heap never returned (stack, global, interior or "
                                           "foreign pointer)"));
    unsigned char *user = (unsigned char *)p;
    hk_result res = HK_OK;
    size_t bad = guard_fb_canary_ok(user + h.size)
                     ? GUARD_FB_CANARY
                     : hk_fill_check(user + h.size, GUARD_FB_CANARY, HK_FILL_PAD);
    if (bad != GUARD_FB_CANARY) {
        guard_blockinfo b = {1, (uintptr_t)p, (size_t)h.size, GUARD_STATE_LIVE, 0, 0};
        res = guard_misuse(
            g, HK_ERR_CORRUPT, HK_EK_HEAP_OVERFLOW, user + h.size + bad, (size_t)h.size, &b, cur, ncur,
            guard_fmt_what(what, sizeof what, "write past the end found at free:", user + h.size + bad, &b,
                           " (canary damaged)"));
    }
    if (!(g->flags & HK_GUARD_NO_FILL))
        hk_fill(user, (size_t)h.size < 64 ? (size_t)h.size : 64, HK_FILL_FREE);
    h.magic = GUARD_FB_DEAD ^ guard_fb_key(p);
    memcpy(user - GUARD_FB_HDR, &h, sizeof h);
    guard_count(g, -1, -(int64_t)h.size, -1);
    g->backing.free(user - h.off);
    return res;
}

/* ---- guarded blocks ---------------------------------------------------------------- */

static bool guard_sample(hk_guard *g) {
    if (g->sample_rate <= 1) return true;
    if (HK__UNLIKELY(guard_tl_sample_gen != g->ctr_gen)) { /* another heap sampled last on this thread */
        guard_tl_sample_gen = g->ctr_gen;
        guard_tl_countdown = 0;
    }
    if (guard_tl_countdown > 1) {
        guard_tl_countdown--;
        return false;
    }
    if (!guard_tl_rng) guard_tl_rng = g->rng ^ (uint64_t)(uintptr_t)&guard_tl_rng;
    guard_tl_countdown = 1u + (uint32_t)(guard_rand(&guard_tl_rng) % (2ull * g->sample_rate - 1));
    return true;
}

/* Checks a live slot's padding. Returns 0 when intact, else 1 (overflow,
 * *at = first damaged byte after the block) or -1 (underflow, *at = damaged
 * byte nearest the block start). */
/* True when all n bytes at p equal b. Branch-free inner loop (vectorizes):
 * the padding check runs on every free and covers most of a page. */
#define GUARD_PAD_REF 4096u
static unsigned char guard_pad_ref[GUARD_PAD_REF]; /* HK_FILL_PAD bytes, set by hk_guard_create */
static bool guard_bytes_are(const unsigned char *p, size_t n, unsigned b) {
    if (b == HK_FILL_PAD && guard_pad_ref[0] == (unsigned char)HK_FILL_PAD) {
        /* memcmp against a reference page: the C library's vector code */
        while (n > 0) {
            size_t k = n < GUARD_PAD_REF ? n : GUARD_PAD_REF;
            if (memcmp(p, guard_pad_ref, k) != 0) return false;
            p += k;
            n -= k;
        }
        return true;
    }
    const uint64_t pat = 0x0101010101010101ull * (b & 0xffu);
    uint64_t acc = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, sizeof w);
        acc |= w ^ pat;
    }
    for (; i < n; i++) acc |= (uint64_t)(p[i] ^ (unsigned char)b);
    return acc == 0;
}

static int guard_pads_damaged(const hk_guard *g, const guard_slot *s, uintptr_t *at) {
    const unsigned char *data = (const unsigned char *)guard_data(g, s);
    const unsigned char *user = data + s->user_off;
    const unsigned char *end = data + guard_data_bytes(g, s);
    size_t tail = (size_t)(end - (user + s->requested));
    if (guard_bytes_are(user + s->requested, tail, HK_FILL_PAD) &&
        guard_bytes_are(data, s->user_off, HK_FILL_PAD))
        return 0;
    size_t off = hk_fill_check(user + s->requested, tail, HK_FILL_PAD);
    if (off != tail) {
        *at = (uintptr_t)(user + s->requested + off);
        return 1;
    }
    if (hk_fill_check(data, s->user_off, HK_FILL_PAD) != s->user_off) {
        const unsigned char *q = user;
        while (q > data && q[-1] == (unsigned char)HK_FILL_PAD) q--;
        *at = (uintptr_t)(q - 1);
        return -1;
    }
    return 0;
}

static void *guard_alloc_guarded(hk_guard *g, size_t size, size_t align, void *const *frames, int nframes) {
    size_t span, bytes;
    if (size == 0)
        span = align;
    else if (!hk_size_align(size, align, &span))
        span = SIZE_MAX;
    if (span == SIZE_MAX || !hk_size_align(span, g->page, &bytes) || bytes / g->page > UINT32_MAX - 2 ||
        bytes >= g->arena_size / 2) {
        if (span == SIZE_MAX || size > SIZE_MAX / 2) {
            __atomic_add_fetch(&g->fail_count, 1, __ATOMIC_RELAXED);
            hk__report(&g->rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, size, NULL,
                       "asked %zu bytes, which overflows with guard pages and alignment", size);
            return NULL;
        }
        return guard_fb_alloc(g, size, align); /* too big for the reservation: unguarded */
    }
    uint32_t pages = (uint32_t)(bytes / g->page);
    guard_lock(g);
    if (g->live_guarded >= g->max_guarded) {
        g->over_cap++;
        guard_unlock(g);
        return guard_fb_alloc(g, size, align);
    }
    uint32_t id = guard_take_slot(g, pages);
    if (!id) {
        guard_unlock(g);
        return guard_fb_alloc(g, size, align);
    }
    guard_slot *s = &g->slots[id];
    unsigned char *data = (unsigned char *)guard_data(g, s);
    bytes = guard_data_bytes(g, s); /* a reused slot may hold one page more than asked */
    bool was_resident = (s->sflags & GUARD_SLOT_RESIDENT) != 0;
    bool padded =
        was_resident && (s->sflags & GUARD_SLOT_PADDED) && (size_t)s->user_off + s->requested <= bytes;
    size_t old_off = s->user_off, old_req = s->requested;
    hk_result pr = HK_ERR_NOMEM;
    if (!(s->sflags & GUARD_SLOT_OWN) && g->n_own < g->own_max &&
        hk__guard_os_map_own(data, bytes, 1) == HK_OK) {
        /* first use of these pages as a mapping of their own: from now on
         * each alloc/free is one mprotect of a whole mapping */
        g->n_own++;
        if (was_resident) g->resident_free -= bytes;
        was_resident = padded = false; /* fresh zero pages */
        s->sflags = GUARD_SLOT_OWN;
        pr = HK_OK;
    } else if (!(s->sflags & GUARD_SLOT_OWN) && g->n_own + g->live_shared >= g->max_guarded) {
        pr = HK_ERR_NOMEM; /* one more split mapping would pass the budget */
    } else {
        pr = hk_os_protect(data, bytes, HK_PROT_READ_WRITE);
    }
    if (pr != HK_OK) {
        /* over the mapping budget, or the kernel refused: serve it unguarded */
        guard_push_free(g, id);
        g->over_cap++;
        guard_unlock(g);
        return guard_fb_alloc(g, size, align);
    }
    if (was_resident) {
        g->resident_free -= bytes;
        s->sflags &= (uint16_t) ~(GUARD_SLOT_RESIDENT | GUARD_SLOT_PADDED);
    }
    if (!(s->sflags & GUARD_SLOT_OWN)) g->live_shared++;
    int at_start =
        g->side == HK_GUARD_SIDE_START || (g->side == HK_GUARD_SIDE_RANDOM && (guard_rand(&g->rng) & 1u));
    size_t dbytes = guard_data_bytes(g, s);
    s->user_off = (uint32_t)(at_start ? 0 : dbytes - span);
    s->requested = size;
    s->state = GUARD_STATE_LIVE;
    s->next = 0;
    s->alloc_trace = guard_trace_put(g, frames, nframes);
    s->free_trace = 0;
    guard_seal(g, s);
    unsigned char *user = data + s->user_off;
    hk__san_access(data, dbytes); /* a reused range may still be poisoned from its last free */
    /* fill: padding everywhere but the block; the block HK_FILL_ALLOC
     * (fresh pages read as zero, so HK_FLAG_ZERO costs nothing) */
    if (padded) {
        /* the pages are padding but for the last block (checked at its
         * free): repaint only that; the new block is painted below */
        hk_fill(data + old_off, old_req, HK_FILL_PAD);
    } else {
        hk_fill(data, s->user_off, HK_FILL_PAD);
        hk_fill(user + size, dbytes - s->user_off - size, HK_FILL_PAD);
    }
    if (g->flags & HK_FLAG_ZERO) {
        if (was_resident) memset(user, 0, size); /* fresh pages are zero already */
    } else if (!(g->flags & HK_GUARD_NO_FILL)) {
        hk_fill(user, size, HK_FILL_ALLOC);
    }
    g->live_guarded++;
    g->used_guarded += size;
    if (g->used_guarded > g->peak_used) g->peak_used = g->used_guarded;
    g->alloc_count++;
    guard_unlock(g);
    hk__san_alloc(user, size, (g->flags & HK_FLAG_ZERO) != 0);
    return user;
}

static void *guard_alloc_any(hk_guard *g, size_t size, size_t align, void *const *frames, int nframes,
                             bool guarded) {
    if (align > g->page || !guarded) return guard_fb_alloc(g, size, align);
    return guard_alloc_guarded(g, size, align, frames, nframes);
}

/* Frees a guarded pointer (p in the arena). */
static hk_result guard_free_guarded(hk_guard *g, void *p, void *const *cur, int ncur) {
    char what[300];
    guard_lock(g);
    uint32_t id = guard_slot_of(g, p);
    if (!id) {
        guard_unlock(g);
        return guard_misuse(
            g, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, 0, NULL, cur, ncur,
            guard_fmt_what(what, sizeof what, "free of", p, NULL,
                           ", an address in the guard heap's reservation that was never allocated"));
    }
    guard_slot *s = &g->slots[id];
    if (!guard_slot_ok(g, s)) {
        guard_unlock(g);
        return guard_misuse(
            g, HK_ERR_CORRUPT, HK_EK_CORRUPT_HEADER, p, 0, NULL, cur, ncur,
            guard_fmt_what(what, sizeof what, "free of", p, NULL,
                           ": the slot record is damaged (stray write into the heap's metadata)"));
    }
    guard_blockinfo b;
    guard_blockinfo_from(g, s, &b);
    if (s->state == GUARD_STATE_LIVE && (uintptr_t)p == b.user) {
        uintptr_t at = 0;
        int dmg = guard_pads_damaged(g, s, &at);
        size_t dbytes = guard_data_bytes(g, s);
        if (!(g->flags & (HK_GUARD_DISCARD_FREED | HK_GUARD_NO_FILL))) hk_fill(p, s->requested, HK_FILL_FREE);
        hk__san_free(p, s->requested);
        if (!(s->sflags & GUARD_SLOT_OWN)) g->live_shared--;
        if (!(g->flags & HK_GUARD_DISCARD_FREED)) {
            if (hk_os_protect((void *)guard_data(g, s), dbytes, HK_PROT_NONE) == HK_OK)
                s->sflags |= (uint16_t)(GUARD_SLOT_RESIDENT | (dmg == 0 ? GUARD_SLOT_PADDED : 0));
            else
                (void)guard_discard(g, s);
        } else if (guard_discard(g, s) != HK_OK) {
            (void)hk_os_protect((void *)guard_data(g, s), dbytes, HK_PROT_NONE);
        }
        s->state = GUARD_STATE_QUAR;
        s->free_trace = guard_trace_put(g, cur, ncur);
        s->next = 0;
        guard_seal(g, s);
        if (g->q_tail) {
            guard_slot *t = &g->slots[g->q_tail];
            t->next = id;
            guard_seal(g, t);
        } else {
            g->q_head = id;
        }
        g->q_tail = id;
        g->q_blocks++;
        g->q_bytes += dbytes;
        g->live_guarded--;
        g->used_guarded -= s->requested;
        g->free_count++;
        while (g->q_head && (g->q_bytes > g->q_max_bytes || g->q_blocks > g->q_max_blocks))
            guard_evict_one(g);
        guard_blockinfo_from(g, s, &b);
        b.state = GUARD_STATE_LIVE; /* report damage with the allocation stack only */
        guard_unlock(g);
        if (dmg > 0)
            return guard_misuse(
                g, HK_ERR_CORRUPT, HK_EK_HEAP_OVERFLOW, (void *)at, b.requested, &b, cur, ncur,
                guard_fmt_what(what, sizeof what, "write past the end found at free:", (void *)at, &b,
                               " (padding damaged; exact mode --align 1 faults at the write)"));
        if (dmg < 0)
            return guard_misuse(
                g, HK_ERR_CORRUPT, HK_EK_HEAP_UNDERFLOW, (void *)at, b.requested, &b, cur, ncur,
                guard_fmt_what(what, sizeof what, "write before the start found at free:", (void *)at, &b,
                               " (padding damaged; side start faults at the write)"));
        return HK_OK;
    }
    uintptr_t data = guard_data(g, s), end = data + guard_data_bytes(g, s);
    guard_unlock(g);
    if ((uintptr_t)p == b.user && (b.state == GUARD_STATE_QUAR || b.state == GUARD_STATE_FREE))
        return guard_misuse(g, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, p, b.requested, &b, cur, ncur,
                            guard_fmt_what(what, sizeof what, "free of", p, &b,
                                           b.state == GUARD_STATE_QUAR
                                               ? ", which was already freed"
                                               : ", which was already freed (and has left "
                                                 "the quarantine)"));
    if (b.state == GUARD_STATE_LIVE && (uintptr_t)p >= data && (uintptr_t)p < end)
        return guard_misuse(g, HK_ERR_FOREIGN, HK_EK_INTERIOR_PTR, p, b.requested, &b, cur, ncur,
                            guard_fmt_what(what, sizeof what, "free of interior pointer", p, &b, NULL));
    return guard_misuse(
        g, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, b.requested, &b, cur, ncur,
        guard_fmt_what(what, sizeof what, "free of", p, &b,
                       " (not the start of a live block: guard page, padding or freed block)"));
}

/* ---- public: create / destroy ------------------------------------------------------ */

static void *guard_libc_malloc(size_t n) { return malloc(n); }
static void guard_libc_free(void *p) { free(p); }
static void *guard_libc_realloc(void *p, size_t n) { return realloc(p, n); }
static size_t guard_libc_usable_size(void *p) { return malloc_usable_size(p); }
static void *guard_libc_memalign(size_t a, size_t n) {
    void *p = NULL;
    return posix_memalign(&p, a, n) == 0 ? p : NULL;
}

hk_guard *hk_guard_create(const hk_guard_desc *desc) {
    if (!desc) return NULL;
    size_t page = hk_os_page_size();
    size_t align = desc->align ? desc->align : HK_GUARD_DEFAULT_ALIGN;
    if (!hk_is_pow2(align) || align > page) return NULL;
    int nb = (desc->backing.malloc != NULL) + (desc->backing.free != NULL) + (desc->backing.realloc != NULL) +
             (desc->backing.memalign != NULL);
    if (nb != 0 && nb != 4) return NULL;
    if ((desc->flags & HK_GUARD_PLAIN_UNGUARDED) && nb == 4 && !desc->backing.usable_size) return NULL;
    if ((desc->lock.lock == NULL) != (desc->lock.unlock == NULL)) return NULL;
    if ((unsigned)desc->side > (unsigned)HK_GUARD_SIDE_RANDOM) return NULL;
    if (desc->frames < 0 || desc->frames > HK_GUARD_MAX_FRAMES) return NULL;

    size_t self_size;
    if (!hk_size_align(sizeof(hk_guard), page, &self_size)) return NULL;
    hk_guard *g = (hk_guard *)hk_os_alloc(self_size);
    if (!g) return NULL;
    memset(g, 0, sizeof *g);
    g->self_size = self_size;
    g->page = page;
    g->flags = desc->flags;
    g->side = desc->side;
    g->align = align;
    g->q_max_bytes = desc->quarantine_bytes ? desc->quarantine_bytes : HK_GUARD_DEFAULT_QUARANTINE_BYTES;
    g->q_max_blocks = desc->quarantine_blocks ? desc->quarantine_blocks : HK_GUARD_DEFAULT_QUARANTINE_BLOCKS;
    g->sample_rate = desc->sample_rate;
    if (desc->max_guarded)
        g->max_guarded = desc->max_guarded;
    else {
        size_t mmc = hk__guard_os_max_map_count();
        g->max_guarded = mmc > 16384 ? (mmc - 8192) / 2 : mmc / 4;
    }
    /* Up to half the mapping budget goes to slots with mappings of their own
     * (two mappings each whatever their state); the rest to live shared ones. */
    g->own_max = g->max_guarded / 2;
    g->frames = desc->frames ? desc->frames : HK_GUARD_DEFAULT_FRAMES;
    g->report_fd = desc->report_fd ? desc->report_fd : 2;
    g->skip = desc->skip_frames > 0 ? desc->skip_frames : 0;
    if (nb == 4)
        g->backing = desc->backing;
    else
        g->backing = (hk_guard_backing){guard_libc_malloc, guard_libc_free, guard_libc_realloc,
                                        guard_libc_memalign, guard_libc_usable_size};
    g->rng = desc->seed ? desc->seed : 0x2545F4914F6CDD1Dull;
    g->secret = guard_mix(hk_os_now_ns() ^ (uint64_t)(uintptr_t)g ^ 0x9E3779B97F4A7C15ull) | 1u;
    hk__reporter_init(&g->rep, "guard", desc->name, desc->on_error, desc->error_user, desc->flags);
    g->lock = desc->lock;
    pthread_mutex_init(&g->mutex, NULL);
    pthread_once(&guard_tl_once, guard_tl_key_init);
    {
        int got = 0;
        uint64_t gen = __atomic_add_fetch(&guard_ctr_gen, 1, __ATOMIC_RELAXED);
        for (uint32_t i = 0; i < GUARD_MAX_CTRS && !got; i++) {
            uint64_t zero = 0;
            if (__atomic_compare_exchange_n(&guard_ctrs[i].gen, &zero, gen, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_RELAXED)) {
                guard_ctrs[i].live = guard_ctrs[i].used = 0;
                guard_ctrs[i].allocs = guard_ctrs[i].frees = 0;
                g->ctr = i;
                g->ctr_gen = gen;
                got = 1;
            }
        }
        if (!got) {
            hk_os_release(g, self_size);
            return NULL;
        }
    }

    size_t reserve = desc->reserve ? desc->reserve : HK_GUARD_DEFAULT_RESERVE;
    if (!hk_size_align(reserve, page, &reserve) || reserve < 4 * page) goto fail;
    g->arena = (unsigned char *)hk_os_reserve(reserve);
    if (!g->arena) goto fail;
    g->arena_size = reserve;
    size_t npages = reserve / page;
    if (npages > UINT32_MAX) goto fail; /* slot records hold page indexes in 32 bits */
    if (!guard_region_init(&g->slot_reg, (npages / 2 + 2) * sizeof(guard_slot), page)) goto fail;
    if (!guard_region_init(&g->map_reg, npages * sizeof(uint32_t), page)) goto fail;
    g->trace_stride = sizeof(guard_trace_hdr) + (size_t)g->frames * sizeof(void *);
    if (!guard_region_init(&g->trace_reg, GUARD_TRACE_RESERVE, page)) goto fail;
    if (!guard_region_init(&g->bucket_reg, GUARD_TRACE_BUCKETS * sizeof(uint32_t), page)) goto fail;
    if (!guard_region_ensure(&g->bucket_reg, GUARD_TRACE_BUCKETS * sizeof(uint32_t), page)) goto fail;
    g->slots = (guard_slot *)(void *)guard_region_data(&g->slot_reg, page);
    g->pagemap = (uint32_t *)(void *)guard_region_data(&g->map_reg, page);
    g->buckets = (uint32_t *)(void *)guard_region_data(&g->bucket_reg, page);
    if (!guard_region_ensure(&g->slot_reg, sizeof(guard_slot), page)) goto fail;
    g->nslots = 1; /* id 0 means none */

    if (!guard_own_base) {
        Dl_info info;
        if (dladdr(&guard_own_marker, &info)) guard_own_base = (uintptr_t)info.dli_fbase;
        guard_main_base = hk__guard_os_main_base();
    }
    if (!(g->flags & HK_GUARD_NO_TRACES)) hk_os_stack_init();
    if (!(g->flags & HK_GUARD_NO_SYMBOLIZE_LINES)) (void)hk__guard_os_addr2line_path();
    if (guard_pad_ref[0] != (unsigned char)HK_FILL_PAD)
        memset(guard_pad_ref, (int)HK_FILL_PAD, sizeof guard_pad_ref);
    if (g->flags & HK_GUARD_FAULT_HANDLER) {
        for (int i = 0; i < GUARD_MAX_INSTANCES; i++) {
            if (!guard_instances[i]) {
                guard_instances[i] = g;
                g->registered = 1;
                break;
            }
        }
        hk__guard_os_install_fault_handler();
    }
    return g;
fail:
    hk_guard_destroy(g);
    return NULL;
}

void hk_guard_destroy(hk_guard *g) {
    if (!g) return;
    for (int i = 0; i < GUARD_MAX_INSTANCES; i++)
        if (guard_instances[i] == g) guard_instances[i] = NULL;
    if (g->ctr_gen) __atomic_store_n(&guard_ctrs[g->ctr].gen, 0, __ATOMIC_RELEASE);
    if (g->arena) {
#ifdef HK__ASAN
        /* freed blocks were poisoned; the shadow outlives the mapping */
        if (g->bump) ASAN_UNPOISON_MEMORY_REGION(g->arena, g->bump);
#endif
        hk_os_release(g->arena, g->arena_size);
    }
    guard_region_free(&g->slot_reg);
    guard_region_free(&g->map_reg);
    guard_region_free(&g->trace_reg);
    guard_region_free(&g->bucket_reg);
    if (!g->lock.lock) pthread_mutex_destroy(&g->mutex);
    hk_os_release(g, g->self_size);
}

/* ---- public: allocation --------------------------------------------------------------- */

HK__NOINLINE void *hk_guard_alloc(hk_guard *g, size_t size) {
    if (!g) return NULL;
    bool guarded = guard_sample(g);
    if (!guarded) return guard_fb_alloc(g, size, g->align);
    void *frames[HK_GUARD_MAX_FRAMES];
    int n = guard_capture(g, frames);
    return guard_alloc_any(g, size, g->align, frames, n, guarded);
}

HK__NOINLINE void *hk_guard_alloc_aligned(hk_guard *g, size_t size, size_t align) {
    if (!g) return NULL;
    if (!hk_is_pow2(align)) {
        hk__report(&g->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, align, NULL,
                   "alignment %zu is not a power of two", align);
        return NULL;
    }
    if (align < g->align) align = g->align;
    bool guarded = guard_sample(g);
    void *frames[HK_GUARD_MAX_FRAMES];
    int n = guarded ? guard_capture(g, frames) : 0;
    return guard_alloc_any(g, size, align, frames, n, guarded);
}

void *hk_guard_alloc_unguarded(hk_guard *g, size_t size) {
    return g ? guard_fb_alloc(g, size, g->align) : NULL;
}

void hk_guard_fork_prepare(hk_guard *g) {
    if (!g) return;
    guard_lock(g);
    guard_report_begin();
}
void hk_guard_fork_parent(hk_guard *g) {
    if (!g) return;
    guard_report_end();
    guard_unlock(g);
}
void hk_guard_fork_child(hk_guard *g) {
    if (!g) return;
    guard_report_end();
    if (g->lock.unlock)
        g->lock.unlock(g->lock.user);
    else
        pthread_mutex_init(&g->mutex, NULL);
}

HK__NOINLINE hk_result hk_guard_free(hk_guard *g, void *p) {
    if (!g || !p) return HK_OK;
    void *frames[HK_GUARD_MAX_FRAMES];
    if (guard_in_arena(g, p)) {
        int n = guard_capture(g, frames);
        return guard_free_guarded(g, p, frames, n);
    }
    if (g->flags & HK_GUARD_PLAIN_UNGUARDED) {
        g->backing.free(p);
        return HK_OK;
    }
    guard_fb_hdr h;
    if (guard_fb_read(g, p, &h) == 1 && guard_fb_canary_ok((unsigned char *)p + h.size)) {
        /* the common case: a sound unguarded block, no stack needed */
        unsigned char *user = (unsigned char *)p;
        if (!(g->flags & HK_GUARD_NO_FILL))
            hk_fill(user, (size_t)h.size < 64 ? (size_t)h.size : 64, HK_FILL_FREE);
        h.magic = GUARD_FB_DEAD ^ guard_fb_key(p);
        memcpy(user - GUARD_FB_HDR, &h, sizeof h);
        guard_count(g, -1, -(int64_t)h.size, -1);
        g->backing.free(user - h.off);
        return HK_OK;
    }
    int n = guard_capture(g, frames);
    return guard_fb_free(g, p, frames, n);
}

HK__NOINLINE void *hk_guard_realloc(hk_guard *g, void *p, size_t size) {
    if (!g) return NULL;
    void *frames[HK_GUARD_MAX_FRAMES];
    char what[300];
    if (!p) {
        bool guarded = guard_sample(g);
        int n = guarded ? guard_capture(g, frames) : 0;
        return guard_alloc_any(g, size, g->align, frames, n, guarded);
    }
    size_t old;
    if (guard_in_arena(g, p)) {
        guard_lock(g);
        uint32_t id = guard_slot_of(g, p);
        guard_blockinfo b = {0, 0, 0, 0, 0, 0};
        if (id && guard_slot_ok(g, &g->slots[id])) guard_blockinfo_from(g, &g->slots[id], &b);
        guard_unlock(g);
        if (!b.valid || b.user != (uintptr_t)p || b.state != GUARD_STATE_LIVE) {
            int n = guard_capture(g, frames);
            if (b.valid && b.user == (uintptr_t)p)
                guard_misuse(g, HK_ERR_STALE, HK_EK_USE_AFTER_FREE, p, b.requested, &b, frames, n,
                             guard_fmt_what(what, sizeof what, "realloc of freed block", p, &b, NULL));
            else
                guard_misuse(g, HK_ERR_FOREIGN, b.valid ? HK_EK_INTERIOR_PTR : HK_EK_FOREIGN_PTR, p, 0,
                             b.valid ? &b : NULL, frames, n,
                             guard_fmt_what(what, sizeof what, "realloc of", p, b.valid ? &b : NULL,
                                            ", which is not the start of a live block"));
            return NULL;
        }
        old = b.requested;
    } else if (g->flags & HK_GUARD_PLAIN_UNGUARDED) {
        bool guarded = guard_sample(g);
        if (!guarded) {
            void *q = g->backing.realloc(p, size);
            if (!q && size) __atomic_add_fetch(&g->fail_count, 1, __ATOMIC_RELAXED);
            return q;
        }
        old = g->backing.usable_size(p);
        int n = guard_capture(g, frames);
        void *q = guard_alloc_any(g, size, g->align, frames, n, true);
        if (!q) return NULL;
        memcpy(q, p, old < size ? old : size);
        (void)guard_fb_free(g, p, NULL, 0);
        return q;
    } else {
        guard_fb_hdr h;
        int st = guard_fb_read(g, p, &h);
        if (st != 1) {
            int n = guard_capture(g, frames);
            if (st == 2)
                guard_misuse(
                    g, HK_ERR_STALE, HK_EK_USE_AFTER_FREE, p, 0, NULL, frames, n,
                    guard_fmt_what(what, sizeof what, "realloc of freed (unguarded) block", p, NULL, NULL));
            else
                guard_misuse(g, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, 0, NULL, frames, n,
                             guard_fmt_what(what, sizeof what, "realloc of", p, NULL,
                                            ", which this heap never returned"));
            return NULL;
        }
        old = (size_t)h.size;
        bool guarded = guard_sample(g);
        if (!guarded && h.off == GUARD_FB_HDR && g->align <= GUARD_FB_HDR) {
            /* unguarded to unguarded: let the backing allocator grow in place */
            size_t total;
            if (!hk_size_add(size, GUARD_FB_HDR + GUARD_FB_CANARY, &total)) {
                __atomic_add_fetch(&g->fail_count, 1, __ATOMIC_RELAXED);
                hk__report(&g->rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, size, NULL,
                           "realloc to %zu bytes overflows with the block overhead", size);
                return NULL;
            }
            if (!guard_fb_canary_ok((unsigned char *)p + old)) {
                (void)guard_fb_free(g, p, NULL, 0); /* reports the damage */
                return NULL;
            }
            unsigned char *raw =
                (unsigned char *)g->backing.realloc((unsigned char *)p - GUARD_FB_HDR, total);
            if (!raw) {
                __atomic_add_fetch(&g->fail_count, 1, __ATOMIC_RELAXED);
                return NULL;
            }
            unsigned char *user = raw + GUARD_FB_HDR;
            guard_fb_hdr nh = {(uint64_t)size, GUARD_FB_HDR, GUARD_FB_MAGIC ^ guard_fb_key(user)};
            memcpy(raw, &nh, sizeof nh);
            memset(user + size, (int)HK_FILL_PAD, GUARD_FB_CANARY);
            if (size > old) {
                guard_count(g, 0, (int64_t)(size - old), 0);
                if (g->flags & HK_FLAG_ZERO) memset(user + old, 0, size - old);
            } else {
                guard_count(g, 0, -(int64_t)(old - size), 0);
            }
            return user;
        }
        int n = guarded ? guard_capture(g, frames) : 0;
        void *q = guard_alloc_any(g, size, g->align, frames, n, guarded);
        if (!q) return NULL;
        memcpy(q, p, old < size ? old : size);
        (void)guard_fb_free(g, p, NULL, 0);
        return q;
    }
    bool guarded = guard_sample(g);
    int n = guarded ? guard_capture(g, frames) : 0;
    void *q = guard_alloc_any(g, size, g->align, frames, n, guarded);
    if (!q) return NULL;
    memcpy(q, p, old < size ? old : size);
    if (!guarded) n = guard_capture(g, frames);
    (void)guard_free_guarded(g, p, frames, n);
    return q;
}

size_t hk_guard_usable_size(hk_guard *g, const void *p) {
    if (!g || !p) return 0;
    if (guard_in_arena(g, p)) {
        size_t r = 0;
        int ok = 0;
        guard_lock(g);
        uint32_t id = guard_slot_of(g, p);
        if (id && guard_slot_ok(g, &g->slots[id]) && g->slots[id].state == GUARD_STATE_LIVE &&
            guard_user(g, &g->slots[id]) == (uintptr_t)p) {
            r = g->slots[id].requested;
            ok = 1;
        }
        guard_unlock(g);
        if (!ok)
            hk__report(&g->rep, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, 0, NULL,
                       "usable size of %p, which is not the start of a live block", p);
        return r;
    }
    if (g->flags & HK_GUARD_PLAIN_UNGUARDED) return g->backing.usable_size((void *)(uintptr_t)p);
    guard_fb_hdr h;
    if (guard_fb_read(g, p, &h) == 1) return (size_t)h.size;
    hk__report(&g->rep, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, 0, NULL,
               "usable size of %p, which this heap never returned", p);
    return 0;
}

bool hk_guard_owns(hk_guard *g, const void *p) {
    if (!g || !p) return false;
    if (guard_in_arena(g, p)) {
        guard_lock(g);
        uint32_t id = guard_slot_of(g, p);
        bool r = id && guard_slot_ok(g, &g->slots[id]) && g->slots[id].state == GUARD_STATE_LIVE &&
                 guard_user(g, &g->slots[id]) == (uintptr_t)p;
        guard_unlock(g);
        return r;
    }
    if (g->flags & HK_GUARD_PLAIN_UNGUARDED) return true; /* cannot tell */
    guard_fb_hdr h;
    return guard_fb_read(g, p, &h) == 1;
}

/* ---- public: introspection ----------------------------------------------------------- */

hk_result hk_guard_stats(const hk_guard *g, hk_stats *out) {
    if (!g || !out) return HK_ERR_INVALID;
    hk_guard *mg = (hk_guard *)(uintptr_t)g;
    guard_lock(mg);
    memset(out, 0, sizeof *out);
    out->size = (uint32_t)sizeof *out;
    out->version = HK_STATS_VERSION;
    out->allocator = "guard";
    guard_tl_flush();
    const guard_ctr *ctr = &guard_ctrs[g->ctr];
    size_t lu = __atomic_load_n(&ctr->live, __ATOMIC_RELAXED);
    size_t uu = __atomic_load_n(&ctr->used, __ATOMIC_RELAXED);
    out->capacity = g->arena_size;
    out->used = g->used_guarded + uu;
    out->used_blocks_bytes = g->live_guarded * g->page + uu + lu * (GUARD_FB_HDR + GUARD_FB_CANARY);
    out->free = g->arena_size - g->bump;
    out->largest_free = g->arena_size - g->bump > 2 * g->page ? g->arena_size - g->bump - 2 * g->page : 0;
    out->peak_used = g->peak_used;
    out->overhead = g->slot_reg.committed + g->map_reg.committed + g->trace_reg.committed +
                    g->bucket_reg.committed + g->self_size + lu * (GUARD_FB_HDR + GUARD_FB_CANARY);
    out->live_blocks = g->live_guarded + lu;
    out->free_blocks = g->q_blocks;
    out->alloc_count = g->alloc_count + __atomic_load_n(&ctr->allocs, __ATOMIC_RELAXED);
    out->free_count = g->free_count + __atomic_load_n(&ctr->frees, __ATOMIC_RELAXED);
    out->fail_count = __atomic_load_n(&g->fail_count, __ATOMIC_RELAXED);
    out->error_count = g->rep.error_count;
    guard_unlock(mg);
    return HK_OK;
}

void hk_guard_info_get(const hk_guard *g, hk_guard_info *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!g) return;
    hk_guard *mg = (hk_guard *)(uintptr_t)g;
    guard_lock(mg);
    out->live_guarded = g->live_guarded;
    guard_tl_flush();
    out->live_unguarded = __atomic_load_n(&guard_ctrs[g->ctr].live, __ATOMIC_RELAXED);
    out->max_guarded = g->max_guarded;
    out->quarantine_blocks = g->q_blocks;
    out->quarantine_bytes = g->q_bytes;
    out->reserve_used = g->bump;
    out->traces = g->ntraces;
    out->reports = __atomic_load_n(&g->reports, __ATOMIC_RELAXED);
    out->over_cap = g->over_cap;
    guard_unlock(mg);
}

uint64_t hk_guard_report_count(const hk_guard *g) {
    return g ? __atomic_load_n(&g->reports, __ATOMIC_RELAXED) : 0;
}

static void guard_fill_info(const hk_guard *g, const guard_slot *s, hk_block_info *info) {
    memset(info, 0, sizeof *info);
    info->address = (void *)guard_user(g, s);
    info->size = s->requested;
    info->requested = s->requested;
    info->overhead = guard_data_bytes(g, s) + g->page - s->requested;
    info->flags = HK_BLOCK_GUARDED | (s->state == GUARD_STATE_LIVE ? HK_BLOCK_USED : HK_BLOCK_QUARANTINED);
}

int hk_guard_walk(hk_guard *g, hk_walk_fn fn, void *user) {
    if (!g || !fn) return 0;
    int rc = 0;
    guard_lock(g);
    size_t npages = g->bump / g->page;
    for (size_t i = 0; i < npages && rc == 0;) {
        uint32_t id = g->pagemap[i];
        if (id == 0 || id >= g->nslots) break;
        const guard_slot *s = &g->slots[id];
        if (s->state == GUARD_STATE_LIVE || s->state == GUARD_STATE_QUAR) {
            hk_block_info info;
            guard_fill_info(g, s, &info);
            rc = fn(&info, user);
        }
        i += (size_t)s->pages + 1;
    }
    guard_unlock(g);
    return rc;
}

hk_result hk_guard_where(hk_guard *g, const void *addr, hk_block_info *info) {
    if (!g || !info) return HK_ERR_INVALID;
    guard_lock(g);
    uint32_t id = guard_slot_of(g, addr);
    hk_result r = HK_ERR_FOREIGN;
    if (id && guard_slot_ok(g, &g->slots[id]) &&
        (g->slots[id].state == GUARD_STATE_LIVE || g->slots[id].state == GUARD_STATE_QUAR)) {
        guard_fill_info(g, &g->slots[id], info);
        r = HK_OK;
    }
    guard_unlock(g);
    return r;
}

static hk_result guard_corrupt(hk_guard *g, hk_error_kind kind, const void *addr, const char *what,
                               uint64_t a, uint64_t b) {
    __atomic_add_fetch(&g->reports, 1, __ATOMIC_RELAXED);
    return hk__report(&g->rep, HK_ERR_CORRUPT, kind, addr, 0, NULL, "%s (%llu, %llu)", what,
                      (unsigned long long)a, (unsigned long long)b);
}

hk_result hk_guard_check(hk_guard *g) {
    if (!g) return HK_ERR_INVALID;
    guard_lock(g);
    hk_result res = HK_OK;
    size_t npages = g->bump / g->page, live = 0, used = 0, quar = 0, qbytes = 0, nfree = 0, resident = 0;
    size_t own = 0, shared_live = 0;
    for (size_t i = 0; i < npages;) {
        uint32_t id = g->pagemap[i];
        if (id == 0 || id >= g->nslots) {
            res = guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g->arena + i * g->page, "page map hole or bad id",
                                i, id);
            goto out;
        }
        guard_slot *s = &g->slots[id];
        if (!guard_slot_ok(g, s) || s->base_page != i || s->pages == 0 || i + s->pages + 1 > npages) {
            res = guard_corrupt(g, HK_EK_CORRUPT_HEADER, (void *)(g->arena + i * g->page),
                                "slot record damaged (checksum, base or size)", id, i);
            goto out;
        }
        for (size_t k = 0; k <= s->pages; k++) {
            if (g->pagemap[i + k] != id) {
                res = guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, (void *)(g->arena + (i + k) * g->page),
                                    "page map disagrees with slot", id, g->pagemap[i + k]);
                goto out;
            }
        }
        if (s->sflags & GUARD_SLOT_OWN)
            own++;
        else if (s->state == GUARD_STATE_LIVE)
            shared_live++;
        if (s->state == GUARD_STATE_LIVE) {
            uintptr_t at;
            int d = guard_pads_damaged(g, s, &at);
            if (d) {
                __atomic_add_fetch(&g->reports, 1, __ATOMIC_RELAXED);
                res = hk__report(&g->rep, HK_ERR_CORRUPT, d > 0 ? HK_EK_HEAP_OVERFLOW : HK_EK_HEAP_UNDERFLOW,
                                 (void *)at, s->requested, NULL,
                                 "padding of %zu-byte block %p damaged at offset %+lld", s->requested,
                                 (void *)guard_user(g, s), (long long)(at - guard_user(g, s)));
                goto out;
            }
            if (s->alloc_trace > g->ntraces) {
                res = guard_corrupt(g, HK_EK_CORRUPT_HEADER, (void *)guard_user(g, s), "bad trace id", id,
                                    s->alloc_trace);
                goto out;
            }
            live++;
            used += s->requested;
        } else if (s->state == GUARD_STATE_QUAR) {
            quar++;
            qbytes += guard_data_bytes(g, s);
        } else if (s->state == GUARD_STATE_FREE) {
            nfree++;
            if (s->sflags & GUARD_SLOT_RESIDENT) resident += guard_data_bytes(g, s);
        } else {
            res = guard_corrupt(g, HK_EK_CORRUPT_HEADER, (void *)guard_base(g, s), "bad slot state", id,
                                s->state);
            goto out;
        }
        i += (size_t)s->pages + 1;
    }
    if (live != g->live_guarded || used != g->used_guarded) {
        res = guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "live block count/bytes disagree", live,
                            g->live_guarded);
        goto out;
    }
    if (own != g->n_own || shared_live != g->live_shared || own > g->own_max ||
        (shared_live && own + shared_live > g->max_guarded)) {
        res = guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "own-mapping / shared live slot counts disagree",
                            own, g->n_own);
        goto out;
    }
    if (resident != g->resident_free || resident > GUARD_RESIDENT_POOL) {
        res = guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "resident free pages disagree", resident,
                            g->resident_free);
        goto out;
    }
    if (quar != g->q_blocks || qbytes != g->q_bytes) {
        res = guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "quarantine count/bytes disagree", quar,
                            g->q_blocks);
        goto out;
    }
    {
        size_t n = 0;
        uint32_t last = 0;
        for (uint32_t id = g->q_head; id && n <= quar; id = g->slots[id].next, n++) {
            if (id >= g->nslots || g->slots[id].state != GUARD_STATE_QUAR) {
                res = guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g,
                                    "quarantine list holds a non-quarantined slot", id, n);
                goto out;
            }
            last = id;
        }
        if (n != quar || last != g->q_tail) {
            res = guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "quarantine list length/tail wrong", n, quar);
            goto out;
        }
        n = 0;
        for (uint32_t k = 0; k <= GUARD_BINS; k++) {
            for (uint32_t id = g->bins[k]; id && n <= nfree; id = g->slots[id].next, n++) {
                if (id >= g->nslots || g->slots[id].state != GUARD_STATE_FREE || g->slots[id].pages != k) {
                    res = guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "free bin holds a wrong slot", id, k);
                    goto out;
                }
            }
        }
        for (uint32_t id = g->large; id && n <= nfree; id = g->slots[id].next, n++) {
            if (id >= g->nslots || g->slots[id].state != GUARD_STATE_FREE ||
                g->slots[id].pages <= GUARD_BINS) {
                res =
                    guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "large free list holds a wrong slot", id, 0);
                goto out;
            }
        }
        if (n != nfree) {
            res = guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "free lists miss free slots", n, nfree);
            goto out;
        }
    }
    if (g->live_guarded > g->max_guarded) {
        res = guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "live guarded blocks exceed the cap",
                            g->live_guarded, g->max_guarded);
        goto out;
    }
out:
    guard_unlock(g);
    return res;
}

/* ---- faults ------------------------------------------------------------------------------ */

static const char *guard_access_str(int access) {
    return access == HK__GUARD_ACCESS_WRITE ? "write" : access == HK__GUARD_ACCESS_READ ? "read" : "access";
}

/* Does this value look like it came from a fill pattern? */
static bool guard_is_fill_value(uintptr_t v, unsigned *pat) {
    static const unsigned pats[3] = {HK_FILL_ALLOC, HK_FILL_FREE, HK_FILL_PAD};
    for (int i = 0; i < 3; i++) {
        uint32_t w = 0x01010101u * pats[i];
        if ((uint32_t)v == w || (uint32_t)(v >> 32) == w) {
            *pat = pats[i];
            return true;
        }
    }
    return false;
}

void hk__guard_on_fault(const hk__guard_fault *f) {
    hk_guard *g = NULL;
    for (int i = 0; i < GUARD_MAX_INSTANCES; i++)
        if (guard_instances[i] && guard_in_arena(guard_instances[i], f->addr)) g = guard_instances[i];

    guard_report_begin();
    guard_out o = {guard_report_buf, 0, sizeof guard_report_buf};
    guard_blockinfo b = {0, 0, 0, 0, 0, 0};
    if (!g) {
        /* Not a guard page. Still useful: a pointer made of fill bytes. */
        hk_guard *any = NULL;
        for (int i = 0; i < GUARD_MAX_INSTANCES && !any; i++) any = guard_instances[i];
        unsigned pat = 0;
        int reg = -1;
        if (guard_is_fill_value((uintptr_t)f->addr, &pat)) reg = -2;
        for (int i = 0; i < f->nregs && reg == -1; i++)
            if (guard_is_fill_value(f->regs[i], &pat)) reg = i;
        if (!any) {
            guard_report_end();
            return;
        }
        guard_out_prefix(&o);
        if (reg != -1) {
            guard_out_str(&o, pat == HK_FILL_ALLOC  ? "uninitialized heap memory used as a pointer"
                              : pat == HK_FILL_FREE ? "freed heap memory used as a pointer"
                                                    : "padding bytes used as a pointer");
            guard_out_str(&o, ": ");
            guard_out_str(&o, f->signo == 7 ? "SIGBUS" : "SIGSEGV");
            guard_out_str(&o, " at ");
            guard_out_ptr(&o, f->addr);
            guard_out_str(&o, ", ");
            if (reg >= 0) {
                guard_out_str(&o, f->regnames[reg]);
                guard_out_str(&o, " = ");
                guard_out_hex(&o, f->regs[reg]);
            } else {
                guard_out_str(&o, "the address");
            }
            guard_out_str(&o, " holds the fill pattern ");
            guard_out_hex(&o, pat);
            guard_out_str(&o, pat == HK_FILL_ALLOC ? " of fresh, never-written heap memory" : "");
            __atomic_add_fetch(&any->reports, 1, __ATOMIC_RELAXED);
            any->rep.error_count++;
            uint32_t saved = any->flags;
            any->flags |= HK_GUARD_ABORT;
            guard_report_finish(any, &o, f->frames, f->nframes, 1, NULL);
            any->flags = saved;
            hk__guard_os_abort();
        }
        guard_out_str(&o, f->signo == 7 ? "SIGBUS" : "SIGSEGV");
        guard_out_str(&o, " on an address outside every guard heap: ");
        guard_out_ptr(&o, f->addr);
        guard_out_str(&o, " (");
        guard_out_str(&o, guard_access_str(f->access));
        guard_out_str(&o, "); not a heap error heapkit can explain");
        uint32_t saved = any->flags;
        any->flags &= ~(uint32_t)HK_GUARD_ABORT;
        guard_report_finish(any, &o, f->frames, f->nframes, 1, NULL);
        any->flags = saved;
        guard_report_end();
        return; /* the default action follows: a core dump at the fault */
    }

    hk_error_kind kind = HK_EK_NONE;
    const char *note = NULL;
    uintptr_t a = (uintptr_t)f->addr;
    uint32_t id = guard_slot_of(g, f->addr);
    size_t off = (size_t)(a - (uintptr_t)g->arena);
    if (id && id < g->nslots && a >= guard_data(g, &g->slots[id])) {
        const guard_slot *s = &g->slots[id];
        guard_blockinfo_from(g, s, &b);
        if (s->state == GUARD_STATE_QUAR)
            kind = HK_EK_USE_AFTER_FREE;
        else if (s->state == GUARD_STATE_FREE) {
            kind = HK_EK_USE_AFTER_FREE;
            note = " (the block has left the quarantine; stacks of its last use)";
        } else {
            kind = HK_EK_NONE;
            note = " (inside a live block: not a guard page)";
        }
    } else {
        /* a guard page: after the previous slot's block, or before this one's */
        uint32_t prev = off >= g->page ? guard_slot_of(g, (const void *)(a - g->page)) : 0;
        if (id && prev == id) prev = 0;
        if (!id && off >= g->bump && g->bump) prev = g->pagemap[g->bump / g->page - 1];
        guard_blockinfo pb = {0, 0, 0, 0, 0, 0}, nb = {0, 0, 0, 0, 0, 0};
        if (prev && prev < g->nslots) guard_blockinfo_from(g, &g->slots[prev], &pb);
        if (id && id < g->nslots) guard_blockinfo_from(g, &g->slots[id], &nb);
        uintptr_t dprev = pb.valid ? a - (pb.user + pb.requested) : UINTPTR_MAX;
        uintptr_t dnext = nb.valid && nb.user > a ? nb.user - a : UINTPTR_MAX;
        int prefer_prev =
            pb.valid &&
            (!nb.valid || (pb.state == GUARD_STATE_LIVE && nb.state != GUARD_STATE_LIVE) ||
             ((pb.state == GUARD_STATE_LIVE) == (nb.state == GUARD_STATE_LIVE) && dprev <= dnext));
        if (prefer_prev) {
            b = pb;
            kind = pb.state == GUARD_STATE_LIVE ? HK_EK_HEAP_OVERFLOW : HK_EK_USE_AFTER_FREE;
        } else if (nb.valid) {
            b = nb;
            kind = nb.state == GUARD_STATE_LIVE ? HK_EK_HEAP_UNDERFLOW : HK_EK_USE_AFTER_FREE;
        }
    }
    guard_out_prefix(&o);
    guard_out_str(&o, kind == HK_EK_NONE ? "fault in the guard heap" : hk_error_kind_str(kind));
    guard_out_str(&o, " (");
    guard_out_str(&o, guard_access_str(f->access));
    guard_out_str(&o, ") at ");
    guard_out_ptr(&o, f->addr);
    if (b.valid) {
        int64_t d = (int64_t)(a - b.user);
        guard_out_str(&o, ": offset ");
        guard_out_sdec(&o, d);
        guard_out_str(&o, " of ");
        guard_out_dec(&o, b.requested);
        guard_out_str(&o, "-byte ");
        guard_out_str(&o, b.state == GUARD_STATE_LIVE ? "block " : "freed block ");
        guard_out_hex(&o, b.user);
        if (kind == HK_EK_HEAP_OVERFLOW) {
            guard_out_str(&o, " (");
            guard_out_dec(&o, (uint64_t)(a - (b.user + b.requested)));
            guard_out_str(&o, " bytes past its end)");
        } else if (kind == HK_EK_HEAP_UNDERFLOW) {
            guard_out_str(&o, " (");
            guard_out_dec(&o, (uint64_t)(b.user - a));
            guard_out_str(&o, " bytes before its start)");
        }
    }
    if (note) guard_out_str(&o, note);
    __atomic_add_fetch(&g->reports, 1, __ATOMIC_RELAXED);
    g->rep.error_count++;
    uint32_t saved = g->flags;
    g->flags |= HK_GUARD_ABORT;
    guard_report_finish(g, &o, f->frames, f->nframes, 1, &b);
    g->flags = saved;
    hk__guard_os_abort();
}

/* ---- leaks ----------------------------------------------------------------------------------- */

typedef struct guard_leak_ctx {
    hk_guard *g;
    uint8_t *marks;  /* one byte per slot id */
    uint32_t *stack; /* ids to scan */
    size_t nstack, capstack;
    uintptr_t excl_lo[8], excl_hi[8];
    int nexcl;
    uintptr_t scan_lo, scan_hi; /* the range being scanned (for protected calls) */
} guard_leak_ctx;

static void guard_leak_mark_word(guard_leak_ctx *c, uintptr_t w) {
    hk_guard *g = c->g;
    uintptr_t off = w - (uintptr_t)g->arena;
    if (off >= g->bump) return;
    uint32_t id = g->pagemap[off / g->page];
    if (!id || c->marks[id]) return;
    const guard_slot *s = &g->slots[id];
    if (s->state != GUARD_STATE_LIVE || w < guard_data(g, s)) return;
    c->marks[id] = 1;
    if (c->nstack < c->capstack) c->stack[c->nstack++] = id;
}

static void guard_leak_scan_range(void *arg) {
    guard_leak_ctx *c = (guard_leak_ctx *)arg;
    uintptr_t lo = (c->scan_lo + 7) & ~(uintptr_t)7, hi = c->scan_hi & ~(uintptr_t)7;
    for (uintptr_t p = lo; p < hi; p += 8) {
        uintptr_t w;
        memcpy(&w, (const void *)p, sizeof w);
        guard_leak_mark_word(c, w);
    }
}

static void guard_leak_root(uintptr_t lo, uintptr_t hi, void *user) {
    guard_leak_ctx *c = (guard_leak_ctx *)user;
    /* subtract the heap's own mappings */
    for (int i = 0; i < c->nexcl; i++) {
        if (c->excl_hi[i] <= lo || c->excl_lo[i] >= hi) continue;
        if (c->excl_lo[i] > lo) guard_leak_root(lo, c->excl_lo[i], user);
        if (c->excl_hi[i] < hi) guard_leak_root(c->excl_hi[i], hi, user);
        return;
    }
    if (hi - lo <= GUARD_SCAN_WHOLE) {
        c->scan_lo = lo;
        c->scan_hi = hi;
        (void)hk__guard_os_protected_call(guard_leak_scan_range, c);
        return;
    }
    /* A huge writable mapping (a sanitizer's shadow, a runtime's arena
     * reservation): scan only its resident pages. */
    static unsigned char vec[GUARD_SCAN_STEP / 4096];
    size_t ps = c->g->page;
    for (uintptr_t at = lo; at < hi; at += GUARD_SCAN_STEP) {
        uintptr_t end = hi - at > GUARD_SCAN_STEP ? at + GUARD_SCAN_STEP : hi;
        size_t npages = (end - at) / ps;
        if (npages > sizeof vec || hk__guard_os_resident((void *)at, end - at, vec) != 0) continue;
        for (size_t i = 0; i < npages; i++) {
            if (!(vec[i] & 1)) continue;
            c->scan_lo = at + i * ps;
            c->scan_hi = c->scan_lo + ps;
            (void)hk__guard_os_protected_call(guard_leak_scan_range, c);
        }
    }
}

typedef struct guard_leak_group {
    uint32_t trace;
    uint32_t count;
    uint64_t bytes;
} guard_leak_group;

static void guard_group_sift(guard_leak_group *a, size_t n, size_t i) {
    for (;;) { /* min-heap on bytes, so the sort leaves the largest first */
        size_t l = 2 * i + 1, m = i;
        if (l < n && a[l].bytes < a[m].bytes) m = l;
        if (l + 1 < n && a[l + 1].bytes < a[m].bytes) m = l + 1;
        if (m == i) return;
        guard_leak_group t = a[i];
        a[i] = a[m];
        a[m] = t;
        i = m;
    }
}

/* Clears 32 KiB of dead stack below the caller: stale copies of block
 * pointers left there by earlier calls would otherwise make blocks look
 * reachable to the conservative scan (the scan's own frames and buffers
 * are laid over this area). */
static HK__NOINLINE void guard_scrub_stack(void) {
    volatile unsigned char junk[32768];
    memset((unsigned char *)(uintptr_t)junk, 0, sizeof junk);
    __asm__ volatile("" : : "r"(junk) : "memory");
}

size_t hk_guard_leaks(hk_guard *g, hk_guard_leak_mode mode, size_t *bytes_out) {
    if (bytes_out) *bytes_out = 0;
    if (!g) return 0;
    if (mode == HK_GUARD_LEAKS_UNREACHABLE) guard_scrub_stack();
    guard_lock(g);
    size_t marks_sz = g->nslots, stack_sz = (g->live_guarded + 1) * sizeof(uint32_t);
    size_t groups_sz = ((size_t)g->ntraces + 1) * sizeof(guard_leak_group);
    uint8_t *marks = (uint8_t *)hk_os_alloc(marks_sz);
    uint32_t *stack = (uint32_t *)hk_os_alloc(stack_sz);
    guard_leak_group *groups = (guard_leak_group *)hk_os_alloc(groups_sz);
    size_t leaked = 0, leaked_bytes = 0, ngroups = 0;
    if (!marks || !stack || !groups) goto out;

    if (mode == HK_GUARD_LEAKS_UNREACHABLE && g->live_guarded > 0) { /* nothing live: nothing to scan for */
        guard_leak_ctx c;
        memset(&c, 0, sizeof c);
        c.g = g;
        c.marks = marks;
        c.stack = stack;
        c.capstack = stack_sz / sizeof(uint32_t);
        const guard_region *regs[4] = {&g->slot_reg, &g->map_reg, &g->trace_reg, &g->bucket_reg};
        c.excl_lo[c.nexcl] = (uintptr_t)g->arena;
        c.excl_hi[c.nexcl++] = (uintptr_t)g->arena + g->arena_size;
        for (int i = 0; i < 4; i++) {
            c.excl_lo[c.nexcl] = (uintptr_t)regs[i]->base;
            c.excl_hi[c.nexcl++] = (uintptr_t)regs[i]->base + regs[i]->size;
        }
        c.excl_lo[c.nexcl] = (uintptr_t)g;
        c.excl_hi[c.nexcl++] = (uintptr_t)g + g->self_size;
        c.excl_lo[c.nexcl] = (uintptr_t)marks;
        c.excl_hi[c.nexcl++] = (uintptr_t)marks + marks_sz;
        c.excl_lo[c.nexcl] = (uintptr_t)stack;
        c.excl_hi[c.nexcl++] = (uintptr_t)stack + stack_sz;
        if (hk__guard_os_writable_ranges(guard_leak_root, &c) < 0) {
            for (uint32_t id = 1; id < g->nslots; id++) marks[id] = 1; /* cannot tell: report nothing */
        }
        while (c.nstack > 0) {
            const guard_slot *s = &g->slots[c.stack[--c.nstack]];
            c.scan_lo = guard_user(g, s);
            c.scan_hi = c.scan_lo + s->requested;
            guard_leak_scan_range(&c);
        }
    }
    /* padding of every live block, at exit as on free (after the scan:
     * pointers into blocks left in registers or on the stack by this loop
     * must not make them look reachable) */
    for (uint32_t id = 1; id < g->nslots; id++) {
        const guard_slot *s = &g->slots[id];
        uintptr_t at;
        int d;
        if (s->state == GUARD_STATE_LIVE && (d = guard_pads_damaged(g, s, &at)) != 0) {
            __atomic_add_fetch(&g->reports, 1, __ATOMIC_RELAXED);
            hk__report(&g->rep, HK_ERR_CORRUPT, d > 0 ? HK_EK_HEAP_OVERFLOW : HK_EK_HEAP_UNDERFLOW,
                       (void *)at, s->requested, NULL,
                       "padding of live %zu-byte block %p damaged at offset %+lld (found at exit)",
                       s->requested, (void *)guard_user(g, s), (long long)(at - guard_user(g, s)));
        }
    }
    for (uint32_t id = 1; id < g->nslots; id++) {
        const guard_slot *s = &g->slots[id];
        if (s->state != GUARD_STATE_LIVE || marks[id]) continue;
        leaked++;
        leaked_bytes += s->requested;
        uint32_t t = s->alloc_trace <= g->ntraces ? s->alloc_trace : 0;
        groups[t].trace = t;
        groups[t].count++;
        groups[t].bytes += s->requested;
    }
    /* compact the groups and sort them, largest first */
    for (size_t t = 0; t <= g->ntraces; t++)
        if (groups[t].count) groups[ngroups++] = groups[t];
    for (size_t i = ngroups / 2; i-- > 0;) guard_group_sift(groups, ngroups, i);
    for (size_t n = ngroups; n > 1; n--) {
        guard_leak_group t = groups[0];
        groups[0] = groups[n - 1];
        groups[n - 1] = t;
        guard_group_sift(groups, n - 1, 0);
    }
    if (leaked) {
        __atomic_add_fetch(&g->reports, 1, __ATOMIC_RELAXED);
        hk__report(&g->rep, HK_ERR_CORRUPT, HK_EK_LEAK, NULL, leaked_bytes, NULL,
                   "%zu bytes in %zu blocks %s at exit, from %zu allocation stacks", leaked_bytes, leaked,
                   mode == HK_GUARD_LEAKS_ALL ? "still live" : "unreachable", ngroups);
        if (g->flags & HK_GUARD_REPORT) {
            guard_report_begin();
            for (size_t i = 0; i < ngroups && i < 32; i++) {
                guard_out o = {guard_report_buf, 0, sizeof guard_report_buf};
                guard_out_prefix(&o);
                guard_out_str(&o, "leak: ");
                guard_out_dec(&o, groups[i].bytes);
                guard_out_str(&o, " bytes in ");
                guard_out_dec(&o, groups[i].count);
                guard_out_str(&o, groups[i].count == 1 ? " block" : " blocks");
                guard_out_str(&o, mode == HK_GUARD_LEAKS_ALL ? " still live" : " unreachable");
                guard_out_str(&o, ", allocated at:");
                int n;
                const void *const *fr = guard_trace_get(g, groups[i].trace, &n);
                uint32_t saved = g->flags;
                g->flags &= ~(uint32_t)HK_GUARD_ABORT;
                guard_report_finish(g, &o, (void *const *)(uintptr_t)fr, fr ? n : 0, 0, NULL);
                g->flags = saved;
            }
            guard_out o = {guard_report_buf, 0, sizeof guard_report_buf};
            guard_out_prefix(&o);
            guard_out_str(&o, "leak summary: ");
            guard_out_dec(&o, leaked_bytes);
            guard_out_str(&o, " bytes in ");
            guard_out_dec(&o, leaked);
            guard_out_str(&o, " blocks from ");
            guard_out_dec(&o, ngroups);
            guard_out_str(&o, ngroups == 1 ? " allocation stack" : " allocation stacks");
            if (ngroups > 32) guard_out_str(&o, " (the 32 largest shown)");
            guard_out_str(&o, "\n");
            hk__guard_os_write(g->report_fd, o.buf, o.n);
            guard_report_end();
        }
    }
out:
    guard_unlock(g);
    if (marks) hk_os_release(marks, marks_sz);
    if (stack) hk_os_release(stack, stack_sz);
    if (groups) hk_os_release(groups, groups_sz);
    if (bytes_out) *bytes_out = leaked_bytes;
    return leaked;
}
