/*
 * Randomized create / free / reparent / list / iterate sequences against a
 * shadow model, with hk_pool_check and a full model comparison after every
 * step. Small fast capacity so both the fast and the overflow path are hit;
 * runs with a small generation space (index_bits 24: 255 uses per slot) make
 * slots retire and get recycled, or wrap.
 */
#include "hk_test.h"
#include "internal.h"

#include "heapkit/pool.h"

#define MAXREC 6000
#define NLISTS 4
#define NLINKS 2
#define ESZ    24

typedef struct rec {
    uint32_t id;
    int alive;
    int parent; /* record index or -1 */
    int list[NLINKS];
    unsigned char fill;
} rec;

typedef struct model {
    hk_pool *p;
    hk_pool_list lists[NLISTS];
    uint32_t list_link[NLISTS];
    int order[NLISTS][MAXREC]; /* record indices in list order */
    int count[NLISTS];
    rec r[MAXREC];
    int n;
    uint64_t rng;
    /* the running iteration (one level) */
    int iter_list, iter_snapshot[MAXREC], iter_n, iter_pos;
    unsigned char iter_gone[MAXREC]; /* snapshot entries removed during the iteration */
    int in_scope;
    int wrap; /* HK_POOL_WRAP: dead fast IDs may alias after 2^gen - 1 uses */
    uint32_t mark;
    long recycled, iterations, visits, max_live;
    size_t live_cap;
    hkt_errors errs;
} model;

static model M;

static uint32_t rnd(uint32_t n) {
    uint64_t x = M.rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    M.rng = x;
    return (uint32_t)((x * 0x2545F4914F6CDD1Dull >> 33) % n);
}

/* ---- model operations ------------------------------------------------------ */

static void m_list_remove(int li, int ri) {
    int k = 0;
    while (k < M.count[li] && M.order[li][k] != ri) k++;
    if (k == M.count[li]) return;
    memmove(&M.order[li][k], &M.order[li][k + 1], (size_t)(M.count[li] - k - 1) * sizeof(int));
    M.count[li]--;
    M.r[ri].list[M.list_link[li]] = -1;
    if (M.iter_list == li)
        for (int j = 0; j < M.iter_n; j++)
            if (M.iter_snapshot[j] == ri) M.iter_gone[j] = 1;
}

static void m_list_add(int li, int ri, int front) {
    uint32_t link = M.list_link[li];
    if (M.r[ri].list[link] >= 0) m_list_remove(M.r[ri].list[link], ri);
    if (front) {
        memmove(&M.order[li][1], &M.order[li][0], (size_t)M.count[li] * sizeof(int));
        M.order[li][0] = ri;
    } else {
        M.order[li][M.count[li]] = ri;
    }
    M.count[li]++;
    M.r[ri].list[link] = li;
}

static void m_kill(int ri, int subtree) {
    M.r[ri].alive = 0;
    for (int k = 0; k < NLINKS; k++)
        if (M.r[ri].list[k] >= 0) m_list_remove(M.r[ri].list[k], ri);
    M.r[ri].parent = -1;
    for (int j = 0; j < M.n; j++) {
        if (!M.r[j].alive || M.r[j].parent != ri) continue;
        if (subtree)
            m_kill(j, 1);
        else
            M.r[j].parent = -1;
    }
}

static int m_is_ancestor(int anc, int x) {
    for (int y = x; y >= 0; y = M.r[y].parent)
        if (y == anc) return 1;
    return 0;
}

static int pick_alive(void) {
    if (M.n == 0) return -1;
    for (int t = 0; t < 8; t++) {
        int i = (int)rnd((uint32_t)M.n);
        if (M.r[i].alive) return i;
    }
    for (int i = M.n - 1; i >= 0; i--)
        if (M.r[i].alive) return i;
    return -1;
}

static int pick_dead(void) {
    for (int t = 0; t < 8 && M.n; t++) {
        int i = (int)rnd((uint32_t)M.n);
        if (!M.r[i].alive) return i;
    }
    return -1;
}

/* ---- comparison ---------------------------------------------------------------- */

