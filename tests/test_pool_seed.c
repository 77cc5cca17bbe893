/*
 * The two AnmManager crashes of seed 000_73f8a160b760177c, replayed against
 * the pool the way the seed describes them. Run in the sanitizer build: any
 * access to a released object is an ASan error (fast slots are poisoned on
 * release; the overflow objects come from malloc, like the seed's slow path,
 * and most objects here live there because the fast array is kept small).
 *
 * Crash 1 (TH16/TH17 1.00a): during on_tick a child VM runs and is put on its
 * draw layer list; later in the same tick its parent runs, finishes, and is
 * deleted together with its children; on_draw then walks the layer list and
 * touches the freed child. Death scripts whose children outlive the parent
 * are the trigger; many cancelled bullets push VMs onto the slow path.
 *
 * Crash 2 (TH15): at shutdown every VM is destroyed in list order; a parent
 * destroyed before the first child of its child list leaves the child to
 * unlink itself from a sibling list node inside the freed parent.
 */
#include "hk_test.h"
#include "internal.h"

#include "heapkit/pool.h"

#define VM_ALIVE 0x56A11FEu
#define VM_DEAD  0xDEADDEADu
#define NLAYERS  8

typedef struct vm {
    uint32_t magic;
    int32_t frames_left; /* script: runs out -> the VM is deleted */
    uint32_t layer;
    int32_t is_death_script;
    hk_pool_id self;
    char body[40];
} vm;

typedef struct anm_manager {
    hk_pool *pool;
    hk_pool_list world;           /* tick list (link 0) */
    hk_pool_list layers[NLAYERS]; /* draw layers (link 1) */
    int drawn, bad_draws, destructed, bad_destructs;
    hk_pool_children death_mode;
} anm_manager;

static hkt_errors g_errs;

static void vm_destructor(hk_pool *p, hk_pool_id id, void *o, void *user) {
    anm_manager *m = (anm_manager *)user;
    vm *v = (vm *)o;
    (void)p;
    if (v->magic != VM_ALIVE || v->self.value != id.value) m->bad_destructs++;
    v->magic = VM_DEAD; /* a later read of this VM would see it even without ASan */
    m->destructed++;
}

static void mgr_init(anm_manager *m, uint32_t fast_capacity) {
    memset(m, 0, sizeof *m);
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = sizeof(vm);
    d.capacity = fast_capacity; /* small: most VMs take the slow (overflow) path */
    d.links = 2;
    d.name = "AnmManager";
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    d.on_destroy = vm_destructor;
    d.destroy_user = m;
    m->pool = hk_pool_create(&d);
    m->world = hk_pool_list_create(m->pool, 0, "world_list");
    char *names[NLAYERS] = {"layer0", "layer1", "layer2", "layer3", "layer4", "layer5", "layer6", "layer7"};
    for (int i = 0; i < NLAYERS; i++) m->layers[i] = hk_pool_list_create(m->pool, 1, names[i]);
}

static hk_pool_id vm_new(anm_manager *m, hk_pool_id parent, int frames, uint32_t layer, int death) {
    vm *v;
    hk_pool_id id = parent.value ? hk_pool_alloc_child(m->pool, parent, (void **)&v)
                                 : hk_pool_alloc(m->pool, (void **)&v);
    if (!id.value) return id;
    v->magic = VM_ALIVE;
    v->frames_left = frames;
    v->layer = layer;
    v->is_death_script = death;
    v->self = id;
    hk_pool_list_push_back(m->pool, m->world, id);
    return id;
}

/* on_tick: run each VM; a VM whose script ends is deleted (with its children
 * or, for death scripts, leaving them to outlive it). A VM that keeps running
 * goes on its draw layer, exactly as the seed's tick built the layer lists. */
static int tick_vm(hk_pool *p, hk_pool_id id, void *o, void *user) {
    anm_manager *m = (anm_manager *)user;
    vm *v = (vm *)o;
    CHECK_EQ(v->magic, VM_ALIVE);
    if (--v->frames_left <= 0) {
        CHECK_EQ(hk_pool_free(p, id, v->is_death_script ? m->death_mode : HK_POOL_FREE_SUBTREE), HK_OK);
        /* the seed's VM is still referenced by this stack frame: it stays valid */
        CHECK_EQ(v->magic, VM_ALIVE);
        return 0;
    }
    CHECK_EQ(hk_pool_list_push_back(p, m->layers[v->layer], id), HK_OK);
    return 0;
}

/* on_draw: walk one layer and "render" each VM, touching its memory. */
static int draw_vm(hk_pool *p, hk_pool_id id, void *o, void *user) {
    anm_manager *m = (anm_manager *)user;
    vm *v = (vm *)o;
    m->drawn++;
    if (v->magic != VM_ALIVE || !hk_pool_is_alive(p, id) || v->self.value != id.value) m->bad_draws++;
    v->body[0]++; /* a write, as rendering updates the VM */
    return 0;
}

