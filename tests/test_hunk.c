/* The hunk: both ends, alignment, names, temp block, stats, walk, check,
 * dump, and every bad input the header lists. Marks (nesting, foreign,
 * stale) and tenant claims: test_hunk_marks.c. */
#include "hunk_test_util.h"
#include "internal.h"

#include <pthread.h>

HKT_TEST(create_from_os_and_caller_memory) {
    hk_hunk *h = make(1 << 20, 0);
    REQUIRE(h != NULL);
    CHECK(capacity(h) >= (1 << 20));
    CHECK_EQ(low_used(h), 0);
    CHECK_EQ(high_used(h), 0);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);

    static _Alignas(16) unsigned char mem[16384];
    hk_hunk_desc d = {0};
    d.memory = mem;
    d.size = sizeof mem;
    h = hk_hunk_create(&d);
    REQUIRE(h != NULL);
    CHECK(capacity(h) < sizeof mem);
    CHECK(capacity(h) > sizeof mem - 3700); /* the control block: about 3.5 KiB (docs/hunk.md) */
    unsigned char *p = hk_hunk_alloc(h, 100, "a");
    CHECK(p >= mem && p < mem + sizeof mem);
    hk_hunk_destroy(h); /* caller memory is left alone */
    mem[0] = 1;

    CHECK(hk_hunk_create(NULL) == NULL);
    d.size = 1000; /* too small */
    CHECK(hk_hunk_create(&d) == NULL);
    hk_hunk_destroy(NULL);
}

HKT_TEST(default_size_is_64_mib) {
    hk_hunk_desc d = {0};
    hk_hunk *h = hk_hunk_create(&d);
    REQUIRE(h != NULL);
    CHECK(capacity(h) >= ((size_t)64 << 20));
    hk_hunk_destroy(h);
}

HKT_TEST(low_and_high_allocations_are_aligned_and_disjoint) {
    hk_hunk *h = make(1 << 20, 0);
    REQUIRE(h);
    unsigned char *lo[50], *hi[50];
    for (int i = 0; i < 50; i++) {
        size_t n = (size_t)(i * 37 + 1);
        lo[i] = hk_hunk_alloc(h, n, "low");
        hi[i] = hk_hunk_alloc_high(h, n, "high");
        REQUIRE(lo[i] && hi[i]);
        CHECK(((uintptr_t)lo[i] & 15) == 0);
        CHECK(((uintptr_t)hi[i] & 15) == 0);
        memset(lo[i], 0x11, n);
        memset(hi[i], 0x22, n);
    }
    for (int i = 1; i < 50; i++) {
        CHECK(lo[i] > lo[i - 1]); /* low grows up */
        CHECK(hi[i] < hi[i - 1]); /* high grows down */
    }
    CHECK(lo[49] < hi[49]);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_stats st;
    CHECK_EQ(hk_hunk_stats(h, &st), HK_OK);
    CHECK_EQ(st.live_blocks, 100);
    CHECK_EQ(st.size, sizeof(hk_stats));
    CHECK_EQ(st.version, HK_STATS_VERSION);
    size_t want = 0;
    for (int i = 0; i < 50; i++) want += 2 * (size_t)(i * 37 + 1);
    CHECK_EQ(st.used, want);
    CHECK_EQ(st.used_blocks_bytes, low_used(h) + high_used(h));
    CHECK_EQ(st.free, st.capacity - st.used_blocks_bytes);
    CHECK_EQ(g_errs.count, 0);
    hk_hunk_destroy(h);
}