static int find_rec(uint32_t id) {
    for (int i = M.n - 1; i >= 0; i--)
        if (M.r[i].id == id && M.r[i].alive) return i;
    return -1;
}

static void compare(void) {
    REQUIRE(hk_pool_check(M.p) == HK_OK);
    size_t live = 0;
    for (int i = 0; i < M.n; i++) {
        rec *r = &M.r[i];
        hk_pool_id id = {r->id};
        unsigned char *o = (unsigned char *)hk_pool_get(M.p, id);
        if (!r->alive) {
            /* a dead fast ID never resolves under RETIRE (the model drops
             * dead records at every recycle); overflow keys and WRAP
             * generations may alias, but only to a live object */
            if ((r->id & M.mark) == M.mark || M.wrap)
                REQUIRE(o == NULL || find_rec(r->id) >= 0);
            else
                REQUIRE(o == NULL);
            continue;
        }
        live++;
        REQUIRE(o != NULL);
        REQUIRE(hk_fill_check(o, ESZ, r->fill) == ESZ);
        REQUIRE(hk_pool_id_of(M.p, o).value == r->id);
        uint32_t pid = r->parent >= 0 ? M.r[r->parent].id : 0;
        REQUIRE(hk_pool_parent(M.p, id).value == pid);
        for (int k = 0; k < NLINKS; k++) {
            hk_pool_list l = hk_pool_list_of(M.p, id, (uint32_t)k);
            REQUIRE(l.value == (r->list[k] >= 0 ? M.lists[r->list[k]].value : 0));
        }
    }
    hk_pool_info info;
    hk_pool_get_info(M.p, &info);
    REQUIRE(info.live == live);
    for (int li = 0; li < NLISTS; li++) {
        REQUIRE(hk_pool_list_count(M.p, M.lists[li]) == (size_t)M.count[li]);
        hk_pool_id x = hk_pool_list_first(M.p, M.lists[li]);
        for (int k = 0; k < M.count[li]; k++, x = hk_pool_list_next(M.p, M.lists[li], x))
            REQUIRE(x.value == M.r[M.order[li][k]].id);
        REQUIRE(x.value == 0);
    }
}

/* ---- one random operation --------------------------------------------------------- */

static void op(int depth);

static int visit(hk_pool *p, hk_pool_id id, void *o, void *user) {
    (void)p;
    (void)o;
    (void)user;
    /* the visited object is the next snapshot entry still on the list */
    while (M.iter_pos < M.iter_n && M.iter_gone[M.iter_pos]) M.iter_pos++;
    REQUIRE(M.iter_pos < M.iter_n);
    int ri = M.iter_snapshot[M.iter_pos++];
    M.visits++;
    REQUIRE(M.r[ri].id == id.value);
    REQUIRE(M.r[ri].alive);
    REQUIRE(hk_fill_check(o, ESZ, M.r[ri].fill) == ESZ);
    int k = (int)rnd(3);
    for (int j = 0; j < k; j++) op(1);
    if (M.r[ri].alive && rnd(6) == 0) { /* free the current one (unless an op above did) */
        REQUIRE(hk_pool_free(p, id, HK_POOL_FREE_SUBTREE) == HK_OK);
        m_kill(ri, 1);
        REQUIRE(hk_fill_check(o, ESZ, M.r[ri].fill) == ESZ); /* still valid */
    }
    return rnd(40) == 0 ? 9 : 0;
}

