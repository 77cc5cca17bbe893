/* gc: randomized allocate / retain / release / assign / step / collect /
 * collect step /
 * mode-switch sequences against a shadow model, with the check and a full
 * comparison (every count, every reclaimed object, reachability after a
 * full pass) after every operation. */
#include "gc_test_util.h"
#include "heapkit/gc.h"
#include "hk_test.h"
#include "internal.h"

/* ---- test types ---------------------------------------------------------- */

/* A simulated clock: every read advances time by `tick` ns. */
typedef struct fake_clock {
    uint64_t now, tick, reads;
} fake_clock;
static uint64_t fake_now(void *u) {
    fake_clock *c = (fake_clock *)u;
    c->reads++;
    c->now += c->tick;
    return c->now;
}

static hkt_errors g_errs;

static node *N(hk_gc *gc, hk_gc_obj *o) { return (node *)hk_gc_data(gc, o); }

static hk_gc_info info(hk_gc *gc) {
    hk_gc_info i;
    hk_gc_get_info(gc, &i);
    return i;
}

/* ---- randomized sequences against a shadow model -------------------------------- */

/* The model: objects we allocated, the references we hold (ext), and the
 * fields (up to two per node, indices). After every operation the collector
 * is compared with it: every allocated object's count equals ext plus the
 * references from allocated objects; an object the collector reclaimed had
 * ext 0 and no reference from an allocated object; after a full pass the
 * allocated set is exactly what is reachable from objects with ext > 0. */
#define M_MAX 600
typedef struct mobj {
    hk_gc_obj *p;
    int alive; /* allocated in the collector (per the walk) */
    int ext;
    int field[2];
} mobj;
static mobj g_m[M_MAX];
static int g_mn;

typedef struct sync_ctx {
    int n;
} sync_ctx;
static int model_sync(const hk_block_info *bi, void *u) {
    sync_ctx *c = (sync_ctx *)u;
    int i = ((const node *)bi->address)->value; /* the model index lives in the data */
    CHECK(i >= 0 && i < g_mn && g_m[i].p == (const hk_gc_obj *)bi->owner && g_m[i].alive);
    if (i >= 0 && i < g_mn) g_m[i].alive = 2; /* seen */
    c->n++;
    return 0;
}

