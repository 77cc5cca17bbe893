/* Pool: IDs, generations, FIFO reuse, wraparound, overflow path, lists,
 * iteration, parent/child, deferred free, introspection and misuse. */
#include "internal.h"
#include "pool_test_util.h"

HKT_TEST(pool_create_defaults_and_invalid) {
    hk_pool_desc d = {0};
    d.flags = HK_FLAG_QUIET; /* the refusals below are reported; keep the output clean */
    CHECK(hk_pool_create(NULL) == NULL);
    CHECK(hk_pool_create(&d) == NULL); /* elem_size 0 */
    d.elem_size = 100;
    hk_pool *p = hk_pool_create(&d);
    REQUIRE(p != NULL);
    hk_pool_info info;
    CHECK_EQ(hk_pool_get_info(p, &info), HK_OK);
    CHECK_EQ(info.capacity, 16383);
    CHECK_EQ(info.index_bits, 14);
    CHECK_EQ(info.slot_uses, 262143);
    CHECK_EQ(info.free_slots, 16383);
    hk_stats st;
    CHECK_EQ(hk_pool_stats(p, &st), HK_OK);
    CHECK(strcmp(st.allocator, "pool") == 0);
    CHECK_EQ(st.capacity, 16383 * 112);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
    hk_pool_destroy(NULL);

    hk_pool_desc bad = d;
    bad.align = 24;
    CHECK(hk_pool_create(&bad) == NULL);
    bad = d;
    bad.index_bits = 1;
    CHECK(hk_pool_create(&bad) == NULL);
    bad.index_bits = 25;
    CHECK(hk_pool_create(&bad) == NULL);
    bad = d;
    bad.index_bits = 4;
    bad.capacity = 16; /* index 15 is reserved for the overflow path */
    CHECK(hk_pool_create(&bad) == NULL);
    bad.capacity = 15;
    p = hk_pool_create(&bad);
    CHECK(p != NULL);
    hk_pool_destroy(p);
    bad = d;
    bad.links = HK_POOL_MAX_LINKS + 1;
    CHECK(hk_pool_create(&bad) == NULL);
    bad = d;
    bad.max_lists = HK_POOL_MAX_LISTS + 1;
    CHECK(hk_pool_create(&bad) == NULL);
    bad = d;
    bad.lock.lock = (void (*)(void *))abort; /* half-set lock hooks */
    CHECK(hk_pool_create(&bad) == NULL);
    bad = d;
    bad.backing.alloc = NULL;
    bad.backing.free = (void (*)(void *, size_t, void *))abort; /* half-set backing hooks */
    CHECK(hk_pool_create(&bad) == NULL);
}

/* Refusals go through on_error, like every other misuse: half-set hooks
 * (checked by the instance core) and an invalid desc. */
HKT_TEST(pool_create_refusals_are_reported) {
    hkt_errors errs = {0};
    errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = 16;
    d.on_error = hkt_on_error;
    d.error_user = &errs;
    d.lock.lock = hkt_lock; /* no unlock */
    CHECK(hk_pool_create(&d) == NULL);
    CHECK_EQ(errs.count, 1);
    CHECK_EQ(errs.last_kind, HK_EK_INVALID_ARG);
    CHECK_STR_CONTAINS(errs.last_message, "lock hooks need both lock and unlock");
    d.lock.lock = NULL;
    d.backing.free = (void (*)(void *, size_t, void *))abort; /* no alloc */
    CHECK(hk_pool_create(&d) == NULL);
    CHECK_EQ(errs.count, 2);
    CHECK_STR_CONTAINS(errs.last_message, "backing hooks need both alloc and free");
    d.backing.free = NULL;
    d.elem_size = 0;
    CHECK(hk_pool_create(&d) == NULL);
    CHECK_EQ(errs.count, 3);
    CHECK_STR_CONTAINS(errs.last_message, "pool 'pool': invalid argument: create: elem_size is 0");
    static unsigned char small[256];
    d.elem_size = 16;
    d.memory = small;
    d.size = sizeof small;
    CHECK(hk_pool_create(&d) == NULL);
    CHECK_EQ(errs.count, 4);
    CHECK_STR_CONTAINS(errs.last_message, "hk_pool_memory_size");
}

