/*
 * tests/test_oom.c - out of memory, injected at every OS call of a small
 * workload, for every allocator (hunk, zone, cache alone and in a hunk,
 * pool, gc, guard), in the manner of SQLite's malloc tests.
 *
 * A sweep runs the workload with the failure point (src/os.h) armed at
 * N = 1, 2, ... (the N-th page acquisition fails once; then again with
 * every acquisition from the N-th on failing), until a run sees no
 * injected failure, and with the random point (a third of acquisitions
 * failing) for a few seeds. The gc, and the pool's overflow path, take
 * their memory through backing hooks; here those hooks take whole pages
 * from the OS layer, so every byte the workload gets passes the point.
 *
 * Every workload asserts, after every call that needed memory:
 *  - a call that failed did so because an injected failure fired during
 *    it (the workloads never ask for more than the instance can give), and
 *    said so: NULL / HK_ERR_NOMEM, and an HK_EK_NOMEM report;
 *  - every block already allocated still holds what was written to it;
 *  - the instance's check passes.
 * Then it disarms the point ("memory is available again"), verifies every
 * block once more, allocates again (which must succeed), frees everything,
 * checks and destroys.
 */
#include "hk_test.h"
#include "internal.h"

#include "heapkit/cache.h"
#include "heapkit/gc.h"
#include "heapkit/guard.h"
#include "heapkit/hunk.h"
#include "heapkit/pool.h"
#include "heapkit/zone.h"

/* ---- the harness ----------------------------------------------------------------- */

#define OOM_BLOCKS 48

typedef struct oom_block {
    unsigned char *p;
    size_t n;
    unsigned char seed;
    uint32_t id; /* pool ID, cache handle */
    void *obj;   /* gc object */
} oom_block;

typedef struct oom_ctx {
    hkt_errors errs;
    oom_block b[OOM_BLOCKS];
    int nb;
    int failed_calls; /* calls that failed (each under an injected failure) */
    int failed_creates;
    int armed;
} oom_ctx;

static void oom_paint(oom_block *b) {
    for (size_t i = 0; i < b->n; i++) b->p[i] = (unsigned char)(b->seed + i * 7);
}
static int oom_intact(const oom_block *b, const unsigned char *p) {
    for (size_t i = 0; i < b->n; i++)
        if (p[i] != (unsigned char)(b->seed + i * 7)) return 0;
    return 1;
}

static void oom_disarm(oom_ctx *c) {
    hk_os_fail_after(0, false);
    hk_os_fail_random(0, 0);
    c->armed = 0;
}

/* A call that needed memory just returned; ok tells whether it succeeded.
 * fired: the failure point's count before the call; errs: the report count
 * before it. */
static void oom_outcome(oom_ctx *c, int ok, uint64_t fired, int errs, const char *what) {
    if (ok) return;
    c->failed_calls++;
    if (hk_os_fail_count() == fired || c->errs.count <= errs || c->errs.last_kind != HK_EK_NOMEM) {
        printf("    %s failed: injected %d, reports %d -> %d, last kind %d (%s)\n", what,
               hk_os_fail_count() != fired, errs, c->errs.count, (int)c->errs.last_kind,
               c->errs.last_message);
    }
    CHECK(hk_os_fail_count() != fired); /* only an injected failure may make it fail */
    CHECK(c->errs.count > errs);        /* and it was reported */
    CHECK_EQ(c->errs.last_kind, HK_EK_NOMEM);
}

#define OOM_TRY(c, ok_expr, what)                                                                            \
    do {                                                                                                     \
        uint64_t fired_ = hk_os_fail_count();                                                                \
        int errs_ = (c)->errs.count;                                                                         \
        int ok_ = (ok_expr);                                                                                 \
        oom_outcome((c), ok_, fired_, errs_, (what));                                                        \
    } while (0)

/* A create that returned NULL: only under an injected failure, and
 * reported as HK_EK_NOMEM through the desc's on_error. */
