/*
 * bench/suite_pool.c - the pool against malloc-based designs, peers in the
 * same run:
 *   churn    create/destroy churn of 64, 256 and 1024-byte objects (random
 *            victim in a live working set), vs malloc/free of every peer,
 *            and two floors: the same loop over a bare ring of slot indices,
 *            and over the least a generational pool does (churn_floor);
 *   get      hk_pool_get (inline: a mask, a load and a compare) on random
 *            live IDs vs dereferencing a raw pointer taken from an array
 *            of pointers (same access pattern);
 *   storm    a bullet-cancel storm: 16,000 live objects (parents with
 *            children) on a tick list and 8 draw layers (frame lists, rebuilt
 *            by every tick); 90% of the parents end in one frame while the
 *            tick iterates; the frame draws, the next frame refills. Baseline: the seed's design on each
 * peer's malloc/free - a doubly-linked world list, parent/child lists, singly-linked layer lists rebuilt
 * every tick (deaths swept after the tick so the baseline itself is correct). Ratios are recorded as
 * ratio_vs_<peer> = peer time / pool time (above 1: the pool is faster), and for get as ratio_vs_raw = pool
 * time / raw time.
 */
#include "harness.h"

#include "heapkit/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SUITE "pool"

/* ---- 1. churn ------------------------------------------------------------ */

#define CHURN_SET   4096
#define CHURN_ORDER (1 << 16)

/* The victims, drawn once per repetition before timing and shared by every
 * allocator, so the timed loop holds the allocator's work and a sequential
 * table read, not the random number generator's serial dependency chain
 * (about 2 ns per op here, the same for everyone, which only hid the
 * differences). */
static uint16_t churn_order[CHURN_ORDER];

static void churn_draw(uint64_t seed) {
    uint64_t s = seed;
    for (int i = 0; i < CHURN_ORDER; i++) churn_order[i] = (uint16_t)(hkb_rand(&s) % CHURN_SET);
}

static double churn_pool(size_t size, long ops) {
    hk_pool_desc d = {0};
    d.elem_size = size;
    d.capacity = CHURN_SET + 64;
    hk_pool *p = hk_pool_create(&d);
    if (!p) return -1;
    static hk_pool_id ids[CHURN_SET];
    for (int i = 0; i < CHURN_SET; i++) {
        void *o;
        ids[i] = hk_pool_alloc(p, &o);
        memset(o, 1, 16);
    }
    uint64_t t0 = hkb_now_ns();
    for (long i = 0; i < ops; i++) {
        uint32_t k = churn_order[i & (CHURN_ORDER - 1)];
        hk_pool_free(p, ids[k], HK_POOL_FREE_SUBTREE);
        void *o;
        ids[k] = hk_pool_alloc(p, &o);
        *(volatile uint64_t *)o = (uint64_t)i;
    }
    uint64_t t1 = hkb_now_ns();
    hk_pool_destroy(p);
    return (double)(t1 - t0) / (double)ops;
}

/* Floors, not peers: the same loop over a bare FIFO ring of slot indices
 * (gen = 0: no IDs, no checks) or over the least a generational pool does
 * (gen = 1: the ID's slot in range and its word equal to the ID before the
 * free, the word made dead, the next generation from the word at the
 * allocation; no wrap or retire decision, no counters, no lists or tree).
 * Everything is a local or a constant, so the compiler keeps the ring's
 * head and tail in registers, which a library called from the loop cannot
 * (its state lives in the pool, and the loop's stores may alias it). */