static void frame(anm_manager *m) {
    hk_pool_defer_begin(m->pool); /* the whole on_tick is one scope */
    hk_pool_list_each(m->pool, m->world, tick_vm, m);
    hk_pool_defer_end(m->pool);
    for (int l = 0; l < NLAYERS; l++) hk_pool_list_each(m->pool, m->layers[l], draw_vm, m);
}

static size_t live_count(anm_manager *m) {
    hk_pool_info info;
    hk_pool_get_info(m->pool, &info);
    return info.live;
}

/* Crash 1, as the seed tells it: the children are ticked (and put on their
 * layer) before their parent, the parent's death script ends in the same
 * tick and deletes the parent with its children, then the layers are drawn. */
static void crash1(hk_pool_children mode) {
    anm_manager m;
    mgr_init(&m, 64);
    m.death_mode = mode;
    enum { ENEMIES = 300, KIDS = 6 };
    hk_pool_id parents[ENEMIES], kids[ENEMIES][KIDS];
    /* children first in the world list so they tick (and reach their layer)
     * before the parent: set their parent afterwards */
    for (int e = 0; e < ENEMIES; e++)
        for (int k = 0; k < KIDS; k++)
            kids[e][k] = vm_new(&m, (hk_pool_id){0}, 5 + k, (uint32_t)(k % NLAYERS), 0);
    for (int e = 0; e < ENEMIES; e++) {
        parents[e] = vm_new(&m, (hk_pool_id){0}, 2, 0, 1); /* death script: ends on frame 2 */
        for (int k = 0; k < KIDS; k++) REQUIRE(hk_pool_set_parent(m.pool, kids[e][k], parents[e]) == HK_OK);
    }
    /* plenty of bullets too: they crowd the fast slots, as cancels did */
    for (int b = 0; b < 2000; b++) vm_new(&m, (hk_pool_id){0}, 1 + b % 3, (uint32_t)(b % NLAYERS), 0);
    hk_pool_info info;
    hk_pool_get_info(m.pool, &info);
    CHECK(info.overflow_live > 2000); /* the slow path is in use, as in the crash */
    CHECK_EQ(hk_pool_check(m.pool), HK_OK);

    frame(&m); /* frame 1: everybody runs; a third of the bullets end */
    CHECK_EQ(m.bad_draws, 0);
    CHECK_EQ(hk_pool_check(m.pool), HK_OK);

    m.drawn = 0;
    frame(&m); /* frame 2: the children tick first, then every parent dies */
    CHECK_EQ(m.bad_draws, 0);
    for (int e = 0; e < ENEMIES; e++) CHECK(!hk_pool_is_alive(m.pool, parents[e]));
    int kids_alive = 0;
    for (int e = 0; e < ENEMIES; e++)
        for (int k = 0; k < KIDS; k++) kids_alive += hk_pool_is_alive(m.pool, kids[e][k]);
    if (mode == HK_POOL_DETACH) {
        CHECK_EQ(kids_alive, ENEMIES * KIDS); /* children outlive the parent */
        CHECK(hk_pool_parent(m.pool, kids[0][0]).value == 0);
    } else {
        CHECK_EQ(kids_alive, 0);
    }
    /* exactly the live VMs were drawn: nothing freed is left on a layer */
    size_t on_layers = 0;
    for (int l = 0; l < NLAYERS; l++) on_layers += hk_pool_list_count(m.pool, m.layers[l]);
    CHECK_EQ(on_layers, live_count(&m));
    CHECK_EQ((size_t)m.drawn, live_count(&m));
    CHECK_EQ(m.bad_destructs, 0);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(m.pool), HK_OK);

    /* run until everything has ended */
    for (int f = 0; f < 12; f++) frame(&m);
    CHECK_EQ(live_count(&m), 0);
    CHECK_EQ(m.bad_draws, 0);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(m.pool), HK_OK);
    hk_pool_destroy(m.pool);
}

HKT_TEST(seed_crash1_children_outlive_parent_deleted_mid_tick) { crash1(HK_POOL_DETACH); }
HKT_TEST(seed_crash1_children_die_with_parent_mid_tick) { crash1(HK_POOL_FREE_SUBTREE); }

/* Crash 1 again, without any defer scope: the parent is freed immediately in
 * the middle of the tick iteration's callbacks (list_each still defers, but
 * here the draw happens from a plain loop over the layer with first/next). */