static void oom_create_failed(oom_ctx *c, uint64_t fired, int errs, const char *what) {
    c->failed_creates++;
    if (c->errs.count <= errs || c->errs.last_kind != HK_EK_NOMEM)
        printf("    %s create failed: reports %d -> %d, last kind %d\n", what, errs, c->errs.count,
               (int)c->errs.last_kind);
    CHECK(hk_os_fail_count() != fired);
    CHECK(c->errs.count > errs);
    CHECK_EQ(c->errs.last_kind, HK_EK_NOMEM);
}

typedef void (*oom_workload)(oom_ctx *c);

/* Runs the workload with the N-th acquisition failing, for N = 1, 2, ...
 * (once, then persistently), until a run sees no injected failure; then
 * with random failures for a few seeds. Returns the number of calls and
 * creates that failed over the sweep (a sweep that never failed anything
 * tested nothing). */
static int oom_sweep(oom_workload w) {
    int failed = 0;
    for (int persistent = 0; persistent < 2; persistent++) {
        for (uint64_t n = 1;; n++) {
            REQUIRE(n < 400); /* the workloads make far fewer acquisitions */
            oom_ctx c;
            memset(&c, 0, sizeof c);
            c.errs.quiet = 1;
            uint64_t before = hk_os_fail_count();
            c.armed = 1;
            hk_os_fail_after(n, persistent != 0);
            w(&c);
            oom_disarm(&c);
            failed += c.failed_calls + c.failed_creates;
            if (hk_os_fail_count() == before) { /* ran to the end with nothing injected */
                if (getenv("HKT_VERBOSE"))
                    printf("    %s: %d runs, %d calls and creates failed\n",
                           persistent ? "persistent" : "once", (int)n, failed);
                break;
            }
        }
    }
    for (uint64_t seed = 1; seed <= 12; seed++) {
        oom_ctx c;
        memset(&c, 0, sizeof c);
        c.errs.quiet = 1;
        c.armed = 1;
        hk_os_fail_random(330000, seed);
        w(&c);
        oom_disarm(&c);
        failed += c.failed_calls + c.failed_creates;
    }
    return failed;
}

/* Backing hooks that take whole pages from the OS layer (through the
 * failure point). */
static void *oom_os_alloc(size_t n, void *user) {
    (void)user;
    return hk_os_alloc(n);
}
static void oom_os_free(void *p, size_t n, void *user) {
    (void)user;
    hk_os_release(p, n);
}

/* ---- zone --------------------------------------------------------------------------- */

static int zone_all_intact(hk_zone *z, oom_ctx *c) {
    for (int i = 0; i < c->nb; i++)
        if (c->b[i].p && !oom_intact(&c->b[i], c->b[i].p)) return 0;
    return hk_zone_check(z) == HK_OK;
}

