#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
/* Guard heap internals: metadata is apart from user pages and behind an
 * inaccessible page, and a stray write into a slot record, the page map or
 * the counters is caught by check (and by free) — then repaired, check
 * passes again. The records are reached through src/guard_internal.h. */
#include "hk_test.h"

/* These tests write past blocks and ask for absurd sizes on purpose; the
 * allocation attributes of heapkit/guard.h (HK_ALLOC_SIZE) let the compiler
 * see that. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="
#endif
#include "guard_internal.h"

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
        CHECK(!hk_os_readable(regs[i]->base, 8)); /* the leading page is never committed */
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
    hk__guard_out_str(&o, "x=");
    hk__guard_out_dec(&o, 1234567);
    hk__guard_out_str(&o, " ");
    hk__guard_out_sdec(&o, -5);
    hk__guard_out_str(&o, " ");
    hk__guard_out_hex(&o, 0xbeef);
    CHECK(strcmp(buf, "x=1234567 -5 0xbeef") == 0);
    for (int i = 0; i < 20; i++) hk__guard_out_str(&o, "long text");
    CHECK_EQ(o.n, sizeof buf - 1); /* truncated, never overrun */
    CHECK_EQ(strlen(buf), sizeof buf - 1);
}

/* The trace depot's buckets start at one page and double as stacks come:
 * past each growth every stack stored before is found again (same id, same
 * frames) and a new one gets the next id. */
HKT_TEST(guard_trace_buckets_grow) {
    hk_guard *g = mk_internal();
    REQUIRE(g);
    CHECK_EQ(g->nbuckets, GUARD_TRACE_BUCKETS0);
    enum { N = 5000 };
    uint32_t first = g->ntraces;
    for (uint32_t i = 0; i < N; i++) {
        void *fr[3] = {(void *)(uintptr_t)(0x10000 + 16 * i), (void *)(uintptr_t)0x2000,
                       (void *)(uintptr_t)(0x30000 + i % 7)};
        CHECK_EQ(hk__guard_trace_put(g, fr, 3), first + i + 1);
    }
    CHECK(g->nbuckets >= g->ntraces);
    CHECK(g->nbuckets > GUARD_TRACE_BUCKETS0);
    CHECK_EQ(g->nbuckets & (g->nbuckets - 1), 0u);
    for (uint32_t i = 0; i < N; i++) {
        void *fr[3] = {(void *)(uintptr_t)(0x10000 + 16 * i), (void *)(uintptr_t)0x2000,
                       (void *)(uintptr_t)(0x30000 + i % 7)};
        CHECK_EQ(hk__guard_trace_put(g, fr, 3), first + i + 1);
        int n = 0;
        const void *const *got = hk__guard_trace_get(g, first + i + 1, &n);
        REQUIRE(got && n == 3);
        CHECK(got[0] == fr[0] && got[2] == fr[2]);
    }
    CHECK_EQ(g->ntraces, first + N);
    hk_guard_destroy(g);
}