HKT_TEST(seed_crash1_immediate_free_then_plain_draw_loop) {
    anm_manager m;
    mgr_init(&m, 16);
    hk_pool_id parent = vm_new(&m, (hk_pool_id){0}, 1, 0, 0);
    hk_pool_id kids[40];
    for (int k = 0; k < 40; k++) {
        kids[k] = vm_new(&m, parent, 10, 3, 0);
        hk_pool_list_push_back(m.pool, m.layers[3], kids[k]);
    }
    CHECK_EQ(hk_pool_free(m.pool, parent, HK_POOL_FREE_SUBTREE), HK_OK);
    int n = 0;
    for (hk_pool_id x = hk_pool_list_first(m.pool, m.layers[3]); x.value;
         x = hk_pool_list_next(m.pool, m.layers[3], x))
        n++;
    CHECK_EQ(n, 0);
    for (int k = 0; k < 40; k++) CHECK(hk_pool_get(m.pool, kids[k]) == NULL);
    CHECK_EQ(hk_pool_check(m.pool), HK_OK);
    hk_pool_destroy(m.pool);
}

/* Crash 2: shutdown walks every VM and destroys it one by one; each parent is
 * reached before the first child of its child list (parents were allocated
 * first). With the seed's singly-linked sibling list inside the parent, the
 * child's unlink wrote into the freed parent. */
static int shutdown_vm(hk_pool *p, hk_pool_id id, void *o, void *user) {
    anm_manager *m = (anm_manager *)user;
    (void)m;
    CHECK_EQ(((vm *)o)->magic, VM_ALIVE);
    CHECK_EQ(hk_pool_free(p, id, HK_POOL_DETACH), HK_OK);
    return 0;
}

HKT_TEST(seed_crash2_shutdown_parent_before_first_child) {
    anm_manager m;
    mgr_init(&m, 32);
    enum { PARENTS = 400, KIDS = 5 };
    hk_pool_id parents[PARENTS], kids[PARENTS][KIDS];
    for (int e = 0; e < PARENTS; e++) parents[e] = vm_new(&m, (hk_pool_id){0}, 100, 0, 0);
    for (int e = 0; e < PARENTS; e++)
        for (int k = 0; k < KIDS; k++) kids[e][k] = vm_new(&m, parents[e], 100, 1, 0);
    /* grandchildren, so a child is itself a parent freed before its child */
    for (int e = 0; e < PARENTS; e += 7) vm_new(&m, kids[e][0], 100, 2, 0);
    CHECK_EQ(hk_pool_check(m.pool), HK_OK);

    /* shutdown in allocation order: the parent before its first child */
    hk_pool_each(m.pool, shutdown_vm, &m);
    CHECK_EQ(live_count(&m), 0);
    CHECK_EQ(m.bad_destructs, 0);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(m.pool), HK_OK);
    hk_pool_destroy(m.pool);
}

/* The same shutdown written as the seed's loop: no iteration helper, each VM
 * destroyed immediately by ID, parents first; the children, now roots, are
 * destroyed afterwards and each one's unlink touches only live metadata. */
HKT_TEST(seed_crash2_shutdown_by_id_loop) {
    anm_manager m;
    mgr_init(&m, 8);
    enum { PARENTS = 100, KIDS = 4 };
    hk_pool_id all[PARENTS * (KIDS + 1)];
    int n = 0;
    hk_pool_id parents[PARENTS];
    for (int e = 0; e < PARENTS; e++) all[n++] = parents[e] = vm_new(&m, (hk_pool_id){0}, 9, 0, 0);
    for (int e = 0; e < PARENTS; e++)
        for (int k = 0; k < KIDS; k++) all[n++] = vm_new(&m, parents[e], 9, 1, 0);
    for (int i = 0; i < n; i++) {
        vm *v = (vm *)hk_pool_get(m.pool, all[i]);
        REQUIRE(v != NULL);
        CHECK_EQ(v->magic, VM_ALIVE);
        CHECK_EQ(hk_pool_free(m.pool, all[i], HK_POOL_DETACH), HK_OK);
        if (i % 50 == 0) CHECK_EQ(hk_pool_check(m.pool), HK_OK);
    }
    CHECK_EQ(live_count(&m), 0);
    CHECK_EQ(m.destructed, n);
    CHECK_EQ(m.bad_destructs, 0);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(m.pool), HK_OK);
    /* and pool destruction with a live tree, the other shutdown path */
    hk_pool_id r = vm_new(&m, (hk_pool_id){0}, 9, 0, 0);
    for (int k = 0; k < 30; k++) vm_new(&m, r, 9, 1, 0);
    m.destructed = 0;
    hk_pool_destroy(m.pool);
    CHECK_EQ(m.destructed, 31);
    CHECK_EQ(m.bad_destructs, 0);
}