static void op(int depth) {
    uint32_t what = rnd(100);
    int a, b;
    if (what < 30 && M.live_cap) { /* keep the population small: slots get reused, and retire */
        hk_pool_info info;
        hk_pool_get_info(M.p, &info);
        if (info.live >= M.live_cap) what = 40;
    }
    if (what < 30) { /* alloc, maybe as a child */
        if (M.n >= MAXREC) return;
        a = rnd(3) == 0 ? pick_alive() : -1;
        unsigned char *o;
        hk_pool_id id = a >= 0 ? hk_pool_alloc_child(M.p, (hk_pool_id){M.r[a].id}, (void **)&o)
                               : hk_pool_alloc(M.p, (void **)&o);
        if (id.value == 0) { /* only when every overflow key is live (8-bit generations) */
            REQUIRE(M.errs.last_kind == HK_EK_NOMEM);
            return;
        }
        rec *r = &M.r[M.n++];
        r->id = id.value;
        r->alive = 1;
        r->parent = a;
        r->list[0] = r->list[1] = -1;
        r->fill = (unsigned char)rnd(256);
        memset(o, r->fill, ESZ);
    } else if (what < 48) { /* free */
        a = pick_alive();
        if (a < 0) return;
        int subtree = (int)rnd(2);
        REQUIRE(hk_pool_free(M.p, (hk_pool_id){M.r[a].id}, subtree ? HK_POOL_FREE_SUBTREE : HK_POOL_DETACH) ==
                HK_OK);
        m_kill(a, subtree);
    } else if (what < 56) { /* reparent (cycles refused) */
        a = pick_alive();
        b = rnd(4) == 0 ? -1 : pick_alive();
        if (a < 0) return;
        hk_result want = (b >= 0 && m_is_ancestor(a, b)) ? HK_ERR_INVALID : HK_OK;
        int e0 = M.errs.count;
        REQUIRE(hk_pool_set_parent(M.p, (hk_pool_id){M.r[a].id}, (hk_pool_id){b >= 0 ? M.r[b].id : 0}) ==
                want);
        if (want == HK_OK)
            M.r[a].parent = b;
        else
            REQUIRE(M.errs.count == e0 + 1);
    } else if (what < 72) { /* list add */
        a = pick_alive();
        if (a < 0) return;
        int li = (int)rnd(NLISTS), front = (int)rnd(2);
        REQUIRE((front ? hk_pool_list_push_front : hk_pool_list_push_back)(M.p, M.lists[li],
                                                                           (hk_pool_id){M.r[a].id}) == HK_OK);
        m_list_add(li, a, front);
    } else if (what < 80) { /* list remove */
        a = pick_alive();
        if (a < 0) return;
        int li = (int)rnd(NLISTS);
        int member = M.r[a].list[M.list_link[li]] == li;
        int e0 = M.errs.count;
        hk_result r = hk_pool_list_remove(M.p, M.lists[li], (hk_pool_id){M.r[a].id});
        REQUIRE(r == (member ? HK_OK : HK_ERR_INVALID));
        if (member)
            m_list_remove(li, a);
        else
            REQUIRE(M.errs.count == e0 + 1);
    } else if (what < 86) { /* misuse with a dead ID: reported, nothing changes */
        a = pick_dead();
        if (a < 0 || find_rec(M.r[a].id) >= 0) return;
        int e0 = M.errs.count;
        hk_result r = hk_pool_free(M.p, (hk_pool_id){M.r[a].id}, HK_POOL_FREE_SUBTREE);
        REQUIRE(r == HK_ERR_DOUBLE_FREE || r == HK_ERR_STALE);
        REQUIRE(M.errs.count == e0 + 1);
    } else if (what < 92) { /* iterate a list, doing random things inside */
        if (depth > 0 || M.iter_list >= 0) return;
        int li = (int)rnd(NLISTS);
        M.iter_list = li;
        M.iter_n = M.count[li];
        memcpy(M.iter_snapshot, M.order[li], (size_t)M.iter_n * sizeof(int));
        memset(M.iter_gone, 0, (size_t)M.iter_n);
        M.iter_pos = 0;
        int ret = hk_pool_list_each(M.p, M.lists[li], visit, NULL);
        M.iterations++;
        if (ret == 0) { /* every remaining snapshot entry was visited */
            while (M.iter_pos < M.iter_n && M.iter_gone[M.iter_pos]) M.iter_pos++;
            REQUIRE(M.iter_pos == M.iter_n);
        }
        M.iter_list = -1;
    } else if (what < 96) { /* open or close a defer scope */
        if (depth > 0) return;
        if (!M.in_scope) {
            hk_pool_defer_begin(M.p);
            M.in_scope = 1;
        } else {
            REQUIRE(hk_pool_defer_end(M.p) == HK_OK);
            M.in_scope = 0;
        }
    } else if (what < 97) { /* recycle retired slots (no scope open): forget every dead record */
        if (depth > 0 || M.in_scope) return;
        long n = hk_pool_recycle(M.p);
        REQUIRE(n >= 0);
        M.recycled += n;
        if (n > 0) {
            int map[MAXREC], k = 0;
            for (int i = 0; i < M.n; i++) map[i] = M.r[i].alive ? k++ : -1;
            for (int i = 0; i < M.n; i++) {
                if (!M.r[i].alive) continue;
                rec r = M.r[i];
                r.parent = r.parent >= 0 ? map[r.parent] : -1;
                M.r[map[i]] = r;
            }
            for (int li = 0; li < NLISTS; li++)
                for (int j = 0; j < M.count[li]; j++) M.order[li][j] = map[M.order[li][j]];
            M.n = k;
        }
    } else { /* compact the model when it fills up: drop dead records */
        if (depth > 0 || M.n < MAXREC - 100 || M.iter_list >= 0) return;
        int map[MAXREC], k = 0;
        for (int i = 0; i < M.n; i++) map[i] = M.r[i].alive ? k++ : -1;
        for (int i = 0; i < M.n; i++) {
            if (!M.r[i].alive) continue;
            rec r = M.r[i];
            r.parent = r.parent >= 0 ? map[r.parent] : -1;
            M.r[map[i]] = r;
        }
        for (int li = 0; li < NLISTS; li++)
            for (int j = 0; j < M.count[li]; j++) M.order[li][j] = map[M.order[li][j]];
        M.n = k;
    }
}