HKT_TEST(pool_size_overflow_fails_cleanly) {
    hk_pool_desc d = {0};
    d.flags = HK_FLAG_QUIET; /* the refusals below are reported; keep the output clean */
    d.elem_size = SIZE_MAX;
    CHECK_EQ(hk_pool_memory_size(&d), 0);
    CHECK(hk_pool_create(&d) == NULL);
    d.elem_size = SIZE_MAX / 4;
    d.capacity = 100;
    CHECK_EQ(hk_pool_memory_size(&d), 0);
    CHECK(hk_pool_create(&d) == NULL);
    d.elem_size = SIZE_MAX - 8; /* aligning up to 16 overflows */
    CHECK_EQ(hk_pool_memory_size(&d), 0);
}

HKT_TEST(pool_caller_memory) {
    static unsigned char mem[64 * 1024];
    hk_pool_desc d = {0};
    d.flags = HK_FLAG_QUIET; /* the refusals below are reported; keep the output clean */
    d.elem_size = 48;
    d.capacity = 100;
    d.align = 64;
    size_t need = hk_pool_memory_size(&d);
    CHECK(need > 100 * 64 && need < sizeof mem);
    d.memory = mem;
    d.size = need - 1;
    CHECK(hk_pool_create(&d) == NULL);
    d.size = need;
    hk_pool *p = hk_pool_create(&d);
    REQUIRE(p != NULL);
    CHECK((unsigned char *)p >= mem && (unsigned char *)p < mem + need);
    for (int i = 0; i < 100; i++) {
        void *o;
        hk_pool_id id = hk_pool_alloc(p, &o);
        CHECK(id.value != 0);
        CHECK(((uintptr_t)o % 64) == 0);
        CHECK((unsigned char *)o >= mem && (unsigned char *)o + 48 <= mem + need);
        memset(o, i, 48);
    }
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_alloc_get_id_of) {
    hk_pool *p = mk(64, 0);
    REQUIRE(p != NULL);
    void *o = NULL;
    hk_pool_id a = hk_pool_alloc(p, &o);
    CHECK(a.value != 0);
    CHECK(o != NULL);
    CHECK(((uintptr_t)o % 16) == 0);
    CHECK(hk_pool_get(p, a) == o);
    CHECK(hk_pool_is_alive(p, a));
    CHECK_EQ(hk_pool_id_of(p, o).value, a.value);
    CHECK_EQ(hk_pool_id_of(p, (char *)o + 1).value, 0); /* interior */
    CHECK_EQ(hk_pool_id_of(p, &a).value, 0);            /* foreign */
    CHECK_EQ(hk_pool_id_of(p, NULL).value, 0);
    CHECK(hk_pool_get(p, (hk_pool_id){0}) == NULL);
    CHECK(!hk_pool_is_alive(p, (hk_pool_id){0}));
    CHECK(hk_pool_get(NULL, a) == NULL);
    CHECK_EQ(hk_pool_id_index(p, a), 0);
    CHECK(hk_pool_id_generation(p, a) != 0);
    hk_pool_id b = hk_pool_alloc(p, NULL);
    CHECK_EQ(hk_pool_id_index(p, b), 1);
    CHECK(hk_pool_get(p, b) == (char *)o + 64);
    CHECK_EQ(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_OK);
    CHECK(hk_pool_get(p, a) == NULL);
    CHECK(!hk_pool_is_alive(p, a));
    CHECK_EQ(hk_pool_id_of(p, o).value, 0);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_zero_and_fill_flags) {
    hk_pool *p = mk(4, HK_FLAG_ZERO);
    obj *o;
    hk_pool_id a = hk_pool_alloc(p, (void **)&o);
    memset(o, 0x77, sizeof *o);
    hk_pool_free(p, a, HK_POOL_FREE_SUBTREE);
    for (int i = 0; i < 4; i++) {
        hk_pool_alloc(p, (void **)&o);
        CHECK_EQ(hk_fill_check(o, sizeof *o, 0), sizeof *o);
    }
    hk_pool_destroy(p);
    p = mk(4, HK_FLAG_FILL);
    hk_pool_alloc(p, (void **)&o);
    CHECK_EQ(hk_fill_check(o, sizeof *o, HK_FILL_ALLOC), sizeof *o);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_fill_detects_write_after_free) {
    if (hk__asan_enabled()) return; /* ASan owns this: the freed slot is poisoned */
    hk_pool *p = mk(4, HK_FLAG_FILL);
    obj *o;
    hk_pool_id a = hk_pool_alloc(p, (void **)&o);
    hk_pool_free(p, a, HK_POOL_FREE_SUBTREE);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    o->n = 5; /* write after free */
    CHECK_EQ(hk_pool_check(p), HK_ERR_CORRUPT);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_FREE);
    CHECK_STR_CONTAINS(g_errs.last_message, "written after free");
    hk_fill(o, sizeof *o, HK_FILL_FREE);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_freed_slot_is_poisoned_under_asan) {
#ifdef HK__ASAN
    hk_pool *p = mk(4, 0);
    void *o;
    hk_pool_id a = hk_pool_alloc(p, &o);
    CHECK(!__asan_address_is_poisoned(o));
    hk_pool_free(p, a, HK_POOL_FREE_SUBTREE);
    CHECK(__asan_address_is_poisoned(o));
    hk_pool_destroy(p);
#endif
}

