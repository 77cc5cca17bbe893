/* Guard heap under load: threads sharing one heap, lock hooks, a
 * randomized sequence against a shadow model, many instances at once, slot
 * reuse repainting the padding, and plain unguarded blocks. Split from
 * test_guard.c (same helpers: guard_test_util.h). */
#include "guard_test_util.h"

/* ---- threads, fork hooks ------------------------------------------------------ */

static hk_guard *guard_shared;
static void *guard_thread(void *arg) {
    uint64_t s = (uint64_t)(uintptr_t)arg;
    void *live[32] = {0};
    for (int i = 0; i < 3000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)((s >> 33) % 32);
        if (live[k] && hk_guard_free(guard_shared, live[k]) != HK_OK) return (void *)1;
        size_t n = (size_t)((s >> 40) % 300);
        live[k] = (s >> 20) & 1 ? hk_guard_alloc(guard_shared, n) : hk_guard_realloc(guard_shared, NULL, n);
        if (!live[k]) return (void *)1;
        memset(live[k], k, n);
    }
    for (int k = 0; k < 32; k++) hk_guard_free(guard_shared, live[k]);
    return NULL;
}

HKT_TEST(guard_threads) {
    guard_shared = mk((hk_guard_desc){.sample_rate = 2});
    REQUIRE(guard_shared);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, guard_thread, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        CHECK(r == NULL);
    }
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_guard_check(guard_shared), HK_OK);
    hk_stats st;
    hk_guard_stats(guard_shared, &st); /* exited threads flushed their counters */
    CHECK_EQ(st.live_blocks, 0);
    CHECK_EQ(st.used, 0);
    CHECK_EQ(st.alloc_count, st.free_count);
    hk_guard_fork_prepare(guard_shared);
    hk_guard_fork_parent(guard_shared);
    hk_guard_fork_prepare(guard_shared);
    hk_guard_fork_child(guard_shared);
    void *p = hk_guard_alloc(guard_shared, 10); /* the lock works after both */
    CHECK(p != NULL);
    hk_guard_free(guard_shared, p);
    hk_guard_destroy(guard_shared);
}

static int guard_lock_calls;
static void guard_test_lock(void *u) {
    (void)u;
    guard_lock_calls++;
}
static void guard_test_unlock(void *u) { (void)u; }

HKT_TEST(guard_lock_hooks) {
    hk_guard *g = mk((hk_guard_desc){.lock = {guard_test_lock, guard_test_unlock, NULL}});
    REQUIRE(g);
    guard_lock_calls = 0;
    hk_guard_free(g, hk_guard_alloc(g, 10));
    CHECK(guard_lock_calls >= 2);
    hk_guard_destroy(g);
}

/* ---- randomized sequence against a shadow model -------------------------------- */

typedef struct shadow {
    unsigned char *p;
    size_t n;
    unsigned char fill;
} shadow;

HKT_TEST(guard_random_vs_shadow) {
    for (int cfg = 0; cfg < 8; cfg++) {
        hk_guard_desc d = {0};
        if (cfg == 4) d.flags = HK_GUARD_DISCARD_FREED;
        /* heapkit guard's second run: freed slots reused read/write; side start
         * (cfg 7) carves from the open chunk where the kernel installs guards */
        if (cfg >= 6) d.flags = HK_GUARD_FAST_REUSE;
        if (cfg == 5) d.quarantine_bytes = 1; /* no quarantine: evicted pages reused at once */
        d.side = (hk_guard_side)(cfg % 3);
        d.align = cfg == 3 ? 1 : 0;
        d.sample_rate = cfg == 2 ? 3 : 0;
        d.quarantine_blocks = cfg == 1 ? 8 : 0;
        d.seed = (uint64_t)cfg + 1;
        hk_guard *g = mk(d);
        REQUIRE(g);
        shadow sh[64];
        memset(sh, 0, sizeof sh);
        uint64_t s = 0x1234u + (uint64_t)cfg;
        for (int step = 0; step < 1500; step++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            int k = (int)(s % 64);
            int op = (int)((s >> 8) % 4);
            size_t n = (s >> 16) % 3 == 0 ? (size_t)((s >> 20) % 9000) : (size_t)((s >> 20) % 200);
            if (sh[k].p) {
                CHECK_EQ(hk_fill_check(sh[k].p, sh[k].n, sh[k].fill), sh[k].n);
                CHECK_EQ(hk_guard_usable_size(g, sh[k].p), sh[k].n);
            }
            if (op == 0 && sh[k].p) {
                CHECK_EQ(hk_guard_free(g, sh[k].p), HK_OK);
                sh[k].p = NULL;
            } else if (op == 1 && sh[k].p) {
                unsigned char *q = hk_guard_realloc(g, sh[k].p, n);
                REQUIRE(q);
                size_t keep = n < sh[k].n ? n : sh[k].n;
                CHECK_EQ(hk_fill_check(q, keep, sh[k].fill), keep);
                memset(q, sh[k].fill, n);
                sh[k].p = q;
                sh[k].n = n;
            } else {
                if (sh[k].p) hk_guard_free(g, sh[k].p);
                size_t al = (size_t)1 << ((s >> 40) % 8);
                sh[k].p = op == 3 ? hk_guard_alloc_aligned(g, al, n) : hk_guard_alloc(g, n);
                REQUIRE(sh[k].p);
                if (op == 3) CHECK(((uintptr_t)sh[k].p & (al - 1)) == 0);
                sh[k].n = n;
                sh[k].fill = (unsigned char)(step | 1);
                memset(sh[k].p, sh[k].fill, n);
            }
            REQUIRE(hk_guard_check(g) == HK_OK);
        }
        for (int k = 0; k < 64; k++) hk_guard_free(g, sh[k].p);
        CHECK_EQ(errs.count, 0);
        hk_stats st;
        hk_guard_stats(g, &st);
        CHECK_EQ(st.live_blocks, 0);
        CHECK_EQ(hk_guard_check(g), HK_OK);
        hk_guard_destroy(g);
    }
}