static void oom_zone(oom_ctx *c) {
    hk_zone_desc d = {0};
    d.size = 64 << 10;
    d.grow_size = 64 << 10;
    d.on_error = hkt_on_error;
    d.error_user = &c->errs;
    uint64_t fired = hk_os_fail_count();
    int errs = c->errs.count;
    hk_zone *z = hk_zone_create(&d);
    if (!z) {
        oom_create_failed(c, fired, errs, "zone");
        return;
    }
    static const size_t sizes[] = {24, 100, 3000, 40000, 200000, 64, 700, 90000, 5, 1 << 20};
    for (int i = 0; i < 20; i++) {
        oom_block *b = &c->b[c->nb];
        b->n = sizes[i % 10] + (size_t)i;
        b->seed = (unsigned char)(i * 13);
        if (i % 5 == 3) {
            OOM_TRY(c, (b->p = hk_zone_alloc_aligned(z, 4096, b->n)) != NULL, "zone alloc_aligned");
        } else if (i % 5 == 4 && c->nb > 0 && c->b[c->nb - 1].p) { /* grow the previous block */
            oom_block *prev = &c->b[c->nb - 1];
            size_t bigger = prev->n * 3 + 1000;
            unsigned char *q = NULL;
            OOM_TRY(c, (q = hk_zone_realloc(z, prev->p, bigger)) != NULL, "zone realloc");
            if (q) {
                CHECK(oom_intact(prev, q));
                prev->p = q;
                prev->n = bigger;
                oom_paint(prev);
            }
            CHECK(zone_all_intact(z, c));
            continue;
        } else {
            OOM_TRY(c, (b->p = hk_zone_alloc(z, b->n)) != NULL, "zone alloc");
        }
        if (b->p) oom_paint(b);
        c->nb++;
        CHECK(zone_all_intact(z, c));
        if (i == 9 && c->b[2].p) { /* free one in the middle */
            CHECK_EQ(hk_zone_free(z, c->b[2].p), HK_OK);
            c->b[2].p = NULL;
        }
    }
    oom_disarm(c);
    CHECK(zone_all_intact(z, c));
    void *again = hk_zone_alloc(z, 300000);
    CHECK(again != NULL);
    hk_zone_free(z, again);
    for (int i = 0; i < c->nb; i++)
        if (c->b[i].p) CHECK_EQ(hk_zone_free(z, c->b[i].p), HK_OK);
    hk_stats st;
    hk_zone_stats(z, &st);
    CHECK_EQ(st.live_blocks, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(oom_sweep_zone) { CHECK(oom_sweep(oom_zone) > 0); }

/* ---- hunk ---------------------------------------------------------------------------- */

static void oom_hunk(oom_ctx *c) {
    hk_hunk_desc d = {0};
    d.size = 256 << 10;
    d.on_error = hkt_on_error;
    d.error_user = &c->errs;
    uint64_t fired = hk_os_fail_count();
    int errs = c->errs.count;
    hk_hunk *h = hk_hunk_create(&d);
    if (!h) {
        oom_create_failed(c, fired, errs, "hunk");
        return;
    }
    hk_hunk_mark m = hk_hunk_low_mark(h);
    for (int i = 0; i < 12; i++) {
        oom_block *b = &c->b[c->nb];
        b->n = 100 + (size_t)i * 300;
        b->seed = (unsigned char)i;
        b->p = (i & 1) ? hk_hunk_alloc_high(h, b->n, "hi") : hk_hunk_alloc(h, b->n, "lo");
        CHECK(b->p != NULL); /* no OS call: always there */
        if (b->p) oom_paint(b);
        c->nb++;
    }
    oom_disarm(c);
    for (int i = 0; i < c->nb; i++) CHECK(oom_intact(&c->b[i], c->b[i].p));
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, m), HK_OK);
    CHECK(hk_hunk_alloc(h, 1000, "again") != NULL);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

HKT_TEST(oom_sweep_hunk) { CHECK(oom_sweep(oom_hunk) > 0); }

/* ---- cache, alone and in a hunk ------------------------------------------------------- */

static void oom_cache_use(oom_ctx *c, hk_cache *k) {
    for (int i = 0; i < 16; i++) {
        oom_block *b = &c->b[c->nb];
        b->n = 64 + (size_t)i * 200;
        b->seed = (unsigned char)(i + 40);
        hk_cache_handle hd = hk_cache_alloc(k, b->n, "blk");
        CHECK(hd.value != 0); /* the cache's memory was all taken at create */
        if (!hd.value) continue;
        b->id = hd.value;
        b->p = hk_cache_deref(k, hd);
        oom_paint(b);
        c->nb++;
    }
    oom_disarm(c);
    for (int i = 0; i < c->nb; i++) {
        hk_cache_handle hd = {c->b[i].id};
        CHECK(oom_intact(&c->b[i], hk_cache_deref(k, hd)));
    }
    CHECK_EQ(hk_cache_check(k), HK_OK);
    for (int i = 0; i < c->nb; i += 2) CHECK_EQ(hk_cache_free(k, (hk_cache_handle){c->b[i].id}), HK_OK);
    CHECK_EQ(hk_cache_compact(k), HK_OK);
    for (int i = 1; i < c->nb; i += 2) {
        hk_cache_handle hd = {c->b[i].id};
        CHECK(oom_intact(&c->b[i], hk_cache_deref(k, hd)));
    }
    CHECK(hk_cache_alloc(k, 5000, "again").value != 0);
    CHECK_EQ(hk_cache_check(k), HK_OK);
}

static void oom_cache(oom_ctx *c) {
    hk_cache_desc d = {0};
    d.size = 128 << 10;
    d.on_error = hkt_on_error;
    d.error_user = &c->errs;
    uint64_t fired = hk_os_fail_count();
    int errs = c->errs.count;
    hk_cache *k = hk_cache_create(&d);
    if (!k) {
        oom_create_failed(c, fired, errs, "cache");
        return;
    }
    oom_cache_use(c, k);
    hk_cache_destroy(k);
}

HKT_TEST(oom_sweep_cache) { CHECK(oom_sweep(oom_cache) > 0); }

static void oom_cache_in_hunk(oom_ctx *c) {
    hk_hunk_desc hd = {0};
    hd.size = 256 << 10;
    hd.on_error = hkt_on_error;
    hd.error_user = &c->errs;
    uint64_t fired = hk_os_fail_count();
    int errs = c->errs.count;
    hk_hunk *h = hk_hunk_create(&hd);
    if (!h) {
        oom_create_failed(c, fired, errs, "hunk");
        return;
    }
    unsigned char *low = hk_hunk_alloc(h, 5000, "level");
    REQUIRE(low != NULL);
    memset(low, 0x77, 5000);
    hk_cache_desc d = {0};
    d.hunk = h;
    d.on_error = hkt_on_error;
    d.error_user = &c->errs;
    fired = hk_os_fail_count();
    errs = c->errs.count;
    hk_cache *k = hk_cache_create(&d);
    if (!k) {
        oom_create_failed(c, fired, errs, "cache in a hunk");
        CHECK_EQ(hk_hunk_check(h), HK_OK); /* the hunk is untouched and has no tenant */
        hk_hunk_info in;
        hk_hunk_get_info(h, &in);
        CHECK_EQ(in.tenant_bytes, 0);
        hk_hunk_destroy(h);
        return;
    }
    oom_cache_use(c, k);
    int hunk_block_intact = 1;
    for (int i = 0; i < 5000 && hunk_block_intact; i++) hunk_block_intact = low[i] == 0x77;
    CHECK(hunk_block_intact);
    hk_cache_destroy(k);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

HKT_TEST(oom_sweep_cache_in_hunk) { CHECK(oom_sweep(oom_cache_in_hunk) > 0); }

/* ---- pool (fast slots from the OS, overflow through the backing hooks) --------------- */

static void oom_pool(oom_ctx *c) {
    hk_pool_desc d = {0};
    d.elem_size = 40;
    d.capacity = 8;
    d.index_bits = 4;
    d.on_error = hkt_on_error;
    d.error_user = &c->errs;
    d.backing.alloc = oom_os_alloc;
    d.backing.free = oom_os_free;
    uint64_t fired = hk_os_fail_count();
    int errs = c->errs.count;
    hk_pool *p = hk_pool_create(&d);
    if (!p) {
        oom_create_failed(c, fired, errs, "pool");
        return;
    }
    hk_pool_list l = hk_pool_list_create(p, 0, "all");
    for (int i = 0; i < 40; i++) { /* past the 8 fast slots: overflow objects and tables */
        oom_block *b = &c->b[c->nb];
        void *obj = NULL;
        hk_pool_id id = {0};
        hk_pool_id parent = c->nb > 0 ? (hk_pool_id){c->b[c->nb - 1].id} : (hk_pool_id){0};
        if (i % 3 == 2 && parent.value)
            OOM_TRY(c, (id = hk_pool_alloc_child(p, parent, &obj)).value != 0, "pool alloc_child");
        else
            OOM_TRY(c, (id = hk_pool_alloc(p, &obj)).value != 0, "pool alloc");
        if (id.value) {
            b->id = id.value;
            b->p = obj;
            b->n = 40;
            b->seed = (unsigned char)(i * 5);
            oom_paint(b);
            CHECK_EQ(hk_pool_list_push_back(p, l, id), HK_OK);
            c->nb++;
        }
        for (int k = 0; k < c->nb; k++) CHECK(oom_intact(&c->b[k], hk_pool_get(p, (hk_pool_id){c->b[k].id})));
        CHECK_EQ(hk_pool_check(p), HK_OK);
    }
    oom_disarm(c);
    for (int k = 0; k < c->nb; k++) CHECK(oom_intact(&c->b[k], hk_pool_get(p, (hk_pool_id){c->b[k].id})));
    CHECK_EQ(hk_pool_list_count(p, l), (size_t)c->nb);
    hk_pool_id again = hk_pool_alloc(p, NULL);
    CHECK(again.value != 0);
    hk_pool_clear(p);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(oom_sweep_pool) { CHECK(oom_sweep(oom_pool) > 0); }

/* ---- gc (everything through the backing hooks) ------------------------------------- */

static void oom_gc(oom_ctx *c) {
    hk_gc_desc d = {0};
    d.on_error = hkt_on_error;
    d.error_user = &c->errs;
    d.backing.alloc = oom_os_alloc;
    d.backing.free = oom_os_free;
    d.index_bits = 10;
    uint64_t fired = hk_os_fail_count();
    int errs = c->errs.count;
    hk_gc *gc = hk_gc_create(&d);
    if (!gc) {
        oom_create_failed(c, fired, errs, "gc");
        return;
    }
    static const hk_gc_type ty = {"blob", 0, NULL, NULL, NULL};
    for (int i = 0; i < 40; i++) {
        oom_block *b = &c->b[c->nb];
        hk_gc_obj *o = NULL;
        size_t n = 16 + (size_t)i * 150;
        OOM_TRY(c, (o = hk_gc_alloc_size(gc, &ty, n)) != NULL, "gc alloc");
        if (o) {
            b->obj = o;
            b->n = n;
            b->seed = (unsigned char)(i * 3);
            b->p = hk_gc_data(gc, o);
            oom_paint(b);
            c->nb++;
        }
        if (i % 7 == 6 && c->nb > 1) { /* drop one: garbage, reclaimed later */
            oom_block *v = &c->b[c->nb - 2];
            CHECK_EQ(hk_gc_release(gc, (hk_gc_obj *)v->obj), HK_OK);
            *v = c->b[c->nb - 1];
            c->nb--;
            (void)hk_gc_step(gc, UINT64_MAX);
        }
        for (int k = 0; k < c->nb; k++) CHECK(oom_intact(&c->b[k], hk_gc_data(gc, (hk_gc_obj *)c->b[k].obj)));
        CHECK_EQ(hk_gc_check(gc), HK_OK);
    }
    oom_disarm(c);
    (void)hk_gc_collect(gc);
    for (int k = 0; k < c->nb; k++) CHECK(oom_intact(&c->b[k], hk_gc_data(gc, (hk_gc_obj *)c->b[k].obj)));
    hk_gc_obj *again = hk_gc_alloc_size(gc, &ty, 4000);
    CHECK(again != NULL);
    if (again) hk_gc_release(gc, again);
    for (int k = 0; k < c->nb; k++) CHECK_EQ(hk_gc_release(gc, (hk_gc_obj *)c->b[k].obj), HK_OK);
    (void)hk_gc_collect(gc);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

HKT_TEST(oom_sweep_gc) { CHECK(oom_sweep(oom_gc) > 0); }

/* ---- guard --------------------------------------------------------------------------- */

static void oom_guard(oom_ctx *c) {
    hk_guard_desc d = {0};
    d.reserve = (size_t)1 << 28;
    d.on_error = hkt_on_error;
    d.error_user = &c->errs;
    d.quarantine_blocks = 4;
    uint64_t fired = hk_os_fail_count();
    int errs = c->errs.count;
    hk_guard *g = hk_guard_create(&d);
    if (!g) {
        oom_create_failed(c, fired, errs, "guard");
        return;
    }
    for (int i = 0; i < 30; i++) {
        oom_block *b = &c->b[c->nb];
        b->n = 10 + (size_t)i * 700;
        b->seed = (unsigned char)(i * 11);
        OOM_TRY(c, (b->p = hk_guard_alloc(g, b->n)) != NULL, "guard alloc");
        if (b->p) {
            oom_paint(b);
            c->nb++;
        }
        if (i % 6 == 5 && c->nb > 1) { /* free one: quarantine, discard */
            oom_block *v = &c->b[0];
            CHECK_EQ(hk_guard_free(g, v->p), HK_OK);
            *v = c->b[c->nb - 1];
            c->nb--;
        }
        for (int k = 0; k < c->nb; k++) CHECK(oom_intact(&c->b[k], c->b[k].p));
        CHECK_EQ(hk_guard_check(g), HK_OK);
    }
    oom_disarm(c);
    for (int k = 0; k < c->nb; k++) CHECK(oom_intact(&c->b[k], c->b[k].p));
    void *again = hk_guard_alloc(g, 20000);
    CHECK(again != NULL);
    hk_guard_free(g, again);
    for (int k = 0; k < c->nb; k++) CHECK_EQ(hk_guard_free(g, c->b[k].p), HK_OK);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
}

HKT_TEST(oom_sweep_guard) { CHECK(oom_sweep(oom_guard) > 0); }

/* ---- the failure point itself ------------------------------------------------------------ */

/* The random point: the same seed fails the same acquisitions; about the
 * asked share fails; 0 disarms; it adds to the failure count. */
HKT_TEST(oom_random_failure_point_is_seeded) {
    size_t ps = hk_os_page_size();
    int first[64], fails = 0;
    uint64_t before = hk_os_fail_count();
    hk_os_fail_random(250000, 42);
    for (int i = 0; i < 64; i++) {
        void *p = hk_os_alloc(ps);
        first[i] = p == NULL;
        fails += first[i];
        hk_os_release(p, ps);
    }
    CHECK_EQ(hk_os_fail_count(), before + (uint64_t)fails);
    CHECK(fails > 4 && fails < 32);
    hk_os_fail_random(250000, 42);
    int same = 1;
    for (int i = 0; i < 64; i++) {
        void *p = hk_os_alloc(ps);
        same &= first[i] == (p == NULL);
        hk_os_release(p, ps);
    }
    CHECK(same);
    hk_os_fail_random(1000000, 7);
    void *r = hk_os_reserve(ps);
    CHECK(r == NULL);
    hk_os_fail_random(0, 0);
    r = hk_os_reserve(ps);
    REQUIRE(r != NULL);
    hk_os_fail_random(1000000, 7); /* commit and protect-to-accessible are acquisitions too */
    CHECK_EQ(hk_os_commit(r, ps), HK_ERR_NOMEM);
    CHECK_EQ(hk_os_protect(r, ps, HK_PROT_READ), HK_ERR_NOMEM);
    CHECK_EQ(hk_os_protect(r, ps, HK_PROT_NONE), HK_OK); /* giving access up is not */
    hk_os_fail_random(0, 0);
    CHECK_EQ(hk_os_commit(r, ps), HK_OK);
    hk_os_release(r, ps);
}