static double churn_floor(size_t size, long ops, int gen) {
    enum { SLOTS = CHURN_SET + 64, RING = 8192, IB = 14, MASK = (1u << IB) - 1 };
    /* heap, not static: the bench's static arrays keep the layout they had
     * before the floors (the peers' loops are sensitive to it) */
    uint32_t *ring = (uint32_t *)malloc(RING * sizeof(uint32_t));
    uint32_t *held = (uint32_t *)malloc(CHURN_SET * sizeof(uint32_t));
    uint32_t *words = (uint32_t *)malloc(SLOTS * sizeof(uint32_t));
    unsigned char *mem = (unsigned char *)malloc((size_t)SLOTS * size);
    if (!ring || !held || !words || !mem) {
        free(ring);
        free(held);
        free(words);
        free(mem);
        return -1;
    }
    uint32_t head = 0, tail = 0, bad = 0;
    for (uint32_t s = 0; s < SLOTS; s++) {
        words[s] = (1u << IB) | MASK; /* dead, generation 1 */
        if (s < CHURN_SET) {
            words[s] = (1u << IB) | s;
            held[s] = gen ? words[s] : s;
            memset(mem + (size_t)s * size, 1, 16);
        } else {
            ring[tail++ & (RING - 1)] = s;
        }
    }
    uint64_t t0 = hkb_now_ns();
    if (!gen) {
        for (long i = 0; i < ops; i++) {
            uint32_t k = churn_order[i & (CHURN_ORDER - 1)];
            ring[tail++ & (RING - 1)] = held[k];
            held[k] = ring[head++ & (RING - 1)];
            *(volatile uint64_t *)(mem + (size_t)held[k] * size) = (uint64_t)i;
        }
    } else {
        for (long i = 0; i < ops; i++) {
            uint32_t k = churn_order[i & (CHURN_ORDER - 1)];
            uint32_t id = held[k], s = id & MASK;
            if (s < SLOTS && words[s] == id) {
                words[s] = id | MASK;
                ring[tail++ & (RING - 1)] = s;
            } else {
                bad++;
            }
            uint32_t n = ring[head++ & (RING - 1)];
            uint32_t v = (words[n] + 1u) | n;
            words[n] = v;
            held[k] = v;
            *(volatile uint64_t *)(mem + (size_t)n * size) = (uint64_t)i;
        }
    }
    uint64_t t1 = hkb_now_ns();
    hkb_sink(&bad);
    free(ring);
    free(held);
    free(words);
    free(mem);
    return (double)(t1 - t0) / (double)ops;
}

static double churn_malloc(const hkb_allocator *a, size_t size, long ops) {
    static void *ptrs[CHURN_SET];
    for (int i = 0; i < CHURN_SET; i++) {
        ptrs[i] = a->malloc(size);
        memset(ptrs[i], 1, 16);
    }
    uint64_t t0 = hkb_now_ns();
    for (long i = 0; i < ops; i++) {
        uint32_t k = churn_order[i & (CHURN_ORDER - 1)];
        a->free(ptrs[k]);
        ptrs[k] = a->malloc(size);
        *(volatile uint64_t *)ptrs[k] = (uint64_t)i;
    }
    uint64_t t1 = hkb_now_ns();
    for (int i = 0; i < CHURN_SET; i++) a->free(ptrs[i]);
    return (double)(t1 - t0) / (double)ops;
}