HKT_TEST(guard_many_instances) {
    hk_guard *gs[10];
    int made = 0;
    for (int i = 0; i < 10; i++) {
        gs[i] = mk((hk_guard_desc){.reserve = 64 * pg()});
        if (gs[i]) made++;
    }
    CHECK_EQ(made, 10);
    void *ps[10];
    for (int i = 0; i < 10; i++) {
        ps[i] = hk_guard_alloc(gs[i], 10);
        CHECK(ps[i] != NULL);
    }
    for (int i = 0; i < 10; i++) {
        CHECK(hk_guard_owns(gs[i], ps[i]));
        CHECK(!hk_guard_owns(gs[(i + 1) % 10], ps[i]));
    }
    for (int i = 0; i < 10; i++) {
        CHECK_EQ(hk_guard_free(gs[i], ps[i]), HK_OK);
        hk_guard_destroy(gs[i]);
    }
}

/* A slot reused straight from the quarantine keeps its padding from the
 * last block (checked at that free) and only the old block is repainted:
 * the new block's padding must still be whole, its bytes fresh, and damage
 * found at a free must make the next use of the slot repaint everything. */
HKT_TEST(guard_reused_slot_padding_repainted) {
    hk_guard *g = mk((hk_guard_desc){.quarantine_blocks = 1, .side = HK_GUARD_SIDE_RANDOM, .seed = 7});
    REQUIRE(g);
    uint64_t rng = 99;
    for (int i = 0; i < 400; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        size_t n = 1 + (size_t)(rng >> 33) % 3000;
        unsigned char *p = hk_guard_alloc(g, n);
        REQUIRE(p);
        CHECK_EQ(hk_fill_check(p, n, HK_FILL_ALLOC), n);
        memset(p, 0x11, n);
        CHECK_EQ(hk_guard_check(g), HK_OK);
        if (i % 50 == 7) {
            /* damage the padding after the block (when the block does not end the page) */
            uintptr_t end = (uintptr_t)p + n;
            if (end & (pg() - 1)) {
                poke(p, (ptrdiff_t)n, 0);
                hkt_errors_reset(&errs);
                CHECK_EQ(hk_guard_free(g, p), HK_ERR_CORRUPT);
                CHECK_EQ(errs.count, 1);
                hkt_errors_reset(&errs);
                CHECK_EQ(hk_guard_check(g), HK_OK);
                continue;
            }
        }
        CHECK_EQ(hk_guard_free(g, p), HK_OK);
    }
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
}

/* HK_GUARD_PLAIN_UNGUARDED: unsampled blocks are the backing allocator's
 * own (no header), guarded ones still between guard pages; realloc across
 * the two keeps the bytes; usable size and free go to the right allocator. */
HKT_TEST(guard_plain_unguarded_blocks) {
    hk_guard *g = mk((hk_guard_desc){.sample_rate = 4, .seed = 3, .flags = HK_GUARD_PLAIN_UNGUARDED});
    REQUIRE(g);
    static unsigned char *v[2000];
    static size_t len[2000];
    size_t guarded = 0;
    for (int i = 0; i < 2000; i++) {
        len[i] = 1 + (size_t)(i * 7919) % 500;
        v[i] = hk_guard_alloc(g, len[i]);
        REQUIRE(v[i]);
        memset(v[i], i & 0xff, len[i]);
        CHECK(hk_guard_usable_size(g, v[i]) >= len[i]);
        CHECK(hk_guard_owns(g, v[i]));
        hk_block_info bi;
        if (hk_guard_where(g, v[i], &bi) == HK_OK) guarded++;
    }
    hk_guard_info gi;
    CHECK_EQ(hk_guard_get_info(g, &gi), HK_OK);
    CHECK_EQ(gi.live_guarded, guarded);
    CHECK(guarded > 200 && guarded < 1000);
    CHECK_EQ(gi.live_unguarded, 0); /* plain blocks are not counted */
    for (int i = 0; i < 2000; i++) {
        size_t n2 = len[i] * 2 + 1;
        unsigned char *q = hk_guard_realloc(g, v[i], n2);
        REQUIRE(q);
        int ok = 1;
        for (size_t k = 0; k < len[i]; k++) ok &= q[k] == (unsigned char)(i & 0xff);
        CHECK(ok);
        v[i] = q;
    }
    CHECK_EQ(hk_guard_check(g), HK_OK);
    for (int i = 0; i < 2000; i++) CHECK_EQ(hk_guard_free(g, v[i]), HK_OK);
    memset(v, 0, sizeof v);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
    /* a custom backing without usable_size cannot serve plain blocks */
    hk_guard_desc d = {0};
    d.flags = HK_GUARD_PLAIN_UNGUARDED;
    d.backing.malloc = malloc;
    d.backing.free = free;
    d.backing.realloc = realloc;
    d.backing.memalign = aligned_alloc;
    CHECK(hk_guard_create(&d) == NULL);
    d.flags = 0; /* fine without the flag */
    hk_guard *h = hk_guard_create(&d);
    CHECK(h != NULL);
    hk_guard_destroy(h);
}
