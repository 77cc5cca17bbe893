#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
/* Guard heap internals: metadata is apart from user pages and behind an
 * inaccessible page, and a stray write into a slot record, the page map or
 * the counters is caught by check (and by free) — then repaired, check
 * passes again. This program compiles the guard sources itself to reach the
 * records. */
#include "hk_test.h"
#include "internal.h"

#include "guard.c"
#include "guard_posix.c"

#include <execinfo.h>
#include <pthread.h>

static hkt_errors errs = {.quiet = 1};

static hk_guard *mk_internal(void) {
    hk_guard_desc d = {0};
    d.reserve = (size_t)1 << 28;
    d.on_error = hkt_on_error;
    d.error_user = &errs;
    hkt_errors_reset(&errs);
    return hk_guard_create(&d);
}

HKT_TEST(guard_metadata_apart_and_fenced) {
    hk_guard *g = mk_internal();
    REQUIRE(g);
    const guard_region *regs[4] = {&g->slot_reg, &g->map_reg, &g->trace_reg, &g->bucket_reg};
    for (int i = 0; i < 4; i++) {
        uintptr_t b = (uintptr_t)regs[i]->base;
        CHECK(b + regs[i]->size <= (uintptr_t)g->arena || b >= (uintptr_t)g->arena + g->arena_size);
        CHECK(!hk__guard_os_readable(regs[i]->base, 8)); /* the leading page is never committed */
    }
    CHECK(!guard_in_arena(g, g));
    hk_guard_destroy(g);
}

HKT_TEST(guard_slot_record_damage) {
    hk_guard *g = mk_internal();
    REQUIRE(g);
    char *p = hk_guard_alloc(g, 100);
    char *q = hk_guard_alloc(g, 100);
    REQUIRE(p && q);
    uint32_t id = guard_slot_of(g, p);
    REQUIRE(id != 0);
    guard_slot *s = &g->slots[id];
    size_t saved = s->requested;
    s->requested = 5000; /* a stray write */
    CHECK_EQ(hk_guard_check(g), HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, HK_EK_CORRUPT_HEADER);
    CHECK_EQ(hk_guard_free(g, p), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(errs.last_message, "slot record is damaged");
    s->requested = saved;
    CHECK_EQ(hk_guard_check(g), HK_OK);

    uint32_t qid = guard_slot_of(g, q);
    size_t page = g->slots[qid].base_page;
    g->pagemap[page + 1] = id;
    CHECK_EQ(hk_guard_check(g), HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, HK_EK_CORRUPT_STRUCTURE);
    g->pagemap[page + 1] = qid;
    CHECK_EQ(hk_guard_check(g), HK_OK);

    g->live_guarded++;
    CHECK_EQ(hk_guard_check(g), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(errs.last_message, "live block count");
    g->live_guarded--;
    hk_guard_free(g, q);
    g->q_blocks++;
    CHECK_EQ(hk_guard_check(g), HK_ERR_CORRUPT);
    g->q_blocks--;
    CHECK_EQ(hk_guard_check(g), HK_OK);
    CHECK_EQ(hk_guard_free(g, p), HK_OK);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
}

HKT_TEST(guard_report_formatting_is_allocation_free) {
    char buf[64];
    guard_out o = {buf, 0, sizeof buf};
    guard_out_str(&o, "x=");
    guard_out_dec(&o, 1234567);
    guard_out_str(&o, " ");
    guard_out_sdec(&o, -5);
    guard_out_str(&o, " ");
    guard_out_hex(&o, 0xbeef);
    CHECK(strcmp(buf, "x=1234567 -5 0xbeef") == 0);
    for (int i = 0; i < 20; i++) guard_out_str(&o, "long text");
    CHECK_EQ(o.n, sizeof buf - 1); /* truncated, never overrun */
    CHECK_EQ(strlen(buf), sizeof buf - 1);
}

/* The learned-frame-size stack walker against glibc's backtrace(): the
 * same frames on every call, through recursion, two call paths into the
 * same function at the same depth, and frames whose size varies (VLAs). */
typedef struct uw_snap {
    void *fast[24], *ex[26];
    int nf, ne;
} uw_snap;
static volatile int uw_sink;

static HK__NOINLINE void uw_leaf(uw_snap *s) {
    s->nf = hk__guard_os_stack(s->fast, 24, 0);
    s->ne = backtrace(s->ex, 26);
    uw_sink++;
}
static HK__NOINLINE void uw_vla(uw_snap *s, int n) {
    volatile char buf[n + 1];
    buf[0] = (char)n;
    uw_leaf(s);
    uw_sink += buf[0];
}
static HK__NOINLINE void uw_rec(uw_snap *s, int depth, int vla) {
    if (depth == 0) {
        if (vla)
            uw_vla(s, vla);
        else
            uw_leaf(s);
    } else {
        uw_rec(s, depth - 1, vla);
    }
    uw_sink++;
}
static HK__NOINLINE void uw_path_a(uw_snap *s) {
    uw_rec(s, 2, 0);
    uw_sink++;
}
static HK__NOINLINE void uw_path_b(uw_snap *s) {
    uw_rec(s, 2, 0);
    uw_sink += 2;
}

static int uw_same(const uw_snap *s) {
    /* frame 0 is a pc in uw_leaf (two different call sites); the rest match.
     * backtrace() may add frames of its own first (ASan intercepts it). */
    int k = 1;
    while (k < 4 && s->nf > 1 && s->ex[k] != s->fast[1]) k++;
    if (k == 4) return 0;
    int want = s->ne - (k - 1) < 24 ? s->ne - (k - 1) : 24;
    if (s->nf != want) return 0;
    for (int i = 1; i < s->nf; i++)
        if (s->fast[i] != s->ex[i + k - 1]) return 0;
    return 1;
}

static void *uw_thread(void *arg) {
    int *bad = (int *)arg;
    uw_snap s;
    for (int i = 0; i < 200; i++) {
        memset(&s, 0, sizeof s);
        if (i & 1)
            uw_path_a(&s);
        else
            uw_rec(&s, i % 5, (i % 3) * 100);
        if (!uw_same(&s)) (*bad)++;
    }
    return NULL;
}

HKT_TEST(guard_fast_stacks_match_backtrace) {
    uw_snap s;
    int bad = 0;
    for (int i = 0; i < 600; i++) {
        memset(&s, 0, sizeof s);
        switch (i % 4) {
        case 0: uw_path_a(&s); break;
        case 1: uw_path_b(&s); break;
        case 2: uw_rec(&s, i % 7, 0); break;
        default: uw_rec(&s, i % 3, 1 + (i * 37) % 3000); break;
        }
        if (!uw_same(&s)) {
            if (bad++ < 3) {
                fprintf(stderr, "case %d nf %d ne %d\n", i % 4, s.nf, s.ne);
                for (int k = 0; k < 26; k++) fprintf(stderr, "  %p %p\n", k < 24 ? s.fast[k] : NULL, s.ex[k]);
            }
        }
    }
    CHECK_EQ(bad, 0);
    pthread_t t;
    int tbad = 0;
    REQUIRE(pthread_create(&t, NULL, uw_thread, &tbad) == 0);
    pthread_join(t, NULL);
    CHECK_EQ(tbad, 0);
}