HKT_TEST(pool_fifo_reuse) {
    hk_pool *p = mk(4, HK_POOL_NO_OVERFLOW);
    hk_pool_id id[4];
    for (int i = 0; i < 4; i++) id[i] = hk_pool_alloc(p, NULL);
    hk_pool_free(p, id[2], HK_POOL_FREE_SUBTREE);
    hk_pool_free(p, id[0], HK_POOL_FREE_SUBTREE);
    hk_pool_id x = hk_pool_alloc(p, NULL), y = hk_pool_alloc(p, NULL);
    CHECK_EQ(hk_pool_id_index(p, x), 2); /* oldest free slot first */
    CHECK_EQ(hk_pool_id_index(p, y), 0);
    CHECK(x.value != id[2].value);
    CHECK_EQ(hk_pool_id_generation(p, x), hk_pool_id_generation(p, id[2]) % HK_POOL_SLOT_USES(14) + 1);
    CHECK(hk_pool_get(p, id[2]) == NULL); /* stale */
    CHECK(hk_pool_get(p, x) != NULL);
    hk_pool_id z = hk_pool_alloc(p, NULL); /* full, no overflow */
    CHECK_EQ(z.value, 0);
    CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
    CHECK_STR_CONTAINS(g_errs.last_message, "all 4 fast slots in use");
    hk_stats st;
    hk_pool_stats(p, &st);
    CHECK_EQ(st.fail_count, 1);
    CHECK_EQ(st.largest_free, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* index_bits 24 leaves 8 generation bits: 255 uses per slot. */
static hk_pool *mk_small_gen(uint32_t flags) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = 8;
    d.capacity = 1;
    d.index_bits = 24;
    d.flags = flags | HK_POOL_NO_OVERFLOW;
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    return hk_pool_create(&d);
}

HKT_TEST(pool_generation_retire_and_recycle) {
    hk_pool *p = mk_small_gen(0);
    REQUIRE(p != NULL);
    hk_pool_info info;
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.slot_uses, 255);
    unsigned char seen[256] = {0};
    hk_pool_id first = {0}, prev = {0};
    for (int i = 0; i < 255; i++) {
        hk_pool_id id = hk_pool_alloc(p, NULL);
        REQUIRE(id.value != 0);
        uint32_t g = hk_pool_id_generation(p, id);
        CHECK(g >= 1 && g <= 255);
        CHECK(!seen[g]);
        seen[g] = 1;
        if (i == 0) first = id;
        if (prev.value) CHECK(hk_pool_get(p, prev) == NULL);
        prev = id;
        CHECK_EQ(hk_pool_free(p, id, HK_POOL_FREE_SUBTREE), HK_OK);
    }
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.retired_slots, 1);
    CHECK_EQ(info.free_slots, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    /* the retired slot is never reused: every old ID stays dead */
    CHECK_EQ(hk_pool_alloc(p, NULL).value, 0);
    CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
    CHECK_STR_CONTAINS(g_errs.last_message, "1 retired");
    CHECK(hk_pool_get(p, first) == NULL);
    /* recycle at a safe point */
    hk_pool_defer_begin(p);
    CHECK_EQ(hk_pool_recycle(p), HK_ERR_STATE);
    CHECK_EQ(g_errs.last_kind, HK_EK_STATE);
    hk_pool_defer_end(p);
    CHECK_EQ(hk_pool_recycle(p), 1);
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.retired_slots, 0);
    CHECK_EQ(info.free_slots, 1);
    hk_pool_id again = hk_pool_alloc(p, NULL);
    CHECK_EQ(again.value, first.value); /* the sequence restarts */
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_generation_wrap_flag) {
    hk_pool *p = mk_small_gen(HK_POOL_WRAP);
    hk_pool_id first = {0};
    for (int i = 0; i < 600; i++) {
        hk_pool_id id = hk_pool_alloc(p, NULL);
        REQUIRE(id.value != 0);
        CHECK(hk_pool_id_generation(p, id) != 0);
        if (i == 0) first = id;
        if (i == 255) CHECK_EQ(id.value, first.value); /* wrapped after 255 uses */
        hk_pool_free(p, id, HK_POOL_FREE_SUBTREE);
    }
    hk_pool_info info;
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.retired_slots, 0);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