static void bench_churn(hkb_ctx *ctx, const hkb_allocator *peers, int np) {
    static const size_t sizes[] = {64, 256, 1024};
    long ops = ctx->quick ? 200000 : 2000000;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        char wl[32];
        snprintf(wl, sizeof wl, "churn_%zu", sizes[si]);
        hkb_section(SUITE, wl,
                    "free a random live object and create one, working set 4096 (ns per free+create)");
        double v[32], pool_ns;
        for (int r = 0; r < ctx->reps; r++) {
            churn_draw(ctx->seed + (uint64_t)r);
            v[r] = churn_pool(sizes[si], ops);
        }
        pool_ns = hkb_median(v, ctx->reps);
        hkb_record(SUITE, wl, "heapkit_pool", "ns_per_op", pool_ns, "ns");
        for (int a = 0; a < np; a++) {
            for (int r = 0; r < ctx->reps; r++) {
                churn_draw(ctx->seed + (uint64_t)r);
                v[r] = churn_malloc(&peers[a], sizes[si], ops);
            }
            double ns = hkb_median(v, ctx->reps);
            char metric[64];
            hkb_record(SUITE, wl, peers[a].name, "ns_per_op", ns, "ns");
            snprintf(metric, sizeof metric, "ratio_vs_%s", peers[a].name);
            hkb_record(SUITE, wl, "heapkit_pool", metric, ns / pool_ns, "x");
        }
        /* the floors last, so that the peers run as they did before there were floors */
        for (int g = 0; g < 2; g++) {
            for (int r = 0; r < ctx->reps; r++) {
                churn_draw(ctx->seed + (uint64_t)r);
                v[r] = churn_floor(sizes[si], ops, g);
            }
            hkb_record(SUITE, wl, g ? "floor_generational_ring" : "floor_bare_ring", "ns_per_op",
                       hkb_median(v, ctx->reps), "ns");
        }
        hkb_skip_missing(SUITE, wl);
    }
}

/* ---- 2. get(id) vs raw pointer -------------------------------------------- */

typedef struct get_obj {
    uint64_t value;
    char pad[56];
} get_obj;

static void bench_get(hkb_ctx *ctx) {
    const char *wl = "get";
    hkb_section(SUITE, wl,
                "sum a field of random live objects: hk_pool_get(id) vs raw pointer array (ns per access)");
    enum { N = 16000 };
    long accesses = ctx->quick ? 2000000 : 20000000;
    hk_pool_desc d = {0};
    d.elem_size = sizeof(get_obj);
    hk_pool *p = hk_pool_create(&d);
    if (!p) return;
    static hk_pool_id ids[N];
    static get_obj *ptrs[N];
    static uint16_t order[1 << 16];
    for (int i = 0; i < N; i++) {
        ids[i] = hk_pool_alloc(p, (void **)&ptrs[i]);
        ptrs[i]->value = (uint64_t)i;
    }
    uint64_t s = ctx->seed;
    for (int i = 0; i < (1 << 16); i++) order[i] = (uint16_t)(hkb_rand(&s) % N);
    double vp[32], vr[32];
    uint64_t sink = 0;
    for (int r = 0; r < ctx->reps; r++) {
        uint64_t t0 = hkb_now_ns(), sum = 0;
        for (long i = 0; i < accesses; i++) {
            get_obj *o = (get_obj *)hk_pool_get(p, ids[order[i & 0xFFFF]]);
            sum += o->value;
        }
        uint64_t t1 = hkb_now_ns();
        for (long i = 0; i < accesses; i++) sum += ptrs[order[i & 0xFFFF]]->value;
        uint64_t t2 = hkb_now_ns();
        sink += sum;
        vp[r] = (double)(t1 - t0) / (double)accesses;
        vr[r] = (double)(t2 - t1) / (double)accesses;
    }
    hkb_sink(&sink);
    double pool_ns = hkb_median(vp, ctx->reps), raw_ns = hkb_median(vr, ctx->reps);
    hkb_record(SUITE, wl, "heapkit_pool", "ns_per_access", pool_ns, "ns");
    hkb_record(SUITE, wl, "raw_pointer", "ns_per_access", raw_ns, "ns");
    hkb_record(SUITE, wl, "heapkit_pool", "ratio_vs_raw", pool_ns / raw_ns, "x");
    hk_pool_destroy(p);
}

/* ---- 3. bullet-cancel storm ------------------------------------------------- */

#define STORM_LIVE   16000
#define STORM_KIDS   3 /* each parent has 3 children: 4000 families */
#define STORM_LAYERS 8
#define STORM_SIZE   256
/* the refill reuses the slots the tick just released (LIFO, pool.h) */
#ifndef STORM_POOL_FLAGS
#define STORM_POOL_FLAGS HK_POOL_HOT_REUSE
#endif

