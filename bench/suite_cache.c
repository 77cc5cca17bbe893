/*
 * bench/suite_cache.c - the cache's three workloads (issue 5):
 *
 *  1. deref: reaching 64-byte blocks through handles in a tight loop, against
 *     the same loop over raw pointers (target: within 1.2x): deref_fast,
 *     deref_fast through a reader (hk_cache_reader), and hk_cache_deref.
 *  2. compact: bytes moved per second by a full compaction of a fragmented
 *     cache, against one memmove of the same byte count over the same
 *     distance (target: at least 0.5x of memmove), and for information
 *     against memmove replaying the blocks' moves one by one and against the
 *     friendliest memmove (4 KiB apart). Two layouts: every other block freed
 *     (each moves alone) and a random quarter freed (runs move together).
 *  3. fragmentation: a mixed-lifetime workload that fills a heap of N bytes
 *     until the first allocation fails; the occupancy (live requested bytes /
 *     N) at that point, for the cache (with compaction) and for glibc held to
 *     the same N (target: the cache reaches at least 95%).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "harness.h"
#include "heapkit/cache.h"
#include "heapkit/zone.h"
#include "internal.h" /* hk__san_access: the baselines write into a region ASan guards */

#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hkb_suite_cache(hkb_ctx *ctx);

#define S "cache"

static void quiet_errors(const hk_error *e, void *u) {
    (void)e;
    (void)u;
}

static hk_cache *bench_cache(size_t size, uint32_t handles) {
    return hk_cache_create(&(hk_cache_desc){.size = size,
                                            .max_handles = handles,
                                            .flags = HK_FLAG_QUIET,
                                            .on_error = quiet_errors,
                                            .name = "bench"});
}

/* ---- 1. deref ---------------------------------------------------------------- */

#define DEREF_N 4096

static uint64_t sum64(const uint64_t *p) { return p[0] + p[1] + p[2] + p[3] + p[4] + p[5] + p[6] + p[7]; }

