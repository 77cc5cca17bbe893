/* gc: the Papyrus scenario of seed 001_621fea22bf69eb89.
 *
 * A script discards 1000 structs and 1000 arrays per frame for 1000 frames;
 * the collector gets 10 microseconds per frame. The seed's buggy loop
 * (bench/lib_gc_papyrus.h, a line-by-line translation) stalls: it frees one
 * object per call whatever the budget, so the backlog grows by 1998 per
 * frame. heapkit keeps the backlog bounded.
 *
 * No timing assertions: budgets are measured on a simulated clock (each
 * clock read advances it by a fixed cost per object examined), and the
 * real-clock variant relies on allocation-debt pacing, which counts bytes,
 * not time. Both are deterministic on any machine, sanitizers included. */
#include "../bench/lib_gc_papyrus.h"
#include "heapkit/gc.h"
#include "hk_test.h"

#define FRAMES    1000
#define PER_FRAME 1000 /* structs, and as many arrays */
#define BUDGET_NS 10000u

typedef struct sim_clock {
    uint64_t now, cost; /* ns added per read: the modelled cost of examining one object */
} sim_clock;
static uint64_t sim_now(void *u) {
    sim_clock *c = (sim_clock *)u;
    c->now += c->cost;
    return c->now;
}

/* Papyrus `Struct PlotSubClass` (16 bytes of fields here) and `PlotSubClass[0]`. */
static const hk_gc_type k_struct = {"PlotSubClass", 16, NULL, NULL, NULL};
static const hk_gc_type k_array = {"PlotSubClass[]", 0, NULL, NULL, NULL};

typedef struct scenario_result {
    size_t max_backlog; /* largest backlog seen (after a frame's script, before its step) */
    size_t final_backlog;
    size_t backlog_at[FRAMES];
    uint64_t freed;
} scenario_result;

static void run_heapkit(hk_gc *gc, scenario_result *r) {
    memset(r, 0, sizeof *r);
    for (int f = 0; f < FRAMES; f++) {
        for (int i = 0; i < PER_FRAME; i++) hk_gc_release(gc, hk_gc_alloc(gc, &k_struct));
        for (int i = 0; i < PER_FRAME; i++) hk_gc_release(gc, hk_gc_alloc_size(gc, &k_array, 0));
        hk_gc_info in;
        hk_gc_get_info(gc, &in);
        if (in.backlog > r->max_backlog) r->max_backlog = in.backlog;
        hk_gc_step(gc, BUDGET_NS);
        hk_gc_get_info(gc, &in);
        r->backlog_at[f] = in.backlog;
    }
    hk_gc_info in;
    hk_gc_get_info(gc, &in);
    r->final_backlog = in.backlog;
    r->freed = in.freed;
}

/* heapkit, 10 us per frame on a simulated machine where examining an object
 * costs 4 ns: one step reclaims up to 2500 objects, more than the 2000 the
 * script drops, so every frame ends with an empty backlog. */
HKT_TEST(seed_heapkit_budget_keeps_up) {
    sim_clock clk = {0, 4};
    hk_gc_desc d = {0};
    hkt_errors errs = {0};
    d.name = "papyrus";
    d.on_error = hkt_on_error;
    d.error_user = &errs;
    d.clock = sim_now;
    d.clock_user = &clk;
    hk_gc *gc = hk_gc_create(&d);
    static scenario_result r;
    run_heapkit(gc, &r);
    CHECK_EQ(r.max_backlog, 2 * PER_FRAME);
    CHECK_EQ(r.final_backlog, 0);
    for (int f = 0; f < FRAMES; f++) CHECK_EQ(r.backlog_at[f], 0);
    CHECK_EQ(r.freed, (uint64_t)FRAMES * 2 * PER_FRAME);
    hk_gc_info in;
    hk_gc_get_info(gc, &in);
    CHECK_EQ(in.steps, FRAMES);
    CHECK(in.step_max_ns <= BUDGET_NS + 4); /* never past the budget by more than one object */
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    CHECK_EQ(errs.count, 0);
    hk_gc_destroy(gc);
}

/* The same budget on a slower simulated machine (10 ns per object: 999
 * objects per step, half of what the script drops) cannot keep up by time
 * alone; allocation-debt pacing bounds the backlog whatever the clock says. */