typedef struct storm_obj {
    uint32_t layer;
    int32_t ends; /* 1: the parent's script ends this frame */
    uint64_t acc;
    char body[STORM_SIZE - 16];
} storm_obj;

/* The pool as a game uses it: the tick list and the 8 draw layers are
 * frame lists (pool.h), rebuilt every frame as the seed rebuilds its
 * layers. The tick walks last frame's tick list, frees the cancelled
 * parents with their subtrees, and pushes every survivor onto the next
 * tick list and its layer; the new objects of the refill go on the next
 * tick list. No object is ever unlinked: a freed object's entries are
 * skipped by the iterators (its ID went stale). */
typedef struct storm_pool {
    hk_pool *p;
    hk_pool_flist tick[2];
    hk_pool_flist layer[STORM_LAYERS];
    int cur;
    uint64_t rng;
    uint64_t drawn;
} storm_pool;

static hk_pool_id storm_pool_new(storm_pool *s, hk_pool_id parent) {
    storm_obj *o;
    hk_pool_id id =
        parent.value ? hk_pool_alloc_child(s->p, parent, (void **)&o) : hk_pool_alloc(s->p, (void **)&o);
    o->layer = (uint32_t)(hkb_rand(&s->rng) % STORM_LAYERS);
    o->ends = 0;
    o->acc = 0;
    hk_pool_flist_push(s->p, s->tick[s->cur], id);
    return id;
}

static void storm_pool_refill(storm_pool *s) {
    hk_pool_info info;
    hk_pool_get_info(s->p, &info);
    for (size_t n = info.live; n + STORM_KIDS + 1 <= STORM_LIVE; n += STORM_KIDS + 1) {
        hk_pool_id par = storm_pool_new(s, (hk_pool_id){0});
        for (int k = 0; k < STORM_KIDS; k++) storm_pool_new(s, par);
    }
}

static double storm_pool_run(int frames, uint64_t seed) {
    storm_pool s;
    memset(&s, 0, sizeof s);
    s.rng = seed;
    hk_pool_desc d = {0};
    d.elem_size = sizeof(storm_obj);
    d.flags = STORM_POOL_FLAGS;
    s.p = hk_pool_create(&d);
    if (!s.p) return -1;
    for (int t = 0; t < 2; t++) s.tick[t] = hk_pool_flist_create(s.p, STORM_LIVE, "tick");
    for (int l = 0; l < STORM_LAYERS; l++) s.layer[l] = hk_pool_flist_create(s.p, STORM_LIVE / 4, "layer");
    storm_pool_refill(&s);
    uint64_t total = 0;
    hk_pool_fiter it;
    storm_obj *o;
    for (int f = 0; f < frames; f++) {
        /* game logic decides the storm (not timed): 90% of the root parents end */
        for (it = hk_pool_fiter_begin(s.p, s.tick[s.cur]);
             (o = (storm_obj *)hk_pool_fiter_next(&it)) != NULL;)
            if (hk_pool_parent(s.p, it.id).value == 0 && hk_pool_child_count(s.p, it.id) > 0)
                o->ends = (hkb_rand(&s.rng) % 10) != 0;
        uint64_t t0 = hkb_now_ns();
        /* tick: frees are deferred to the end of the loop; survivors go on
         * the next tick list and their layer */
        int nxt = s.cur ^ 1;
        hk_pool_flist_clear(s.p, s.tick[nxt]);
        for (int l = 0; l < STORM_LAYERS; l++) hk_pool_flist_clear(s.p, s.layer[l]);
        for (it = hk_pool_fiter_begin(s.p, s.tick[s.cur]);
             (o = (storm_obj *)hk_pool_fiter_next(&it)) != NULL;) {
            o->acc += 1;
            if (o->ends) {
                hk_pool_free(s.p, it.id, HK_POOL_FREE_SUBTREE); /* children go with it */
            } else {
                hk_pool_flist_push(s.p, s.tick[nxt], it.id);
                hk_pool_flist_push(s.p, s.layer[o->layer], it.id);
            }
        }
        s.cur = nxt;
        /* draw: children of parents cancelled after them in the tick are
         * on the layers too, dead; the iterator skips them */
        uint64_t drawn = 0;
        for (int l = 0; l < STORM_LAYERS; l++)
            for (it = hk_pool_fiter_begin(s.p, s.layer[l]);
                 (o = (storm_obj *)hk_pool_fiter_next(&it)) != NULL;)
                drawn += o->acc;
        s.drawn += drawn;
        storm_pool_refill(&s);
        total += hkb_now_ns() - t0;
    }
    hkb_sink(&s.drawn);
    hk_pool_destroy(s.p);
    return (double)total / frames / 1000.0;
}