typedef struct hook_counts {
    int allocs, frees, fail_after;
    size_t bytes;
} hook_counts;
static void *count_alloc(size_t n, void *u) {
    hook_counts *c = (hook_counts *)u;
    if (c->fail_after >= 0 && c->allocs >= c->fail_after) return NULL;
    c->allocs++;
    c->bytes += n;
    return malloc(n);
}
static void count_free(void *ptr, size_t n, void *u) {
    hook_counts *c = (hook_counts *)u;
    c->frees++;
    c->bytes -= n;
    free(ptr);
}

HKT_TEST(pool_overflow_path) {
    hook_counts hc = {0, 0, -1, 0};
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = sizeof(obj);
    d.capacity = 8;
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    d.backing = (hk_alloc_hooks){count_alloc, count_free, &hc};
    hk_pool *p = hk_pool_create(&d);
    REQUIRE(p != NULL);
    enum { N = 300 };
    hk_pool_id ids[N];
    obj *ptrs[N];
    for (int i = 0; i < N; i++) {
        ids[i] = hk_pool_alloc(p, (void **)&ptrs[i]);
        REQUIRE(ids[i].value != 0);
        ptrs[i]->n = (uint32_t)i;
    }
    hk_pool_info info;
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.overflow_live, N - 8);
    CHECK_EQ(info.fast_live, 8);
    CHECK_EQ(info.overflow_allocs, N - 8);
    CHECK(hc.allocs > N - 8);
    for (int i = 0; i < N; i++) {
        CHECK(hk_pool_get(p, ids[i]) == ptrs[i]);
        CHECK_EQ(hk_pool_id_of(p, ptrs[i]).value, ids[i].value);
        if (i >= 8) CHECK_EQ(hk_pool_id_index(p, ids[i]), 16383); /* the overflow index */
    }
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_block_info bi;
    CHECK_EQ(hk_pool_where(p, ptrs[100], &bi), HK_OK);
    CHECK(bi.flags & HK_BLOCK_OVERFLOW);
    CHECK_EQ(bi.id, ids[100].value);
    CHECK_EQ(hk_pool_where(p, (char *)ptrs[100] + 10, &bi), HK_OK);
    CHECK(bi.address == ptrs[100]);
    /* free half of the overflow objects: lookups stay exact */
    for (int i = 8; i < N; i += 2) CHECK_EQ(hk_pool_free(p, ids[i], HK_POOL_FREE_SUBTREE), HK_OK);
    for (int i = 0; i < N; i++) CHECK(hk_pool_get(p, ids[i]) == ((i < 8 || i % 2) ? ptrs[i] : NULL));
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.overflow_live, (N - 8) / 2);
    CHECK_EQ(info.overflow_peak, N - 8);
    /* a freed overflow ID freed again: a double free while its overflow
     * slot still names it, stale for any other use */
    CHECK_EQ(hk_pool_free(p, ids[8], HK_POOL_FREE_SUBTREE), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(g_errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK_STR_CONTAINS(g_errs.last_message, "already freed (overflow slot");
    CHECK_EQ(hk_pool_list_push_back(p, hk_pool_list_create(p, 0, "l"), ids[8]), HK_ERR_STALE);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    CHECK_STR_CONTAINS(g_errs.last_message, "stale ID");
    /* a never-issued overflow key is foreign */
    hk_pool_id never = {(hk_pool_id_generation(p, ids[N - 1]) + 1000u) << 14 | 16383u};
    CHECK_EQ(hk_pool_free(p, never, HK_POOL_FREE_SUBTREE), HK_ERR_FOREIGN);
    CHECK_EQ(g_errs.last_kind, HK_EK_FOREIGN_PTR);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    /* freeing fast objects makes the fast path usable again */
    hk_pool_free(p, ids[3], HK_POOL_FREE_SUBTREE);
    hk_pool_id f = hk_pool_alloc(p, NULL);
    CHECK_EQ(hk_pool_id_index(p, f), 3);
    /* the backing allocator failing: NULL, reported, consistent */
    hc.fail_after = hc.allocs;
    hk_pool_alloc(p, NULL); /* may still succeed if a slot is free: the fast path is full now */
    hk_pool_id z = hk_pool_alloc(p, NULL);
    CHECK_EQ(z.value, 0);
    CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hc.fail_after = -1;
    hk_stats st;
    hk_pool_stats(p, &st);
    CHECK(st.live_blocks == (size_t)((N - 8) / 2 + 8));
    CHECK(st.fail_count >= 1);
    hk_pool_destroy(p);
    CHECK_EQ(hc.frees, hc.allocs); /* everything given back */
    CHECK_EQ(hc.bytes, 0);
}

HKT_TEST(pool_overflow_table_failure_injection) {
    /* fail the Nth backing allocation for N = 0, 1, ... until the overflow
     * allocation succeeds; every failure leaves the pool consistent */
    for (int n = 0; n < 8; n++) {
        hook_counts hc = {0, 0, n, 0};
        hkt_errors_reset(&g_errs);
        g_errs.quiet = 1;
        hk_pool_desc d = {0};
        d.elem_size = 24;
        d.capacity = 1;
        d.on_error = hkt_on_error;
        d.error_user = &g_errs;
        d.backing = (hk_alloc_hooks){count_alloc, count_free, &hc};
        hk_pool *p = hk_pool_create(&d);
        REQUIRE(p != NULL);
        hk_pool_alloc(p, NULL);
        hk_pool_id id = hk_pool_alloc(p, NULL);
        CHECK_EQ(hk_pool_check(p), HK_OK);
        if (id.value == 0)
            CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
        else
            CHECK(hk_pool_get(p, id) != NULL);
        hk_pool_destroy(p);
        CHECK_EQ(hc.bytes, 0);
    }
}

HKT_TEST(pool_misuse_reports) {
    hk_pool *p = mk(16, 0);
    hk_pool_id a = hk_pool_alloc(p, NULL);
    CHECK_EQ(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_OK);
    /* double free */
    CHECK_EQ(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(g_errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK_STR_CONTAINS(g_errs.last_message, "pool 'vms': double free");
    CHECK_STR_CONTAINS(g_errs.last_message, "already freed");
    CHECK_EQ(hk_pool_check(p), HK_OK);
    /* stale: the slot was reused */
    hk_pool_id b[16];
    for (int i = 0; i < 16; i++) b[i] = hk_pool_alloc(p, NULL);
    CHECK_EQ(hk_pool_id_index(p, b[15]), 0);
    CHECK_EQ(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_ERR_STALE);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    CHECK_STR_CONTAINS(g_errs.last_message, "stale ID");
    CHECK(hk_pool_get(p, b[15]) != NULL); /* untouched */
    CHECK_EQ(hk_pool_check(p), HK_OK);
    /* none ID */
    CHECK_EQ(hk_pool_free(p, (hk_pool_id){0}, HK_POOL_FREE_SUBTREE), HK_ERR_INVALID);
    CHECK_STR_CONTAINS(g_errs.last_message, "none ID");
    /* index beyond capacity */
    hk_pool_id beyond = {(1u << 14) | 100u};
    CHECK_EQ(hk_pool_free(p, beyond, HK_POOL_FREE_SUBTREE), HK_ERR_FOREIGN);
    CHECK_EQ(g_errs.last_kind, HK_EK_FOREIGN_PTR);
    CHECK_STR_CONTAINS(g_errs.last_message, "slot 100 is beyond this instance's 16 slots");
    /* generation 0 */
    CHECK_EQ(hk_pool_free(p, (hk_pool_id){5}, HK_POOL_FREE_SUBTREE), HK_ERR_FOREIGN);
    CHECK_EQ(g_errs.last_kind, HK_EK_FOREIGN_PTR);
    /* an ID from another pool */
    hk_pool *q = mk(16, 0);
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_pool_id other = hk_pool_alloc(q, NULL);
    CHECK(hk_pool_get(p, other) == NULL);
    CHECK_EQ(hk_pool_free(p, other, HK_POOL_FREE_SUBTREE), HK_ERR_FOREIGN);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(g_errs.last_kind, HK_EK_FOREIGN_PTR); /* not HK_EK_STALE: another pool's, not an old one */
    CHECK_STR_CONTAINS(g_errs.last_message, "foreign ID");
    CHECK_STR_CONTAINS(g_errs.last_message, "never issued");
    CHECK(hk_pool_get(q, other) != NULL);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    CHECK_EQ(hk_pool_check(q), HK_OK);
    hk_stats st;
    hk_pool_stats(p, &st);
    CHECK(st.error_count >= 6);
    hk_pool_destroy(q);
    hk_pool_destroy(p);
}

HKT_TEST(pool_double_free_while_pending) {
    hk_pool *p = mk(16, 0);
    hk_pool_id a = hk_pool_alloc(p, NULL);
    hk_pool_defer_begin(p);
    CHECK_EQ(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_OK);
    CHECK_EQ(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_ERR_DOUBLE_FREE);
    CHECK_STR_CONTAINS(g_errs.last_message, "release pending");
    CHECK_EQ(hk_pool_check(p), HK_OK);
    CHECK_EQ(hk_pool_defer_end(p), HK_OK);
    CHECK_EQ(hk_pool_defer_end(p), HK_ERR_STATE);
    CHECK_EQ(g_errs.last_kind, HK_EK_STATE);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_check_reports_damage) {
    /* caller memory lets the test reach the tables: damage the lookup
     * entry of a live object and check must name it */
    static uint32_t mem[16384];
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = 16;
    d.capacity = 32;
    d.memory = mem;
    d.size = sizeof mem;
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    REQUIRE(hk_pool_memory_size(&d) <= sizeof mem);
    hk_pool *p = hk_pool_create(&d);
    REQUIRE(p != NULL);
    hk_pool_alloc(p, NULL);
    hk_pool_id b = hk_pool_alloc(p, NULL);
    size_t i = 0;
    while (i < sizeof mem / 4 && mem[i] != b.value) i++; /* ids[] comes first */
    REQUIRE(i < sizeof mem / 4);
    /* ids[] is the only record of a fast slot's generation, so the damage
     * check can see is to the index bits */
    mem[i] ^= 0x2u;
    CHECK_EQ(hk_pool_check(p), HK_ERR_CORRUPT);
    CHECK_EQ(g_errs.last_result, HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "slot 1");
    mem[i] ^= 0x2u;
    CHECK_EQ(hk_pool_check(p), HK_OK);
    /* the free ring follows ids[]: queue a free slot twice */
    uint32_t *ring = &mem[i + 31];
    while (ring < mem + 16384 && *ring != 2u) ring++; /* the entry naming slot 2, next to pop */
    REQUIRE(ring < mem + 16384);
    uint32_t saved = ring[1]; /* the entry after it names slot 2 too */
    ring[1] = 2u;
    CHECK_EQ(hk_pool_check(p), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "on the free ring twice");
    ring[1] = saved;
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* ---- introspection ------------------------------------------------------------- */

typedef struct walk_sum {
    int used, free_, ovf, n;
    uint32_t ids[64];
} walk_sum;

static int walk_fn(const hk_block_info *b, void *u) {
    walk_sum *w = (walk_sum *)u;
    if (b->flags & HK_BLOCK_USED) {
        w->used++;
        if (w->n < 64) w->ids[w->n++] = b->id;
        CHECK(b->id != 0);
    } else {
        w->free_++;
    }
    if (b->flags & HK_BLOCK_OVERFLOW) w->ovf++;
    CHECK_EQ(b->size, sizeof(obj));
    return 0;
}
static int walk_stop(const hk_block_info *b, void *u) {
    (void)b;
    (void)u;
    return 7;
}

HKT_TEST(pool_stats_walk_where) {
    hk_pool *p = mk(8, 0);
    hk_pool_id ids[12];
    void *ptr[12];
    for (int i = 0; i < 12; i++) ids[i] = hk_pool_alloc(p, &ptr[i]);
    hk_pool_free(p, ids[1], HK_POOL_FREE_SUBTREE);
    hk_stats st;
    CHECK_EQ(hk_pool_stats(p, &st), HK_OK);
    CHECK_EQ(st.live_blocks, 11);
    CHECK_EQ(st.used, 11 * sizeof(obj));
    CHECK_EQ(st.free_blocks, 1);
    CHECK_EQ(st.free, sizeof(obj));
    CHECK_EQ(st.alloc_count, 12);
    CHECK_EQ(st.free_count, 1);
    CHECK_EQ(st.peak_used, 12 * sizeof(obj));
    CHECK(st.overhead > 0);
    CHECK(st.capacity >= 12 * sizeof(obj));
    walk_sum w;
    memset(&w, 0, sizeof w);
    CHECK_EQ(hk_pool_walk(p, walk_fn, &w), 0);
    CHECK_EQ(w.used, 11);
    CHECK_EQ(w.free_, 1);
    CHECK_EQ(w.ovf, 4);
    CHECK_EQ(w.ids[0], ids[0].value);
    CHECK_EQ(hk_pool_walk(p, walk_stop, NULL), 7);
    hk_block_info bi;
    CHECK_EQ(hk_pool_where(p, (char *)ptr[2] + 5, &bi), HK_OK);
    CHECK(bi.address == ptr[2]);
    CHECK_EQ(bi.id, ids[2].value);
    CHECK(bi.flags & HK_BLOCK_USED);
    CHECK(strcmp(bi.name, "vms") == 0);
    CHECK_EQ(hk_pool_where(p, ptr[1], &bi), HK_OK); /* a free slot */
    CHECK(!(bi.flags & HK_BLOCK_USED));
    CHECK_EQ(hk_pool_where(p, &bi, &bi), HK_ERR_FOREIGN);
    CHECK_EQ(hk_pool_where(p, NULL, &bi), HK_ERR_FOREIGN);
    CHECK_EQ(hk_pool_stats(NULL, &st), HK_ERR_INVALID);
    CHECK_EQ(hk_pool_check(NULL), HK_ERR_INVALID);
    hk_pool_destroy(p);
}

static int lock_visit(hk_pool *p, hk_pool_id id, void *o, void *u) {
    (void)o;
    (void)u;
    hk_pool_free(p, id, HK_POOL_FREE_SUBTREE); /* re-enters: recursive lock */
    return 0;
}

HKT_TEST(pool_lock_hooks_balanced) {
    hk_pool_desc d = {0};
    d.elem_size = 32;
    d.capacity = 4;
    d.lock.lock = hkt_lock;
    d.lock.unlock = hkt_unlock;
    d.flags = HK_FLAG_PARANOID;
    hk_pool *p = hk_pool_create(&d);
    hk_pool_list l = hk_pool_list_create(p, 0, "l");
    for (int i = 0; i < 6; i++) hk_pool_list_push_back(p, l, hk_pool_alloc(p, NULL));
    hk_pool_id x = hk_pool_list_first(p, l);
    CHECK(hk_pool_get(p, x) != NULL);
    hk_pool_list_each(p, l, lock_visit, NULL);
    CHECK_EQ(hkt_lock_depth, 0);
    CHECK(hkt_lock_calls > 20);
    CHECK_EQ(hkt_lock_max, 2);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
    CHECK_EQ(hkt_lock_depth, 0);
}

static int noop_visit(hk_pool *p, hk_pool_id id, void *o, void *user) {
    (void)p;
    (void)id;
    (void)o;
    (void)user;
    return 0;
}

HKT_TEST(pool_paranoid_and_null_args) {
    hk_pool *p = mk(4, HK_FLAG_PARANOID | HK_FLAG_FILL);
    hk_pool_list l = hk_pool_list_create(p, 1, "l");
    hk_pool_id r = hk_pool_alloc(p, NULL);
    for (int i = 0; i < 8; i++) hk_pool_list_push_front(p, l, hk_pool_alloc_child(p, r, NULL));
    hk_pool_free(p, r, HK_POOL_FREE_SUBTREE);
    CHECK_EQ(g_errs.count, 0); /* no check failure was reported along the way */
    CHECK_EQ(hk_pool_list_count(p, l), 0);
    hk_pool_destroy(p);
    void *o = (void *)1;
    CHECK_EQ(hk_pool_alloc(NULL, &o).value, 0);
    CHECK(o == NULL);
    CHECK_EQ(hk_pool_free(NULL, r, HK_POOL_FREE_SUBTREE), HK_ERR_INVALID);
    CHECK_EQ(hk_pool_list_count(NULL, l), 0);
    CHECK_EQ(hk_pool_list_each(NULL, l, noop_visit, NULL), -1);
    CHECK_EQ(hk_pool_memory_size(NULL), 0);
}

/* ---- inline fast paths ------------------------------------------------------ */

HKT_TEST(pool_inline_paths_null_and_misses) {
    hk_pool_id some = {0x12345u};
    CHECK(hk_pool_get(NULL, some) == NULL);
    CHECK(!hk_pool_is_alive(NULL, some));
    hk_pool *p = mk(4, 0);
    obj *o;
    hk_pool_id a = hk_pool_alloc(p, (void **)&o);
    CHECK(hk_pool_get(p, a) == o);
    CHECK(hk_pool_get(p, (hk_pool_id){0}) == NULL);
    CHECK(hk_pool_get(p, (hk_pool_id){(a.value & ~0x3FFFu) | 5u}) == NULL); /* slot beyond capacity */
    CHECK(hk_pool_get(p, (hk_pool_id){0x3FFFu}) == NULL);                   /* overflow mark, key 0 */
    CHECK(hk_pool_get(p, (hk_pool_id){a.value + (1u << 14)}) == NULL);      /* next generation */
    CHECK_EQ(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_OK);
    CHECK(hk_pool_get(p, a) == NULL);
    CHECK_EQ(g_errs.count, 0);
    hk_pool_destroy(p);
}

/* Objects that were on a list or in a tree, and left it, free on the inline
 * path again; objects freed inside a scope are deferred; counters and the
 * peak stay exact across both paths. */
HKT_TEST(pool_inline_and_full_paths_agree) {
    hk_pool *p = mk(8, 0);
    hk_pool_list l = hk_pool_list_create(p, 0, "l");
    hk_pool_id id[8];
    for (int i = 0; i < 6; i++) id[i] = hk_pool_alloc(p, NULL);
    CHECK_EQ(hk_pool_list_push_back(p, l, id[0]), HK_OK);
    CHECK_EQ(hk_pool_set_parent(p, id[1], id[2]), HK_OK);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    CHECK_EQ(hk_pool_list_remove(p, l, id[0]), HK_OK);
    CHECK_EQ(hk_pool_set_parent(p, id[1], (hk_pool_id){0}), HK_OK);
    CHECK_EQ(hk_pool_check(p), HK_OK); /* busy flags cleared again */
    for (int i = 0; i < 3; i++) CHECK_EQ(hk_pool_free(p, id[i], HK_POOL_FREE_SUBTREE), HK_OK);
    hk_pool_defer_begin(p);
    CHECK_EQ(hk_pool_free(p, id[3], HK_POOL_FREE_SUBTREE), HK_OK);
    CHECK(!hk_pool_is_alive(p, id[3]));
    hk_pool_info info;
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.pending, 1);
    CHECK_EQ(info.live, 2);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    CHECK_EQ(hk_pool_defer_end(p), HK_OK);
    CHECK_EQ(hk_pool_free(p, id[4], HK_POOL_FREE_SUBTREE), HK_OK); /* inline again */
    CHECK_EQ(hk_pool_free(p, id[4], HK_POOL_FREE_SUBTREE), HK_ERR_DOUBLE_FREE);
    hk_stats st;
    hk_pool_stats(p, &st);
    CHECK_EQ(st.alloc_count, 6);
    CHECK_EQ(st.free_count, 5);
    CHECK_EQ(st.live_blocks, 1);
    CHECK_EQ(st.peak_used, 6 * sizeof(obj));
    CHECK_EQ(st.free_blocks, 7);
    for (int i = 0; i < 7; i++) id[i] = hk_pool_alloc(p, NULL); /* 8 live: a new peak */
    hk_pool_stats(p, &st);
    CHECK_EQ(st.peak_used, 8 * sizeof(obj));
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* The inline alloc computes the next ID as ids[s] + 1; the generation field
 * wrapping (and the last generation, which retires or marks the slot) goes
 * to the full path. One slot, 8-bit generations, many reuses. */
HKT_TEST(pool_inline_generation_wrap_and_retire) {
    for (int wrap = 0; wrap < 2; wrap++) {
        hk_pool *p = mk_small_gen(HK_POOL_NO_OVERFLOW | (wrap ? HK_POOL_WRAP : 0u));
        REQUIRE(p != NULL);
        hk_pool_info info;
        hk_pool_get_info(p, &info);
        uint32_t uses = info.slot_uses, prev = 0, n = 0;
        for (uint32_t i = 0; i < 2 * uses + 3; i++) {
            hk_pool_id a = hk_pool_alloc(p, NULL);
            if (!a.value) break;
            n++;
            CHECK(hk_pool_id_generation(p, a) != 0);
            CHECK(a.value != prev);
            CHECK(!prev || !hk_pool_is_alive(p, (hk_pool_id){prev}));
            CHECK_EQ(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_OK);
            prev = a.value;
        }
        hk_pool_get_info(p, &info);
        if (wrap) {
            CHECK_EQ(n, 2 * uses + 3);
            CHECK_EQ(info.retired_slots, 0);
        } else {
            CHECK_EQ(n, uses * info.capacity);
            CHECK_EQ(info.retired_slots, info.capacity);
            CHECK_EQ(hk_pool_recycle(p), (long)info.capacity);
            CHECK(hk_pool_alloc(p, NULL).value != 0);
        }
        CHECK_EQ(hk_pool_check(p), HK_OK);
        hk_pool_destroy(p);
    }
}