HKT_TEST(zero_size_allocations_are_unique) {
    hk_hunk *h = make(1 << 16, 0);
    void *a = hk_hunk_alloc(h, 0, "z");
    void *b = hk_hunk_alloc(h, 0, "z");
    void *c = hk_hunk_alloc_high(h, 0, "z");
    CHECK(a && b && c && a != b && b != c);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

HKT_TEST(any_power_of_two_alignment) {
    hk_hunk *h = make(4 << 20, 0);
    for (size_t a = 1; a <= 65536; a <<= 1) {
        unsigned char *p = hk_hunk_alloc_aligned(h, a, 33, "al");
        unsigned char *q = hk_hunk_alloc_high_aligned(h, a, 33, "ah");
        REQUIRE(p && q);
        size_t eff = a < 16 ? 16 : a;
        CHECK(((uintptr_t)p % eff) == 0);
        CHECK(((uintptr_t)q % eff) == 0);
        memset(p, 1, 33);
        memset(q, 2, 33);
    }
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    CHECK(hk_hunk_alloc_aligned(h, 24, 8, "bad") == NULL);
    CHECK_EQ(g_errs.last_kind, HK_EK_INVALID_ARG);
    CHECK(hk_hunk_alloc_high_aligned(h, 3, 8, "bad") == NULL);
    CHECK_EQ(g_errs.last_kind, HK_EK_INVALID_ARG);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

HKT_TEST(zero_and_fill_flags) {
    hk_hunk *h = make(1 << 16, HK_FLAG_ZERO);
    hk_hunk_mark m = hk_hunk_low_mark(h);
    unsigned char *p = hk_hunk_alloc(h, 500, "z");
    memset(p, 0x77, 500);
    hk_hunk_free_to_low_mark(h, m);
    p = hk_hunk_alloc(h, 500, "z");
    CHECK_EQ(hk_fill_check(p, 500, 0), 500);
    hk_hunk_destroy(h);

    h = make(1 << 16, HK_FLAG_FILL);
    p = hk_hunk_alloc(h, 300, "f");
    CHECK_EQ(hk_fill_check(p, 300, HK_FILL_ALLOC), 300);
    hk_hunk_destroy(h);

    h = make(1 << 16, 0); /* no flag: no fill cost, contents unspecified */
    p = hk_hunk_alloc(h, 10, "n");
    CHECK(p != NULL);
    hk_hunk_destroy(h);
}

HKT_TEST(fill_flag_marks_freed_memory) {
    if (hk__asan_enabled()) return; /* freed hunk memory is poisoned under ASan */
    hk_hunk *h = make(1 << 16, HK_FLAG_FILL);
    hk_hunk_mark m = hk_hunk_low_mark(h);
    unsigned char *p = hk_hunk_alloc(h, 64, "f");
    hk_hunk_free_to_low_mark(h, m);
    CHECK_EQ(hk_fill_check(p, 64, HK_FILL_FREE), 64);
    hk_hunk_destroy(h);
}

HKT_TEST(names_are_kept_and_truncated) {
    hk_hunk *h = make(1 << 16, 0);
    void *a = hk_hunk_alloc(h, 10, "sound");
    void *b = hk_hunk_alloc(h, 10, "a-very-long-name-that-is-truncated");
    void *c = hk_hunk_alloc(h, 10, NULL);
    hk_block_info info;
    CHECK_EQ(hk_hunk_where(h, a, &info), HK_OK);
    CHECK(strcmp(info.name, "sound") == 0);
    CHECK_EQ(info.requested, 10);
    CHECK(info.address == a);
    CHECK_EQ(hk_hunk_where(h, (char *)b + 5, &info), HK_OK);
    CHECK_EQ(strlen(info.name), HK_HUNK_NAME_MAX);
    CHECK(strncmp(info.name, "a-very-long-name", HK_HUNK_NAME_MAX) == 0);
    CHECK_EQ(hk_hunk_where(h, c, &info), HK_OK);
    CHECK(strcmp(info.name, "unknown") == 0);
    int local;
    CHECK_EQ(hk_hunk_where(h, &local, &info), HK_ERR_FOREIGN);
    void *start;
    size_t sz;
    hk_hunk_free_range(h, &start, &sz);
    CHECK_EQ(hk_hunk_where(h, start, &info), HK_ERR_FOREIGN); /* free middle */
    hk_hunk_destroy(h);
}

HKT_TEST(temp_block_released_by_high_alloc_and_mark_query) {
    hk_hunk *h = make(1 << 20, 0);
    void *t = hk_hunk_alloc_temp(h, 5000);
    REQUIRE(t);
    size_t with_temp = high_used(h);
    CHECK(with_temp >= 5000);
    hk_block_info info;
    CHECK_EQ(hk_hunk_where(h, t, &info), HK_OK);
    CHECK(info.flags & HK_BLOCK_TEMP);
    CHECK(strcmp(info.name, "temp") == 0);

    /* A second temp replaces the first. */
    void *t2 = hk_hunk_alloc_temp(h, 100);
    CHECK(t2 != NULL);
    CHECK(high_used(h) < with_temp);

    /* A high allocation releases it. */
    void *hi = hk_hunk_alloc_high(h, 64, "video");
    CHECK(hi != NULL);
    hk_stats st;
    hk_hunk_stats(h, &st);
    CHECK_EQ(st.live_blocks, 1);

    /* The high-mark query releases it. */
    hk_hunk_alloc_temp(h, 100);
    hk_hunk_mark m = hk_hunk_high_mark(h);
    hk_hunk_stats(h, &st);
    CHECK_EQ(st.live_blocks, 1);
    CHECK_EQ(m.offset, high_used(h));

    /* Low allocations keep it (Quake). */
    t = hk_hunk_alloc_temp(h, 100);
    hk_hunk_alloc(h, 100, "low");
    CHECK_EQ(hk_hunk_where(h, t, &info), HK_OK);
    hk_hunk_free_temp(h);
    CHECK_EQ(hk_hunk_where(h, t, &info), HK_ERR_FOREIGN);
    hk_hunk_free_temp(h); /* no temp: no-op */
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    CHECK_EQ(g_errs.count, 0);
    hk_hunk_destroy(h);
}

HKT_TEST(low_alloc_that_does_not_fit_releases_temp) {
    hk_hunk *h = make(1 << 16, 0);
    size_t cap = capacity(h);
    void *t = hk_hunk_alloc_temp(h, cap / 2);
    REQUIRE(t);
    void *big = hk_hunk_alloc(h, cap * 2 / 3, "big");
    CHECK(big != NULL);
    CHECK_EQ(high_used(h), 0);
    CHECK_EQ(g_errs.count, 0);
    hk_hunk_destroy(h);
}

HKT_TEST(exhaustion_reports_and_returns_null) {
    hk_hunk *h = make(1 << 16, 0);
    size_t cap = capacity(h);
    hk_hunk_alloc(h, 1000, "a");
    hk_hunk_alloc_high(h, 2000, "b");
    CHECK(hk_hunk_alloc(h, cap, "toobig") == NULL);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
    CHECK_EQ(g_errs.last_result, HK_ERR_NOMEM);
    CHECK_EQ(g_errs.last_size, cap);
    char want[128];
    snprintf(want, sizeof want, "asked %zu, low %zu, high %zu, capacity %zu", cap, low_used(h), high_used(h),
             cap);
    CHECK_STR_CONTAINS(g_errs.last_message, want);
    CHECK_STR_CONTAINS(g_errs.last_message, "hunk 'test'");
    CHECK(hk_hunk_alloc_high(h, cap, "toobig") == NULL);
    CHECK(hk_hunk_alloc_temp(h, cap) == NULL);
    hk_stats st;
    hk_hunk_stats(h, &st);
    CHECK_EQ(st.fail_count, 3);
    CHECK_EQ(st.error_count, 3);
    /* Fill it exactly: allocate until failure, everything still consistent. */
    int n = 0;
    while (hk_hunk_alloc(h, 100, "fill")) n++;
    CHECK(n > 100);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_stats(h, &st);
    CHECK(st.free < 200);
    hk_hunk_destroy(h);
}

HKT_TEST(sizes_near_size_max_fail_cleanly) {
    hk_hunk *h = make(1 << 16, 0);
    size_t sizes[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 15, SIZE_MAX - 64, SIZE_MAX / 2 + 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        hkt_errors_reset(&g_errs);
        CHECK(hk_hunk_alloc(h, sizes[i], "huge") == NULL);
        CHECK(g_errs.last_kind == HK_EK_OVERFLOW || g_errs.last_kind == HK_EK_NOMEM);
        CHECK(hk_hunk_alloc_high(h, sizes[i], "huge") == NULL);
        CHECK(g_errs.last_kind == HK_EK_OVERFLOW || g_errs.last_kind == HK_EK_NOMEM);
        CHECK(hk_hunk_alloc_aligned(h, 4096, sizes[i], "huge") == NULL);
        CHECK(hk_hunk_alloc_high_aligned(h, 4096, sizes[i], "huge") == NULL);
        CHECK(hk_hunk_alloc_temp(h, sizes[i]) == NULL);
    }
    CHECK_EQ(low_used(h), 0);
    CHECK_EQ(high_used(h), 0);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* Damage tests write outside user bytes on purpose: ASan would stop them. */
HKT_TEST(check_reports_damaged_canary_by_name) {
    if (hk__asan_enabled()) return;
    hk_hunk *h = make(1 << 16, HK_FLAG_CANARY);
    hk_hunk_alloc(h, 10, "fine");
    unsigned char *p = unbounded(hk_hunk_alloc(h, 20, "overrun"));
    hk_hunk_alloc(h, 10, "after");
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    p[20] = 0; /* one byte past the end */
    CHECK_EQ(hk_hunk_check(h), HK_ERR_CORRUPT);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_CANARY);
    CHECK_STR_CONTAINS(g_errs.last_message, "'overrun'");
    char addr[32];
    snprintf(addr, sizeof addr, "%p", (void *)p);
    CHECK_STR_CONTAINS(g_errs.last_message, addr);
    p[20] = HK_FILL_PAD; /* repaired */
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

HKT_TEST(check_reports_damaged_sentinel) {
    if (hk__asan_enabled()) return;
    hk_hunk *h = make(1 << 16, HK_FLAG_CANARY); /* the high-end overrun below stays inside the canary */
    unsigned char *a = unbounded(hk_hunk_alloc(h, 16, "victim"));
    unsigned char saved[4];
    memcpy(saved, a - 16, 4);
    memset(a - 16, 0, 4); /* header sentinel */
    CHECK_EQ(hk_hunk_check(h), HK_ERR_CORRUPT);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_HEADER);
    CHECK_STR_CONTAINS(g_errs.last_message, "sentinel");
    memcpy(a - 16, saved, 4);
    CHECK_EQ(hk_hunk_check(h), HK_OK);

    /* High end: an overrun that reaches the tail of the block. */
    unsigned char *b = unbounded(hk_hunk_alloc_high(h, 16, "hvictim"));
    hkt_errors_reset(&g_errs);
    memset(b + 16, 0x41, 40); /* canary and tail */
    CHECK_EQ(hk_hunk_check(h), HK_ERR_CORRUPT);
    CHECK(g_errs.last_kind == HK_EK_CORRUPT_HEADER || g_errs.last_kind == HK_EK_CORRUPT_CANARY);
    /* walk and print stop at damage without crashing */
    hk_hunk_dump(h, hk_print_file, stdout);
    hk_hunk_destroy(h);
}

typedef struct walk_acc {
    int n, low, high;
    size_t bytes;
    int stop_at;
} walk_acc;

static int walk_cb(const hk_block_info *bi, void *u) {
    walk_acc *a = (walk_acc *)u;
    a->n++;
    if (bi->flags & HK_BLOCK_HIGH)
        a->high++;
    else
        a->low++;
    a->bytes += bi->requested;
    return (a->stop_at && a->n == a->stop_at) ? 42 : 0;
}

HKT_TEST(walk_visits_every_block) {
    hk_hunk *h = make(1 << 18, 0);
    for (int i = 0; i < 7; i++) hk_hunk_alloc(h, 100, "l");
    for (int i = 0; i < 5; i++) hk_hunk_alloc_high(h, 50, "h");
    walk_acc a = {0};
    CHECK_EQ(hk_hunk_walk(h, walk_cb, &a), 0);
    CHECK_EQ(a.n, 12);
    CHECK_EQ(a.low, 7);
    CHECK_EQ(a.high, 5);
    CHECK_EQ(a.bytes, 950);
    walk_acc b = {0, 0, 0, 0, 3};
    CHECK_EQ(hk_hunk_walk(h, walk_cb, &b), 42);
    CHECK_EQ(b.n, 3);
    CHECK_EQ(hk_hunk_walk(h, NULL, NULL), -1);
    hk_hunk_destroy(h);
}

HKT_TEST(print_totals_per_name) {
    hk_hunk *h = make(1 << 18, 0);
    for (int i = 0; i < 3; i++) hk_hunk_alloc(h, 100, "models");
    hk_hunk_alloc(h, 7, "sounds");
    hk_hunk_alloc_high(h, 64, "video");
    hk_hunk_alloc_temp(h, 10);
    FILE *f = tmpfile();
    REQUIRE(f);
    hk_hunk_dump(h, hk_print_file, f);
    rewind(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    CHECK_STR_CONTAINS(buf, "hunk 'test'");
    CHECK_STR_CONTAINS(buf, "temp block active");
    CHECK_STR_CONTAINS(buf, "models                3 blocks          300 bytes");
    CHECK_STR_CONTAINS(buf, "sounds                1 blocks            7 bytes");
    CHECK_STR_CONTAINS(buf, "(temp)");
    CHECK_STR_CONTAINS(buf, "(all)                 6 blocks          381 bytes");
    hk_hunk_destroy(h);
}

HKT_TEST(reset_frees_both_ends) {
    hk_hunk *h = make(1 << 16, 0);
    hk_hunk_alloc(h, 100, "a");
    hk_hunk_alloc_high(h, 100, "b");
    hk_hunk_alloc_temp(h, 100);
    hk_hunk_reset(h);
    CHECK_EQ(low_used(h), 0);
    CHECK_EQ(high_used(h), 0);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    CHECK(hk_hunk_alloc_high(h, 10, "c") != NULL);
    hk_hunk_destroy(h);
}

HKT_TEST(paranoid_mode_reports_damage_at_next_call) {
    if (hk__asan_enabled()) return;
    hk_hunk *h = make(1 << 16, HK_FLAG_PARANOID | HK_FLAG_CANARY);
    unsigned char *p = unbounded(hk_hunk_alloc(h, 8, "p"));
    CHECK_EQ(g_errs.count, 0);
    p[8] = 0;
    hk_hunk_alloc(h, 8, "q");
    CHECK(g_errs.count >= 1);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_CANARY);
    hk_hunk_destroy(h);
}

HKT_TEST(null_instance_is_harmless) {
    CHECK(hk_hunk_alloc(NULL, 1, "x") == NULL);
    CHECK(hk_hunk_alloc_high(NULL, 1, "x") == NULL);
    CHECK(hk_hunk_alloc_temp(NULL, 1) == NULL);
    CHECK_EQ(hk_hunk_check(NULL), HK_ERR_INVALID);
    hk_stats st;
    CHECK_EQ(hk_hunk_stats(NULL, &st), HK_ERR_INVALID);
    hk_hunk_free_temp(NULL);
    hk_hunk_reset(NULL);
    hk_hunk_info info;
    CHECK_EQ(hk_hunk_get_info(NULL, &info), HK_ERR_INVALID);
    hk_hunk_dump(NULL, NULL, NULL);
}

/* Lock hooks make one hunk usable from several threads. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_lock_calls;
static void mu_lock(void *u) {
    (void)u;
    pthread_mutex_lock(&g_mu);
    g_lock_calls++;
}
static void mu_unlock(void *u) {
    (void)u;
    pthread_mutex_unlock(&g_mu);
}
static void *thread_body(void *arg) {
    hk_hunk *h = (hk_hunk *)arg;
    for (int i = 0; i < 2000; i++) {
        unsigned char *p = (i & 1) ? hk_hunk_alloc(h, 24, "t") : hk_hunk_alloc_high(h, 24, "t");
        if (p) memset(p, 0x5a, 24);
    }
    return NULL;
}

HKT_TEST(lock_hooks_serialize_threads) {
    hk_hunk_desc d = {0};
    d.size = 4 << 20;
    d.lock.lock = mu_lock;
    d.lock.unlock = mu_unlock;
    hk_hunk *h = hk_hunk_create(&d);
    REQUIRE(h);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, thread_body, h);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    hk_stats st;
    hk_hunk_stats(h, &st);
    CHECK_EQ(st.live_blocks, 8000);
    CHECK(g_lock_calls >= 8000);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* Randomized operations against a model that predicts every block's size,
 * whether it fits, when the temp block goes, and what marks restore; check
 * after every step. */
typedef struct hmodel {
    size_t cap, lo_used, hi_used, lo_bytes, hi_bytes, lo_blocks, hi_blocks;
    int temp;
    size_t temp_total, temp_bytes;
} hmodel;

/* Block length: header and n rounded up to 16 (at least 16), or with
 * HK_FLAG_CANARY at least 8 canary bytes after n. */
static int g_model_canary;
static size_t model_block(size_t n) {
    if (g_model_canary) return 16 + ((n + 8 + 15) & ~(size_t)15);
    return 16 + ((n + (n == 0) + 15) & ~(size_t)15);
}

static void model_drop_temp(hmodel *m) {
    if (!m->temp) return;
    m->temp = 0;
    m->hi_used -= m->temp_total;
    m->hi_bytes -= m->temp_bytes;
    m->hi_blocks--;
}

typedef struct mmark {
    hk_hunk_mark mark;
    size_t used, bytes, blocks;
} mmark;

static void randomized_run(uint32_t flags) {
    g_model_canary = (flags & HK_FLAG_CANARY) != 0;
    hk_hunk *h = make(1 << 19, HK_FLAG_QUIET | flags);
    REQUIRE(h);
    hmodel m = {0};
    m.cap = capacity(h);
    mmark marks[64];
    int nmarks = 0;
    uint64_t s = 12345;
    for (int step = 0; step < 5000; step++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        int op = (int)(s % 10);
        size_t n = (size_t)((s >> 8) % 6000);
        size_t t = model_block(n);
        if (op < 4) {
            int fits = t <= m.cap - m.lo_used - m.hi_used;
            if (!fits && m.temp && t <= m.cap - m.lo_used - (m.hi_used - m.temp_total)) {
                model_drop_temp(&m);
                fits = 1;
            }
            unsigned char *p = hk_hunk_alloc(h, n, "r");
            CHECK_EQ(p != NULL, fits);
            if (p) {
                memset(p, 0xab, n);
                m.lo_used += t;
                m.lo_bytes += n;
                m.lo_blocks++;
            }
        } else if (op < 6 || op == 8) {
            model_drop_temp(&m);
            int fits = t <= m.cap - m.lo_used - m.hi_used;
            unsigned char *p = op == 8 ? hk_hunk_alloc_temp(h, n) : hk_hunk_alloc_high(h, n, "r");
            CHECK_EQ(p != NULL, fits);
            if (p) {
                memset(p, 0xcd, n);
                m.hi_used += t;
                m.hi_bytes += n;
                m.hi_blocks++;
                if (op == 8) {
                    m.temp = 1;
                    m.temp_total = t;
                    m.temp_bytes = n;
                }
            }
        } else if (op == 6) {
            if (nmarks < 64) {
                mmark *k = &marks[nmarks++];
                if (s & 1) {
                    k->mark = hk_hunk_low_mark(h);
                    k->used = m.lo_used, k->bytes = m.lo_bytes, k->blocks = m.lo_blocks;
                } else {
                    model_drop_temp(&m);
                    k->mark = hk_hunk_high_mark(h);
                    k->used = m.hi_used, k->bytes = m.hi_bytes, k->blocks = m.hi_blocks;
                }
                CHECK_EQ(k->mark.offset, k->used);
            }
        } else if (op == 7 && nmarks > 0) {
            /* Marks are popped LIFO, so every mark is still valid. */
            mmark *k = &marks[--nmarks];
            if (k->mark.end) {
                model_drop_temp(&m);
                CHECK_EQ(hk_hunk_free_to_high_mark(h, k->mark), HK_OK);
                m.hi_used = k->used, m.hi_bytes = k->bytes, m.hi_blocks = k->blocks;
            } else {
                CHECK_EQ(hk_hunk_free_to_low_mark(h, k->mark), HK_OK);
                m.lo_used = k->used, m.lo_bytes = k->bytes, m.lo_blocks = k->blocks;
            }
        } else if ((s & 0x3f) == 0) {
            hk_hunk_reset(h);
            memset(&m.lo_used, 0, sizeof m - sizeof m.cap);
            nmarks = 0;
        }
        REQUIRE(hk_hunk_check(h) == HK_OK);
        hk_stats st;
        hk_hunk_stats(h, &st);
        CHECK_EQ(low_used(h), m.lo_used);
        CHECK_EQ(high_used(h), m.hi_used);
        CHECK_EQ(st.used, m.lo_bytes + m.hi_bytes);
        CHECK_EQ(st.live_blocks, m.lo_blocks + m.hi_blocks);
        if (hkt_cur_failed) break;
    }
    hk_hunk_destroy(h);
}

HKT_TEST(randomized_against_model) { randomized_run(0); }
HKT_TEST(randomized_against_model_with_canary) { randomized_run(HK_FLAG_CANARY); }

HKT_TEST(reused_name_buffer_records_the_new_text) {
    /* Quake passed one global buffer (loadname) for every model: the same
     * pointer with new text must give the new name. */
    hk_hunk *h = make(1 << 16, 0);
    char buf[32];
    snprintf(buf, sizeof buf, "%s", "progs/player");
    void *a = hk_hunk_alloc(h, 8, buf);
    void *a2 = hk_hunk_alloc(h, 8, buf); /* cached pointer, same text */
    snprintf(buf, sizeof buf, "%s", "progs/ogre");
    void *b = hk_hunk_alloc(h, 8, buf);
    snprintf(buf, sizeof buf, "%s", "progs/ogre.mdl-long-name");
    void *c = hk_hunk_alloc_high(h, 8, buf);
    hk_block_info info;
    CHECK_EQ(hk_hunk_where(h, a, &info), HK_OK);
    CHECK(strcmp(info.name, "progs/player") == 0);
    CHECK_EQ(hk_hunk_where(h, a2, &info), HK_OK);
    CHECK(strcmp(info.name, "progs/player") == 0);
    CHECK_EQ(hk_hunk_where(h, b, &info), HK_OK);
    CHECK(strcmp(info.name, "progs/ogre") == 0);
    CHECK_EQ(hk_hunk_where(h, c, &info), HK_OK);
    CHECK(strcmp(info.name, "progs/ogre.mdl-l") == 0);
    hk_hunk_destroy(h);
}

HKT_TEST(name_at_the_end_of_a_page) {
    /* The fast name check reads 16 bytes at once only when they stay in the
     * name's page; a name ending right before an inaccessible page works. */
    size_t ps = hk_os_page_size();
    unsigned char *pages = hk_os_alloc(2 * ps);
    REQUIRE(pages);
    REQUIRE(hk_os_protect(pages + ps, ps, HK_PROT_NONE) == HK_OK);
    char *name = (char *)pages + ps - 4;
    memcpy(name, "abc", 4);
    hk_hunk *h = make(1 << 16, 0);
    void *a = hk_hunk_alloc(h, 8, name);
    void *b = hk_hunk_alloc(h, 8, name);
    void *c = hk_hunk_alloc_high(h, 8, name);
    hk_block_info info;
    CHECK_EQ(hk_hunk_where(h, b, &info), HK_OK);
    CHECK(strcmp(info.name, "abc") == 0);
    CHECK(a && c);
    hk_hunk_destroy(h);
    hk_os_release(pages, 2 * ps);
}

HKT_TEST(name_table_full_shows_other) {
    hk_hunk *h = make(1 << 20, 0);
    char buf[32];
    void *last = NULL;
    for (int i = 0; i < HK_HUNK_NAMES + 10; i++) {
        snprintf(buf, sizeof buf, "name%d", i);
        last = hk_hunk_alloc(h, 4, buf);
        REQUIRE(last);
    }
    hk_block_info info;
    CHECK_EQ(hk_hunk_where(h, last, &info), HK_OK);
    CHECK(strcmp(info.name, "(other)") == 0);
    void *known = hk_hunk_alloc(h, 4, "name5"); /* names already known still resolve */
    CHECK_EQ(hk_hunk_where(h, known, &info), HK_OK);
    CHECK(strcmp(info.name, "name5") == 0);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

HKT_TEST(aligned_blocks_pad_and_still_walk) {
    hk_hunk *h = make(1 << 20, 0);
    hk_hunk_alloc(h, 3, "a");
    void *p = hk_hunk_alloc_aligned(h, 4096, 100, "page");
    hk_hunk_alloc(h, 3, "b");
    void *q = hk_hunk_alloc_high_aligned(h, 4096, 100, "hpage");
    hk_hunk_alloc_high(h, 3, "c");
    REQUIRE(p && q);
    walk_acc a = {0};
    CHECK_EQ(hk_hunk_walk(h, walk_cb, &a), 0);
    CHECK_EQ(a.n, 5); /* padding is not a block */
    hk_stats st;
    hk_hunk_stats(h, &st);
    CHECK_EQ(st.live_blocks, 5);
    CHECK_EQ(st.used, 209);
    CHECK(st.overhead >= 4096); /* the padding is overhead */
    /* Marks across padding. */
    hk_hunk_mark m = hk_hunk_low_mark(h);
    hk_hunk_alloc_aligned(h, 1024, 10, "x");
    CHECK_EQ(hk_hunk_free_to_low_mark(h, m), HK_OK);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

static void one_lock(void *u) { (void)u; }

/* The instance core validates the lock hooks once: both or neither. */
HKT_TEST(half_set_lock_hooks_are_refused) {
    hkt_errors_reset(&g_errs);
    hk_hunk_desc d = {0};
    d.size = 1 << 16;
    d.name = "half";
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    d.lock.lock = one_lock;
    CHECK(hk_hunk_create(&d) == NULL);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(g_errs.last_kind, HK_EK_INVALID_ARG);
    CHECK_STR_CONTAINS(g_errs.last_message, "hunk 'half'");
    CHECK_STR_CONTAINS(g_errs.last_message, "unlock is missing");
    d.lock.lock = NULL;
    d.lock.unlock = one_lock;
    hkt_errors_reset(&g_errs);
    CHECK(hk_hunk_create(&d) == NULL);
    CHECK_EQ(g_errs.count, 1);
    CHECK_STR_CONTAINS(g_errs.last_message, "lock is missing");
}

/* Paranoid: the calls that only free or change the tenant run the check too. */
HKT_TEST(paranoid_mode_checks_free_temp_and_tenant_calls) {
    if (hk__asan_enabled()) return;
    hk_hunk *h = make(1 << 16, HK_FLAG_PARANOID | HK_FLAG_CANARY);
    unsigned char *p = unbounded(hk_hunk_alloc(h, 8, "p"));
    hk_hunk_alloc_temp(h, 32);
    p[8] = 0;
    hkt_errors_reset(&g_errs);
    hk_hunk_free_temp(h);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_CANARY);
    CHECK_EQ(hk_hunk_set_tenant(h, no_reclaim, NULL, NULL, 0), HK_OK);
    CHECK_EQ(g_errs.count, 2);
    CHECK_EQ(hk_hunk_set_tenant(h, NULL, NULL, NULL, 0), HK_OK);
    CHECK_EQ(g_errs.count, 3);
    p[8] = HK_FILL_PAD;
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

HKT_TEST(get_info_reports_both_ends_temp_and_tenant) {
    hk_hunk *h = make(1 << 16, 0);
    hk_hunk_info in;
    CHECK_EQ(hk_hunk_get_info(h, &in), HK_OK);
    CHECK(in.capacity > 60000);
    CHECK_EQ(in.low_used + in.high_used + in.temp_bytes + in.tenant_bytes, 0);
    CHECK_EQ(in.names_used, 1);
    hk_hunk_alloc(h, 100, "a");
    hk_hunk_alloc(h, 100, "b");
    hk_hunk_alloc_high(h, 10, "c");
    hk_hunk_alloc_temp(h, 1000);
    void *ms;
    size_t mn;
    hk_hunk_free_range(h, &ms, &mn);
    CHECK_EQ(hk_hunk_set_tenant(h, no_reclaim, NULL, (unsigned char *)ms + 64, 256), HK_OK);
    CHECK_EQ(hk_hunk_get_info(h, &in), HK_OK);
    CHECK_EQ(in.low_blocks, 2);
    CHECK_EQ(in.high_blocks, 2);
    CHECK_EQ(in.low_used, 2 * (16 + 112));
    CHECK_EQ(in.temp_bytes, 16 + 1008);
    CHECK_EQ(in.high_used, 16 + 16 + in.temp_bytes); /* no canary: 10 bytes round up to 16 */
    CHECK_EQ(in.tenant_bytes, 256);
    CHECK_EQ(in.names_used, 5); /* unknown, a, b, c, temp */
    CHECK_EQ(hk_hunk_get_info(h, NULL), HK_ERR_INVALID);
    hk_hunk_set_tenant(h, NULL, NULL, NULL, 0);
    hk_hunk_destroy(h);
}

typedef struct text_acc {
    char buf[8192];
    size_t len;
    int pieces;
} text_acc;

static void collect(const char *text, void *user) {
    text_acc *t = (text_acc *)user;
    size_t n = strlen(text);
    if (t->len + n < sizeof t->buf) {
        memcpy(t->buf + t->len, text, n + 1);
        t->len += n;
    }
    t->pieces++;
}

HKT_TEST(dump_writes_through_a_print_fn) {
    hk_hunk *h = make(1 << 16, 0);
    hk_hunk_alloc(h, 100, "models");
    hk_hunk_alloc_high(h, 7, "sounds");
    static text_acc t;
    memset(&t, 0, sizeof t);
    hk_hunk_dump(h, collect, &t);
    CHECK(t.pieces >= 5);
    CHECK_STR_CONTAINS(t.buf, "hunk 'test'");
    CHECK_STR_CONTAINS(t.buf, "models                1 blocks          100 bytes");
    CHECK_STR_CONTAINS(t.buf, "(all)                 2 blocks          107 bytes");
    hk_hunk_destroy(h);
}

/* ---- marks and tenant claims from a hostile caller (issue 21) ---------------------------- */