/* The seed's design on malloc: ZunListNode-style doubly-linked world list,
 * children in a list under the parent, singly-linked layer lists rebuilt by
 * every tick. Deaths found during the tick are swept right after it (what
 * the seed needed to be correct). */
typedef struct seed_vm {
    struct seed_vm *world_prev, *world_next;
    struct seed_vm *parent, *first_child, *next_sib, *prev_sib;
    struct seed_vm *next_in_layer;
    struct seed_vm *next_dead;
    int dead;
    storm_obj o;
} seed_vm;

typedef struct storm_seed {
    const hkb_allocator *a;
    seed_vm *world_head, *world_tail;
    seed_vm *layer_head[STORM_LAYERS];
    size_t live;
    uint64_t rng, drawn;
} storm_seed;

static seed_vm *seed_new(storm_seed *s, seed_vm *parent) {
    seed_vm *v = (seed_vm *)s->a->malloc(sizeof *v);
    memset(v, 0, offsetof(seed_vm, o));
    v->o.layer = (uint32_t)(hkb_rand(&s->rng) % STORM_LAYERS);
    v->o.ends = 0;
    v->o.acc = 0;
    v->world_prev = s->world_tail;
    if (s->world_tail)
        s->world_tail->world_next = v;
    else
        s->world_head = v;
    s->world_tail = v;
    if (parent) {
        v->parent = parent;
        v->next_sib = parent->first_child;
        if (parent->first_child) parent->first_child->prev_sib = v;
        parent->first_child = v;
    }
    s->live++;
    return v;
}

static void seed_unlink_free(storm_seed *s, seed_vm *v) {
    if (v->world_prev)
        v->world_prev->world_next = v->world_next;
    else
        s->world_head = v->world_next;
    if (v->world_next)
        v->world_next->world_prev = v->world_prev;
    else
        s->world_tail = v->world_prev;
    s->live--;
    s->a->free(v);
}

/* Frees v and its subtree (iteratively, children first through a stack). */
static void seed_destroy(storm_seed *s, seed_vm *v) {
    if (v->parent) {
        if (v->prev_sib)
            v->prev_sib->next_sib = v->next_sib;
        else
            v->parent->first_child = v->next_sib;
        if (v->next_sib) v->next_sib->prev_sib = v->prev_sib;
    }
    seed_vm *stack[64];
    int sp = 0;
    stack[sp++] = v;
    while (sp) {
        seed_vm *x = stack[--sp];
        for (seed_vm *c = x->first_child; c; c = c->next_sib)
            if (sp < 64) stack[sp++] = c;
        seed_unlink_free(s, x);
    }
}

static void seed_refill(storm_seed *s) {
    while (s->live + STORM_KIDS + 1 <= STORM_LIVE) {
        seed_vm *par = seed_new(s, NULL);
        for (int k = 0; k < STORM_KIDS; k++) seed_new(s, par);
    }
}