static void bench_deref(hkb_ctx *ctx) {
    hkb_section(S, "deref_sequential",
                "ns per access of a 64-byte block: raw pointer vs handle (lower is better)");
    hk_cache *c = bench_cache(4u << 20, DEREF_N);
    hk_cache_handle *hs = malloc(DEREF_N * sizeof *hs);
    uint64_t **ptrs = malloc(DEREF_N * sizeof *ptrs);
    uint32_t *order = malloc(DEREF_N * sizeof *order);
    uint64_t seed = ctx->seed;
    for (int i = 0; i < DEREF_N; i++) {
        hs[i] = hk_cache_alloc(c, 64, "d");
        ptrs[i] = hk_cache_deref(c, hs[i]);
        for (int k = 0; k < 8; k++) ptrs[i][k] = (uint64_t)(i + k);
        order[i] = (uint32_t)i;
    }
    for (int pass = 0; pass < 2; pass++) {
        const char *wl = pass ? "deref_random" : "deref_sequential";
        if (pass) hkb_section(S, wl, "the same, visiting the blocks in a random order");
        if (pass) {
            for (int i = DEREF_N - 1; i > 0; i--) { /* the same order for all three */
                uint32_t j = (uint32_t)(hkb_rand(&seed) % (uint64_t)(i + 1)), t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
        }
        int rounds = ctx->quick ? 100 : 500;
        double raw[16], fast[16], call[16], rd[16];
        int reps = ctx->reps > 16 ? 16 : ctx->reps;
        uint64_t sink = 0;
        for (int r = 0; r < reps; r++) {
            /* Each loop sums into its own local, added to `sink` afterwards:
             * `sink` has its address taken (hkb_sink), and summing into it
             * across the out-of-line calls of the handle loops would keep it in
             * memory, a store-to-load chain per access that the raw loop (no
             * call) does not pay. */
            uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
            uint64_t t0 = hkb_now_ns();
            for (int k = 0; k < rounds; k++)
                for (int i = 0; i < DEREF_N; i++) a0 += sum64(ptrs[order[i]]);
            uint64_t t1 = hkb_now_ns();
            for (int k = 0; k < rounds; k++)
                for (int i = 0; i < DEREF_N; i++) a1 += sum64(hk_cache_deref_fast(c, hs[order[i]]));
            uint64_t t2 = hkb_now_ns();
            for (int k = 0; k < rounds; k++)
                for (int i = 0; i < DEREF_N; i++) a2 += sum64(hk_cache_deref(c, hs[order[i]]));
            uint64_t t3 = hkb_now_ns();
            hk_cache_reader rr = hk_cache_reader_of(c);
            for (int k = 0; k < rounds; k++)
                for (int i = 0; i < DEREF_N; i++) a3 += sum64(hk_cache_reader_deref(&rr, hs[order[i]]));
            uint64_t t4 = hkb_now_ns();
            sink += a0 + a1 + a2 + a3;
            double n = (double)rounds * DEREF_N;
            raw[r] = (double)(t1 - t0) / n;
            fast[r] = (double)(t2 - t1) / n;
            call[r] = (double)(t3 - t2) / n;
            rd[r] = (double)(t4 - t3) / n;
        }
        hkb_sink(&sink);
        double mr = hkb_median(raw, reps), mf = hkb_median(fast, reps), mc = hkb_median(call, reps);
        double mrd = hkb_median(rd, reps);
        hkb_record(S, wl, "raw pointer", "ns_per_access", mr, "ns");
        hkb_record(S, wl, "heapkit deref_fast", "ns_per_access", mf, "ns");
        hkb_record(S, wl, "heapkit deref", "ns_per_access", mc, "ns");
        hkb_record(S, wl, "heapkit reader_deref", "ns_per_access", mrd, "ns");
        hkb_record(S, wl, "heapkit deref_fast", "ratio_vs_raw", mf / mr, "x");
        hkb_record(S, wl, "heapkit deref", "ratio_vs_raw", mc / mr, "x");
        hkb_record(S, wl, "heapkit reader_deref", "ratio_vs_raw", mrd / mr, "x");
        hkb_skip(S, wl, "malloc peers",
                 "handles have no malloc counterpart: the baseline is the raw pointer");
    }
    hk_cache_destroy(c);
    free(hs);
    free(ptrs);
    free(order);
}

/* ---- 2. compaction throughput ---------------------------------------------------- */

typedef struct move_rec {
    size_t src, dst, len;
} move_rec;

typedef struct layout_rec {
    unsigned char *lo;
    size_t n, cap;
    move_rec *m;
} layout_rec;

static int record_block(const hk_block_info *bi, void *user) {
    layout_rec *l = (layout_rec *)user;
    if (!(bi->flags & HK_BLOCK_USED)) return 0;
    if (!l->lo) l->lo = (unsigned char *)bi->address;
    if (l->n < l->cap) {
        l->m[l->n].src = (size_t)((unsigned char *)bi->address - l->lo);
        l->m[l->n].len = bi->size + 16; /* the whole block moves, header included */
        l->m[l->n].dst = bi->id;        /* temporarily: the handle */
        l->n++;
    }
    return 0;
}

/* Builds a fragmented cache: blocks of 64..4096 bytes filling it, then
 * every other one freed (every_other: each live block alone between two
 * holes, one memmove per block) or a random quarter freed (runs of about
 * three adjacent blocks that compaction moves with one memmove each). */
static hk_cache *fragmented(size_t size, uint64_t *seed, hk_cache_handle *hs, int max, int *n_out,
                            int every_other) {
    hk_cache *c = bench_cache(size + 4096, (uint32_t)max - 1u); /* 2^k - 1 handles: no hot entry wasted */
    int n = 0;
    for (; n < max; n++) {
        size_t sz = 64 + (size_t)(hkb_rand(seed) % 4033);
        hs[n] = hk_cache_alloc(c, sz, "blk");
        if (!hs[n].value) break;
        memset(hk_cache_deref(c, hs[n]), n & 0xFF, sz);
    }
    for (int i = 0; i < n; i++)
        if (every_other ? (i & 1) == 0 : hkb_rand(seed) % 4 == 0) hk_cache_free(c, hs[i]);
    *n_out = n;
    return c;
}

typedef struct region_rec {
    unsigned char *lo; /* the region's start: the first block's header */
    size_t size;
} region_rec;

static int first_block(const hk_block_info *bi, void *user) {
    region_rec *r = (region_rec *)user;
    r->lo = (unsigned char *)bi->address - 16;
    return 1;
}

/* The region of a fresh fragmented cache, whose bytes the baselines move
 * (the cache is destroyed afterwards without being used again). */
static region_rec region_of(hk_cache *c) {
    region_rec r = {NULL, 0};
    hk_stats st;
    hk_cache_stats(c, &st);
    hk_cache_walk(c, first_block, &r);
    r.size = st.capacity;
    hk__san_access(r.lo, r.size);
    return r;
}

/* Fairness: every timed operation, the compaction and each memmove baseline,
 * runs right after building the same fragmented cache from the same seed, on
 * that cache's own region: the same bytes, the same memory, in the same
 * state (just written, equally warm or cold). "one call" moves all the
 * bytes the compaction moves with one memmove over the distance the last
 * block travels (the free bytes below it); "per block" replays the
 * compaction's moves block by block; "4 KiB apart" is the friendliest
 * memmove there is (it writes the lines it read 4 KiB before, still in L1),
 * recorded for information only. */
static void bench_compact_one(hkb_ctx *ctx, const char *wl, int every_other) {
    size_t size = ctx->quick ? (8u << 20) : (32u << 20);
    int max = (int)(size / 64);
    hk_cache_handle *hs = malloc((size_t)max * sizeof *hs);
    move_rec *moves = malloc((size_t)max * sizeof *moves);
    int reps = ctx->reps > 16 ? 16 : ctx->reps;
    double cache_bps[16], replay_bps[16], one_bps[16], near_bps[16], step_bps[16], runs[16];
    size_t moved_bytes = 0;
    for (int r = 0; r < reps; r++) {
        uint64_t seed0 = ctx->seed + (uint64_t)r, seed = seed0;
        int n;
        hk_cache *c = fragmented(size, &seed, hs, max, &n, every_other);
        hk_stats st;
        hk_cache_stats(c, &st);
        size_t gap = st.free;
        region_rec reg = region_of(c);
        /* where every live block is before, to replay the same moves */
        layout_rec before = {NULL, 0, (size_t)max, moves};
        hk_cache_walk(c, record_block, &before);
        size_t moved = 0;
        uint64_t t0 = hkb_now_ns();
        hk_cache_compact_step(c, 0, 0, &moved);
        uint64_t t1 = hkb_now_ns();
        cache_bps[r] = (double)moved / ((double)(t1 - t0) / 1e9);
        moved_bytes = moved;
        /* the moves, as offsets in the region */
        size_t nruns = 0;
        for (size_t i = 0; i < before.n; i++) {
            hk_cache_handle h = {(uint32_t)moves[i].dst};
            moves[i].dst = (size_t)((unsigned char *)hk_cache_deref(c, h) - 16 - reg.lo);
            moves[i].src = (size_t)(before.lo + moves[i].src - reg.lo);
            if (moves[i].dst != moves[i].src &&
                (i == 0 || moves[i - 1].src + moves[i - 1].len != moves[i].src ||
                 moves[i - 1].dst == moves[i - 1].src))
                nruns++;
        }
        runs[r] = (double)nruns;
        hk_cache_destroy(c);
        if (gap + moved > reg.size) gap = reg.size - moved;
        /* per block, in a fresh copy of the same cache */
        seed = seed0;
        c = fragmented(size, &seed, hs, max, &n, every_other);
        reg = region_of(c);
        size_t replayed = 0;
        uint64_t t2 = hkb_now_ns();
        for (size_t i = 0; i < before.n; i++)
            if (moves[i].dst != moves[i].src) {
                memmove(reg.lo + moves[i].dst, reg.lo + moves[i].src, moves[i].len);
                replayed += moves[i].len;
            }
        uint64_t t3 = hkb_now_ns();
        hkb_sink(reg.lo);
        replay_bps[r] = (double)replayed / ((double)(t3 - t2) / 1e9);
        hk_cache_destroy(c);
        /* one call, likewise */
        seed = seed0;
        c = fragmented(size, &seed, hs, max, &n, every_other);
        reg = region_of(c);
        uint64_t t4 = hkb_now_ns();
        memmove(reg.lo, reg.lo + gap, moved);
        uint64_t t5 = hkb_now_ns();
        hkb_sink(reg.lo);
        one_bps[r] = (double)moved / ((double)(t5 - t4) / 1e9);
        hk_cache_destroy(c);
        /* 4 KiB apart (information) */
        seed = seed0;
        c = fragmented(size, &seed, hs, max, &n, every_other);
        reg = region_of(c);
        uint64_t t6 = hkb_now_ns();
        memmove(reg.lo, reg.lo + 4096, moved);
        uint64_t t7 = hkb_now_ns();
        hkb_sink(reg.lo);
        near_bps[r] = (double)moved / ((double)(t7 - t6) / 1e9);
        hk_cache_destroy(c);
        /* the same compaction in 256 KiB slices */
        seed = seed0;
        c = fragmented(size, &seed, hs, max, &n, every_other);
        size_t smoved = 0;
        uint64_t t8 = hkb_now_ns();
        while (hk_cache_compact_step(c, 256u << 10, 0, &smoved)) {
        }
        uint64_t t9 = hkb_now_ns();
        step_bps[r] = (double)smoved / ((double)(t9 - t8) / 1e9);
        hk_cache_destroy(c);
    }
    double mc = hkb_median(cache_bps, reps), mrp = hkb_median(replay_bps, reps),
           mo = hkb_median(one_bps, reps), mn = hkb_median(near_bps, reps), ms = hkb_median(step_bps, reps);
    hkb_record(S, wl, "heapkit compact", "bytes_moved", (double)moved_bytes, "B");
    hkb_record(S, wl, "heapkit compact", "runs_moved", hkb_median(runs, reps), "memmoves");
    hkb_record(S, wl, "heapkit compact", "throughput", mc / 1e6, "MB/s");
    hkb_record(S, wl, "heapkit compact_step 256K", "throughput", ms / 1e6, "MB/s");
    hkb_record(S, wl, "memmove per block", "throughput", mrp / 1e6, "MB/s");
    hkb_record(S, wl, "memmove one call", "throughput", mo / 1e6, "MB/s");
    hkb_record(S, wl, "memmove one call 4K apart", "throughput", mn / 1e6, "MB/s");
    hkb_record(S, wl, "heapkit compact", "ratio_vs_memmove_one_call", mc / mo, "x");
    hkb_record(S, wl, "heapkit compact_step 256K", "ratio_vs_memmove_one_call", ms / mo, "x");
    hkb_record(S, wl, "heapkit compact", "ratio_vs_memmove_per_block", mc / mrp, "x");
    hkb_record(S, wl, "heapkit compact", "ratio_vs_memmove_4K_apart", mc / mn, "x");
    hkb_skip(S, wl, "malloc peers", "no malloc moves blocks: the baseline is memmove");
    free(hs);
    free(moves);
}

static void bench_compact(hkb_ctx *ctx) {
    hkb_section(S, "compact",
                "bytes moved per second by a full compaction, every other block freed (higher is better)");
    bench_compact_one(ctx, "compact", 1);
    hkb_section(S, "compact_runs",
                "the same with a random quarter of the blocks freed: runs of adjacent blocks");
    bench_compact_one(ctx, "compact_runs", 0);
}

/* ---- 3. allocation under fragmentation ------------------------------------------------ */

/* The workload: each step allocates one block (sizes: half 32..512, a third
 * 512..8K, the rest 8K..64K) with a lifetime: short (75%: freed 20..400
 * steps later), medium (20%: 1000..20000) or long (5%: never), so the heap
 * fills slowly while it churns. Runs until the first allocation that fails. */
typedef struct frag_op {
    size_t size;
    int64_t death; /* step at which it is freed, -1 never */
} frag_op;

static frag_op frag_next(uint64_t *seed, int64_t step) {
    frag_op o;
    uint64_t k = hkb_rand(seed) % 100;
    o.size = k < 50   ? 32 + hkb_rand(seed) % 481
             : k < 85 ? 512 + hkb_rand(seed) % 7681
                      : 8192 + hkb_rand(seed) % 57345;
    uint64_t l = hkb_rand(seed) % 100;
    o.death = l < 75   ? step + 20 + (int64_t)(hkb_rand(seed) % 381)
              : l < 95 ? step + 1000 + (int64_t)(hkb_rand(seed) % 19001)
                       : -1;
    return o;
}

typedef struct frag_live {
    void *p;
    uint32_t h;
    size_t size;
    int64_t death;
} frag_live;

/* A tiny binary heap of deaths keeps the workload itself O(log n). */
typedef struct frag_state {
    frag_live *v;
    size_t n, cap;
    size_t live_bytes;
} frag_state;

static void fs_push(frag_state *s, frag_live x) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
    }
    size_t i = s->n++;
    s->v[i] = x;
    while (i && s->v[(i - 1) / 2].death > s->v[i].death) {
        frag_live t = s->v[i];
        s->v[i] = s->v[(i - 1) / 2];
        s->v[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static frag_live fs_pop(frag_state *s) {
    frag_live top = s->v[0];
    s->v[0] = s->v[--s->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < s->n && s->v[l].death < s->v[m].death) m = l;
        if (l + 1 < s->n && s->v[l + 1].death < s->v[m].death) m = l + 1;
        if (m == i) break;
        frag_live t = s->v[i];
        s->v[i] = s->v[m];
        s->v[m] = t;
        i = m;
    }
    return top;
}

#define NEVER INT64_MAX

static double frag_cache(size_t limit, uint64_t seed, double *with_table, int64_t *steps_out) {
    uint32_t handles = (uint32_t)(limit / 2048) - 1u; /* about twice the blocks live at the end; 2^k - 1 */
    hk_cache *c = bench_cache(limit, handles);
    hk_cache_info ci;
    hk_cache_get_info(c, &ci);
    size_t region = ci.region_bytes;
    frag_state s = {0};
    int64_t step = 0;
    for (;; step++) {
        while (s.n && s.v[0].death <= step) {
            frag_live x = fs_pop(&s);
            hk_cache_free(c, (hk_cache_handle){x.h});
            s.live_bytes -= x.size;
        }
        frag_op o = frag_next(&seed, step);
        hk_cache_handle h = hk_cache_alloc(c, o.size, "w");
        if (!h.value) break;
        memset(hk_cache_deref(c, h), 0x5A, o.size < 64 ? o.size : 64);
        fs_push(&s, (frag_live){NULL, h.value, o.size, o.death < 0 ? NEVER : o.death});
        s.live_bytes += o.size;
    }
    double occ = (double)s.live_bytes / (double)region;
    /* the handle table lives apart from the region: count it too */
    *with_table = (double)s.live_bytes / (double)(region + ci.table_bytes);
    *steps_out = step;
    hk_cache_destroy(c);
    free(s.v);
    return occ;
}

/* The zone (a non-moving heap) given exactly `limit` bytes of caller
 * memory: its control block counts against the limit, as the cache's does. */
static double frag_zone(size_t limit, uint64_t seed, int64_t *steps_out) {
    void *mem = malloc(limit);
    if (!mem) return 0;
    hk_zone *z =
        hk_zone_create(&(hk_zone_desc){.memory = mem, .size = limit, .name = "frag", .flags = HK_FLAG_QUIET});
    if (!z) {
        free(mem);
        return 0;
    }
    frag_state s = {0};
    int64_t step = 0;
    for (;; step++) {
        while (s.n && s.v[0].death <= step) {
            frag_live x = fs_pop(&s);
            hk_zone_free(z, x.p);
            s.live_bytes -= x.size;
        }
        frag_op o = frag_next(&seed, step);
        void *p = hk_zone_alloc(z, o.size);
        if (!p) break;
        memset(p, 0x5A, o.size < 64 ? o.size : 64);
        fs_push(&s, (frag_live){p, 0, o.size, o.death < 0 ? NEVER : o.death});
        s.live_bytes += o.size;
    }
    double occ = (double)s.live_bytes / (double)limit;
    *steps_out = step;
    hk_zone_destroy(z);
    free(mem);
    free(s.v);
    return occ;
}

typedef struct glibc_job {
    size_t limit;
    uint64_t seed;
    double occ;
    int64_t steps;
} glibc_job;

/* glibc held to `limit`: an allocation "fails" when the heap span it needs
 * (from the first block's address to the end of the highest live block)
 * passes the limit. Runs in its own thread so glibc gives it a fresh arena. */
static void *glibc_frag(void *arg) {
    glibc_job *j = (glibc_job *)arg;
    frag_state s = {0};
    uintptr_t base = 0, top = 0;
    uint64_t seed = j->seed;
    int64_t step = 0;
    for (;; step++) {
        while (s.n && s.v[0].death <= step) {
            frag_live x = fs_pop(&s);
            free(x.p);
            s.live_bytes -= x.size;
        }
        frag_op o = frag_next(&seed, step);
        void *p = malloc(o.size);
        if (!p) break;
        uintptr_t a = (uintptr_t)p, e = a + malloc_usable_size(p);
        if (!base) base = a;
        if (a < base) base = a;
        if (e > top) top = e;
        if (top - base > j->limit) {
            free(p);
            break;
        }
        memset(p, 0x5A, o.size < 64 ? o.size : 64);
        fs_push(&s, (frag_live){p, 0, o.size, o.death < 0 ? NEVER : o.death});
        s.live_bytes += o.size;
        /* the top only falls when the highest blocks die: recompute rarely */
        if ((step & 1023) == 0) {
            uintptr_t t = 0;
            for (size_t i = 0; i < s.n; i++) {
                uintptr_t x = (uintptr_t)s.v[i].p + malloc_usable_size(s.v[i].p);
                if (x > t) t = x;
            }
            top = t;
        }
    }
    j->occ = (double)s.live_bytes / (double)j->limit;
    j->steps = step;
    for (size_t i = 0; i < s.n; i++) free(s.v[i].p);
    free(s.v);
    return NULL;
}

static void bench_fragmentation(hkb_ctx *ctx) {
    hkb_section(S, "fragmentation",
                "occupancy (live requested bytes / heap size) at the first failed allocation");
    size_t limit = ctx->quick ? (8u << 20) : (32u << 20);
    int reps = ctx->reps > 16 ? 16 : ctx->reps;
    double occ_c[16], occ_ct[16], occ_g[16], occ_z[16], steps_c[16], steps_g[16], steps_z[16];
    for (int r = 0; r < reps; r++) {
        uint64_t seed = ctx->seed * 31u + (uint64_t)r;
        int64_t st;
        occ_c[r] = frag_cache(limit, seed, &occ_ct[r], &st);
        steps_c[r] = (double)st;
        glibc_job j = {limit, seed, 0, 0};
        pthread_t t;
        if (pthread_create(&t, NULL, glibc_frag, &j) == 0)
            pthread_join(t, NULL);
        else
            glibc_frag(&j);
        occ_g[r] = j.occ;
        steps_g[r] = (double)j.steps;
        occ_z[r] = frag_zone(limit, seed, &st);
        steps_z[r] = (double)st;
    }
    double oc = hkb_median(occ_c, reps), oct = hkb_median(occ_ct, reps), og = hkb_median(occ_g, reps);
    hkb_record(S, "fragmentation", "heapkit cache", "occupancy", oc * 100, "%");
    hkb_record(S, "fragmentation", "heapkit cache", "occupancy_incl_handle_table", oct * 100, "%");
    hkb_record(S, "fragmentation", "heapkit cache", "steps_to_failure", hkb_median(steps_c, reps), "allocs");
    hkb_record(S, "fragmentation", "glibc", "occupancy", og * 100, "%");
    hkb_record(S, "fragmentation", "glibc", "steps_to_failure", hkb_median(steps_g, reps), "allocs");
    hkb_record(S, "fragmentation", "heapkit cache", "ratio_vs_glibc", oc / og, "x");
    double oz = hkb_median(occ_z, reps);
    hkb_record(S, "fragmentation", "zone", "occupancy", oz * 100, "%");
    hkb_record(S, "fragmentation", "zone", "steps_to_failure", hkb_median(steps_z, reps), "allocs");
    hkb_record(S, "fragmentation", "heapkit cache", "ratio_vs_zone", oc / oz, "x");
    hkb_skip(S, "fragmentation", "mimalloc/jemalloc/tcmalloc",
             "no way to hold them to a byte limit: they spread size classes over separate pages");
}

void hkb_suite_cache(hkb_ctx *ctx) {
    bench_deref(ctx);
    bench_compact(ctx);
    bench_fragmentation(ctx);
}