HKT_TEST(seed_heapkit_small_budget_needs_pacing) {
    sim_clock clk = {0, 10};
    hk_gc_desc d = {0};
    d.clock = sim_now;
    d.clock_user = &clk;
    hk_gc *gc = hk_gc_create(&d);
    static scenario_result r;
    run_heapkit(gc, &r);
    /* Without pacing: 1001 objects left over per frame. */
    CHECK_EQ(r.final_backlog, (size_t)FRAMES * (PER_FRAME + 1));
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    CHECK_EQ(hk_gc_collect(gc), (size_t)FRAMES * (PER_FRAME + 1));
    hk_gc_destroy(gc);

    clk.now = 0;
    d.pace_bytes = 64 * 1024;
    gc = hk_gc_create(&d);
    run_heapkit(gc, &r);
    CHECK(r.max_backlog < 2 * PER_FRAME);
    CHECK(r.final_backlog < PER_FRAME);
    for (int f = 0; f < FRAMES; f++) CHECK(r.backlog_at[f] < PER_FRAME);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

/* heapkit on the real clock (whatever this machine's speed, sanitizers
 * included) with pacing: the backlog stays under one frame's garbage. */
HKT_TEST(seed_heapkit_real_clock_paced) {
    hk_gc_desc d = {0};
    d.pace_bytes = 64 * 1024;
    hk_gc *gc = hk_gc_create(&d);
    static scenario_result r;
    run_heapkit(gc, &r);
    CHECK(r.max_backlog < 2 * PER_FRAME);
    CHECK(r.final_backlog < 2 * PER_FRAME);
    /* Bounded, not growing: the last frame is no worse than the bound seen
     * after the first ten. */
    size_t early = 0;
    for (int f = 0; f < 10; f++)
        if (r.backlog_at[f] > early) early = r.backlog_at[f];
    CHECK(r.backlog_at[FRAMES - 1] <= early + 2 * PER_FRAME / 10 + 1000);
    CHECK(r.freed + r.final_backlog == (uint64_t)FRAMES * 2 * PER_FRAME);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

/* ---- the seed's loops --------------------------------------------------------- */

static void papyrus_frame(pgc_vm *vm) {
    for (int i = 0; i < PER_FRAME; i++) pgc_release(pgc_new(vm, &vm->structs, 16));
    for (int i = 0; i < PER_FRAME; i++) pgc_release(pgc_new(vm, &vm->arrays, 0));
}

/* The original ProcessEntries: each call frees one object and gives up its
 * slice, whatever the budget, so the backlog grows by 1998 every frame. */
HKT_TEST(seed_buggy_loop_stalls) {
    sim_clock clk = {0, 4};
    pgc_vm vm;
    memset(&vm, 0, sizeof vm);
    vm.clock = sim_now;
    vm.clock_user = &clk;
    size_t prev = 0;
    int grew_every_frame = 1;
    for (int f = 0; f < FRAMES; f++) {
        papyrus_frame(&vm);
        uint64_t before = vm.destroyed;
        pgc_process_buggy(&vm, &vm.arrays, BUDGET_NS);
        pgc_process_buggy(&vm, &vm.structs, BUDGET_NS);
        CHECK_EQ(vm.destroyed - before, 2); /* one object per call */
        size_t now = pgc_count(&vm);
        if (now <= prev) grew_every_frame = 0;
        prev = now;
        if (hkt_cur_failed) break;
    }
    REQUIRE(!vm.oom);
    CHECK(grew_every_frame);
    CHECK_EQ(pgc_backlog(&vm), (size_t)FRAMES * (2 * PER_FRAME - 2));
    /* Even a budget a thousand times larger does not help. */
    uint64_t before = vm.destroyed;
    pgc_process_buggy(&vm, &vm.arrays, 1000 * BUDGET_NS);
    CHECK_EQ(vm.destroyed - before, 1);
    pgc_vm_free(&vm);
}

/* The seed's rewritten loop uses its whole slice (2500 objects of 4 ns). */
HKT_TEST(seed_fixed_loop_uses_budget) {
    sim_clock clk = {0, 4};
    pgc_vm vm;
    memset(&vm, 0, sizeof vm);
    vm.clock = sim_now;
    vm.clock_user = &clk;
    size_t max_backlog = 0;
    for (int f = 0; f < 100; f++) {
        papyrus_frame(&vm);
        pgc_process_fixed(&vm, &vm.arrays, BUDGET_NS);
        pgc_process_fixed(&vm, &vm.structs, BUDGET_NS);
        size_t b = pgc_backlog(&vm);
        if (b > max_backlog) max_backlog = b;
    }
    REQUIRE(!vm.oom);
    CHECK(max_backlog < 2 * PER_FRAME);
    pgc_vm_free(&vm);
}

static void link_trace(void *data, size_t size, hk_gc_visit_fn visit, void *ctx, void *user) {
    (void)size;
    (void)user;
    visit(*(hk_gc_obj **)data, ctx);
}

/* The full pass: the seed's loop-until-nothing-freed needs one round per
 * level of a cascade (and more, through the cursor bug); heapkit's full pass
 * reclaims the same garbage in one linear pass. */
HKT_TEST(seed_full_pass_rounds_vs_one_pass) {
    enum { CHAINS = 50, DEPTH = 40 };
    /* Papyrus: chains built by prepending (child allocated before parent). */
    pgc_vm vm;
    memset(&vm, 0, sizeof vm);
    sim_clock clk = {0, 1};
    vm.clock = sim_now;
    vm.clock_user = &clk;
    for (int c = 0; c < CHAINS; c++) {
        pgc_obj *child = NULL;
        for (int d = 0; d < DEPTH; d++) {
            pgc_obj *o = pgc_new(&vm, d % 2 ? &vm.arrays : &vm.structs, 8);
            if (child) {
                pgc_set_child(o, child);
                pgc_release(child);
            }
            child = o;
        }
        pgc_release(child);
    }
    REQUIRE(!vm.oom);
    CHECK_EQ(pgc_count(&vm), CHAINS * DEPTH);
    CHECK_EQ(pgc_full_pass_buggy(&vm, 0), 1);
    CHECK_EQ(pgc_count(&vm), 0);
    CHECK(vm.rounds >= DEPTH / 2);
    pgc_vm_free(&vm);

    /* heapkit: the same garbage. */
    hk_gc *gc = hk_gc_create(&(hk_gc_desc){0});
    const hk_gc_type t = {"link", sizeof(hk_gc_obj *), link_trace, NULL, NULL};
    for (int c = 0; c < CHAINS; c++) {
        hk_gc_obj *child = NULL;
        for (int d = 0; d < DEPTH; d++) {
            hk_gc_obj *o = hk_gc_alloc(gc, &t);
            *(hk_gc_obj **)hk_gc_data(gc, o) = child; /* the child's reference moves in */
            child = o;
        }
        hk_gc_release(gc, child);
    }
    CHECK_EQ(hk_gc_collect(gc), CHAINS * DEPTH);
    hk_gc_info in;
    hk_gc_get_info(gc, &in);
    CHECK_EQ(in.objects, 0);
    CHECK_EQ(in.collects, 1);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}