static double storm_seed_run(const hkb_allocator *a, int frames, uint64_t seed) {
    storm_seed s;
    memset(&s, 0, sizeof s);
    s.a = a;
    s.rng = seed;
    seed_refill(&s);
    uint64_t total = 0;
    for (int f = 0; f < frames; f++) {
        for (seed_vm *v = s.world_head; v; v = v->world_next)
            if (!v->parent && v->first_child) v->o.ends = (hkb_rand(&s.rng) % 10) != 0;
        uint64_t t0 = hkb_now_ns();
        /* on_tick: run every VM, rebuild the layer lists, collect deaths */
        for (int l = 0; l < STORM_LAYERS; l++) s.layer_head[l] = NULL;
        seed_vm *dead = NULL;
        for (seed_vm *v = s.world_head; v; v = v->world_next) {
            v->o.acc += 1;
            if (v->o.ends) {
                v->dead = 1;
                v->next_dead = dead;
                dead = v;
            }
        }
        /* sweep: a dead parent takes its subtree; mark the subtree first so
         * the layer rebuild below skips it */
        for (seed_vm *v = dead; v; v = v->next_dead)
            for (seed_vm *c = v->first_child; c; c = c->next_sib) c->dead = 1;
        for (seed_vm *v = s.world_head; v; v = v->world_next) {
            if (v->dead) continue;
            v->next_in_layer = s.layer_head[v->o.layer];
            s.layer_head[v->o.layer] = v;
        }
        while (dead) {
            seed_vm *n = dead->next_dead;
            seed_destroy(&s, dead);
            dead = n;
        }
        /* on_draw */
        for (int l = 0; l < STORM_LAYERS; l++)
            for (seed_vm *v = s.layer_head[l]; v; v = v->next_in_layer) s.drawn += v->o.acc;
        seed_refill(&s);
        total += hkb_now_ns() - t0;
    }
    hkb_sink(&s.drawn);
    while (s.world_head) {
        seed_vm *v = s.world_head;
        s.world_head = v->world_next;
        a->free(v);
    }
    return (double)total / frames / 1000.0;
}

static void bench_storm(hkb_ctx *ctx, const hkb_allocator *peers, int np) {
    const char *wl = "storm";
    hkb_section(
        SUITE, wl,
        "16,000 live objects with children, 90% of parents cancelled mid-tick, draw, refill (us per frame)");
    int frames = ctx->quick ? 10 : 40;
    enum { MAXP = 8 };
    double v[MAXP + 1][32];
    if (np > MAXP) np = MAXP;
    /* Interleaved: every repetition runs the pool and then the seed design
     * on each peer, so drifts in the machine's load hit all of them alike. */
    for (int r = 0; r < ctx->reps; r++) {
        v[0][r] = storm_pool_run(frames, ctx->seed + (uint64_t)r);
        for (int a = 0; a < np; a++) v[a + 1][r] = storm_seed_run(&peers[a], frames, ctx->seed + (uint64_t)r);
    }
    double pool_us = hkb_median(v[0], ctx->reps);
    hkb_record(SUITE, wl, "heapkit_pool", "us_per_frame", pool_us, "us");
    for (int a = 0; a < np; a++) {
        double us = hkb_median(v[a + 1], ctx->reps);
        char name[64], metric[64];
        snprintf(name, sizeof name, "seed_design+%s", peers[a].name);
        hkb_record(SUITE, wl, name, "us_per_frame", us, "us");
        snprintf(metric, sizeof metric, "ratio_vs_%s", peers[a].name);
        hkb_record(SUITE, wl, "heapkit_pool", metric, us / pool_us, "x");
    }
    hkb_skip_missing(SUITE, wl);
}

void hkb_suite_pool(hkb_ctx *ctx);
void hkb_suite_pool(hkb_ctx *ctx) {
    const hkb_allocator *peers;
    int np = hkb_peers(&peers);
    if (ctx->reps > 32) ctx->reps = 32;
    bench_churn(ctx, peers, np);
    bench_get(ctx);
    bench_storm(ctx, peers, np);
}