static uint64_t rng(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void model_verify(hk_gc *gc, int after_collect) {
    sync_ctx c = {0};
    hk_gc_walk(gc, model_sync, &c);
    int alive = 0;
    for (int i = 0; i < g_mn; i++) {
        if (g_m[i].alive == 2) {
            g_m[i].alive = 1;
            alive++;
        } else if (g_m[i].alive == 1) {
            /* Reclaimed since the last sync: must have been unreferenced. */
            g_m[i].alive = 0;
            CHECK_EQ(g_m[i].ext, 0);
        }
    }
    CHECK_EQ(c.n, alive);
    int refs[M_MAX] = {0};
    for (int i = 0; i < g_mn; i++) {
        if (!g_m[i].alive) continue;
        for (int k = 0; k < 2; k++)
            if (g_m[i].field[k] >= 0) {
                CHECK(g_m[g_m[i].field[k]].alive);
                refs[g_m[i].field[k]]++;
            }
    }
    size_t backlog = 0;
    for (int i = 0; i < g_mn; i++) {
        if (!g_m[i].alive) continue;
        uint32_t want = (uint32_t)(g_m[i].ext + refs[i]);
        CHECK_EQ(hk_gc_refcount(gc, g_m[i].p), want);
        backlog += want == 0;
    }
    CHECK_EQ(info(gc).backlog, backlog);
    if (after_collect) {
        /* Reachability from the objects we hold. */
        int reach[M_MAX] = {0}, stack[M_MAX], sp = 0;
        for (int i = 0; i < g_mn; i++)
            if (g_m[i].alive && g_m[i].ext > 0) {
                reach[i] = 1;
                stack[sp++] = i;
            }
        while (sp) {
            int i = stack[--sp];
            for (int k = 0; k < 2; k++) {
                int j = g_m[i].field[k];
                if (j >= 0 && !reach[j]) {
                    reach[j] = 1;
                    stack[sp++] = j;
                }
            }
        }
        for (int i = 0; i < g_mn; i++)
            if (g_m[i].alive) CHECK(reach[i]);
        CHECK_EQ(info(gc).candidates, 0);
    }
}

static int pick_held(uint64_t *s) {
    int cand[M_MAX], n = 0;
    for (int i = 0; i < g_mn; i++)
        if (g_m[i].alive && g_m[i].ext > 0) cand[n++] = i;
    return n ? cand[rng(s) % (uint64_t)n] : -1;
}

static void run_model(uint64_t seed, int ops, int immediate, int use_pacing) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    fake_clock fc = {0, 50, 0};
    hk_gc_desc d = {0};
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    d.clock = fake_now;
    d.clock_user = &fc;
    d.flags = immediate ? HK_GC_IMMEDIATE : 0;
    d.step_max_objects = 5;
    d.pace_bytes = use_pacing ? 2000 : 0;
    hk_gc *gc = hk_gc_create(&d);
    memset(g_m, 0, sizeof g_m);
    g_mn = 0;
    uint64_t s = seed;
    for (int op = 0; op < ops; op++) {
        int kind = (int)(rng(&s) % 100), after_collect = 0;
        if (kind < 22 && g_mn < M_MAX) { /* allocate */
            hk_gc_obj *p = hk_gc_alloc(gc, &k_node);
            REQUIRE(p);
            /* The model tracks objects by pointer; slots are reused, so a
             * reused pointer retires the old model entry (already dead). */
            for (int i = 0; i < g_mn; i++)
                if (g_m[i].p == p) {
                    CHECK(!g_m[i].alive);
                    g_m[i].p = NULL;
                }
            N(gc, p)->value = g_mn;
            g_m[g_mn].p = p;
            g_m[g_mn].alive = 1;
            g_m[g_mn].ext = 1;
            g_m[g_mn].field[0] = g_m[g_mn].field[1] = -1;
            g_mn++;
        } else if (kind < 34) { /* retain a held object */
            int i = pick_held(&s);
            if (i >= 0) {
                CHECK_EQ(hk_gc_retain(gc, g_m[i].p), HK_OK);
                g_m[i].ext++;
            }
        } else if (kind < 58) { /* release a held object */
            int i = pick_held(&s);
            if (i >= 0) {
                CHECK_EQ(hk_gc_release(gc, g_m[i].p), HK_OK);
                g_m[i].ext--;
            }
        } else if (kind < 78) { /* set a field of a held object to a held object or NULL */
            int i = pick_held(&s), j = pick_held(&s), k = (int)(rng(&s) % 2);
            if (i >= 0) {
                if (rng(&s) % 4 == 0) j = -1;
                node *n = N(gc, g_m[i].p);
                REQUIRE(n);
                CHECK_EQ(hk_gc_assign(gc, &n->ref[k], j >= 0 ? g_m[j].p : NULL), HK_OK);
                g_m[i].field[k] = j;
            }
        } else if (kind < 86) { /* take a child of a held object as our own */
            int i = pick_held(&s), k = (int)(rng(&s) % 2);
            if (i >= 0 && g_m[i].field[k] >= 0) {
                int j = g_m[i].field[k];
                CHECK_EQ(hk_gc_retain(gc, g_m[j].p), HK_OK);
                g_m[j].ext++;
            }
        } else if (kind < 91) {
            hk_gc_step(gc, rng(&s) % 300);
        } else if (kind < 95) { /* cycles in a slice: what it reclaims must be garbage */
            (void)hk_gc_collect_step(gc, 1 + (size_t)(rng(&s) % 12), NULL);
        } else if (kind < 97) {
            hk_gc_set_incremental(gc, !hk_gc_incremental(gc));
        } else {
            hk_gc_collect(gc);
            after_collect = 1;
        }
        REQUIRE(hk_gc_check(gc) == HK_OK);
        model_verify(gc, after_collect);
        if (hkt_cur_failed) break;
    }
    CHECK_EQ(g_errs.count, 0);
    /* Drop everything we hold; a full pass leaves nothing. */
    for (int i = 0; i < g_mn; i++)
        while (g_m[i].alive && g_m[i].ext > 0) {
            hk_gc_release(gc, g_m[i].p);
            g_m[i].ext--;
        }
    hk_gc_collect(gc);
    CHECK_EQ(info(gc).objects, 0);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

HKT_TEST(gc_model_random_incremental) {
    for (uint64_t seed = 1; seed <= 6; seed++) run_model(seed * 0x9E3779B97F4A7C15ull, 1500, 0, 0);
}
HKT_TEST(gc_model_random_immediate) {
    for (uint64_t seed = 1; seed <= 4; seed++) run_model(seed * 0xD1B54A32D192ED03ull, 1500, 1, 0);
}
HKT_TEST(gc_model_random_paced) {
    for (uint64_t seed = 1; seed <= 4; seed++) run_model(seed * 0xA0761D6478BD642Full, 1500, 0, 1);
}