static void run(uint64_t seed, int steps, uint32_t flags, uint32_t cap, uint32_t index_bits,
                size_t live_cap) {
    memset(&M, 0, sizeof M);
    M.live_cap = live_cap;
    M.rng = seed;
    M.iter_list = -1;
    M.errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = ESZ;
    d.capacity = cap;
    d.index_bits = index_bits;
    M.wrap = (flags & HK_POOL_WRAP) != 0;
    M.mark = (1u << index_bits) - 1u;
    d.links = NLINKS;
    d.flags = flags;
    d.name = "model";
    d.on_error = hkt_on_error;
    d.error_user = &M.errs;
    M.p = hk_pool_create(&d);
    REQUIRE(M.p != NULL);
    for (int li = 0; li < NLISTS; li++) {
        M.list_link[li] = (uint32_t)(li % NLINKS);
        M.lists[li] = hk_pool_list_create(M.p, M.list_link[li], "l");
    }
    hk_pool_info info;
    for (int s = 0; s < steps; s++) {
        op(0);
        compare();
        hk_pool_get_info(M.p, &info);
        if ((long)info.live > M.max_live) M.max_live = (long)info.live;
    }
    hk_pool_get_info(M.p, &info);
    if (getenv("HKT_VERBOSE"))
        printf(
            "    live max %ld, overflow allocs %llu, recycled %ld, iterations %ld, visits %ld, reports %d\n",
            M.max_live, (unsigned long long)info.overflow_allocs, M.recycled, M.iterations, M.visits,
            M.errs.count);
    CHECK(info.overflow_allocs > 0);
    CHECK(M.iterations > 20 && M.visits > 100);
    if (index_bits == 24 && !M.wrap) CHECK(M.recycled > 0);
    if (M.in_scope) hk_pool_defer_end(M.p);
    compare();
    hk_pool_clear(M.p);
    REQUIRE(hk_pool_check(M.p) == HK_OK);
    hk_pool_destroy(M.p);
}

HKT_TEST(pool_random_vs_model) { run(0x1234567ull, 3000, 0, 48, 14, 0); }
HKT_TEST(pool_random_vs_model_fill) { run(0xBADC0FFEEull, 2000, HK_FLAG_FILL, 64, 20, 0); }
/* 8-bit generations on a few slots with a small population: slots retire and
 * are recycled, overflow keys wrap */
HKT_TEST(pool_random_vs_model_retire) { run(0x51ED5EEDull, 20000, 0, 3, 24, 5); }
HKT_TEST(pool_random_vs_model_wrap) { run(0xFEEDull, 20000, HK_POOL_WRAP | HK_FLAG_ZERO, 3, 24, 5); }
