/*
 * tests/test_handles.c - the generational handle table (src/handles.h) on
 * its own: packing, FIFO reuse, the misuse verdicts (none, foreign, double
 * free, stale), held slots, retirement and recycling, wrapping, the inline
 * fast paths, growth with hooks and in reserved storage, external words, the check, and randomized
 * operations against a model with the check after every step.
 */
#include "hk_test.h"
#include "handles.h"

#include <stdlib.h>

/* ---- helpers ---------------------------------------------------------------- */

typedef struct counting_hooks {
    long allocs, frees, fail_after; /* fail_after < 0: never fail */
    size_t live_bytes;
} counting_hooks;

static void *ch_alloc(size_t n, void *user) {
    counting_hooks *c = (counting_hooks *)user;
    if (c->fail_after >= 0 && c->allocs >= c->fail_after) return NULL;
    c->allocs++;
    c->live_bytes += n;
    return malloc(n);
}
static void ch_free(void *p, size_t n, void *user) {
    counting_hooks *c = (counting_hooks *)user;
    c->frees++;
    c->live_bytes -= n;
    free(p);
}

static hk_result ht_new(hk__htab *t, uint32_t index_bits, uint32_t cap, uint32_t flags, uint32_t tag,
                        void *mem, size_t size) {
    hk__ht_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.index_bits = index_bits;
    cfg.cap = cap;
    cfg.flags = flags;
    cfg.tag = tag;
    cfg.memory = mem;
    cfg.size = size;
    return hk__ht_init(t, &cfg);
}

static uint32_t mem_words[1 << 16]; /* caller storage for the small tables below */

static hk__reporter test_rep(hkt_errors *errs) {
    hk__reporter r;
    hk__reporter_init(&r, "table", "t", hkt_on_error, errs, 0);
    return r;
}

/* ---- basics ----------------------------------------------------------------- */

HKT_TEST(handles_pack_find_and_fifo_reuse) {
    hk__htab t;
    REQUIRE(ht_new(&t, 8, 4, 0, 1, mem_words, sizeof mem_words) == HK_OK);
    CHECK_EQ(t.gbase, 1);
    CHECK_EQ(t.gmax, (1u << 24) - 1u);
    uint32_t h[4];
    for (int i = 0; i < 4; i++) {
        h[i] = hk__ht_alloc(&t);
        CHECK_EQ(h[i], (1u << 8) | (uint32_t)i); /* generation 1, slots in index order */
        CHECK_EQ(hk__ht_find(&t, h[i]), i);
        CHECK_EQ(hk__ht_status(&t, (uint32_t)i), HK__HT_LIVE);
    }
    CHECK_EQ(hk__ht_alloc(&t), 0); /* full */
    CHECK_EQ(hk__ht_nlive(&t), 4);
    CHECK_EQ(hk__ht_find(&t, 0), HK__HT_NONE);
    /* free 2 then 0: reused in that order (FIFO), each with the next generation */
    CHECK_EQ(hk__ht_free(&t, 2), 0);
    CHECK_EQ(hk__ht_free(&t, 0), 0);
    CHECK_EQ(hk__ht_find(&t, h[2]), HK__HT_NONE);
    CHECK_EQ(hk__ht_status(&t, 2), HK__HT_FREE);
    uint32_t a = hk__ht_alloc(&t), b = hk__ht_alloc(&t);
    CHECK_EQ(a, (2u << 8) | 2u);
    CHECK_EQ(b, (2u << 8) | 0u);
    CHECK_EQ(hk__ht_uses(&t, 2), 2);
    CHECK_EQ(hk__ht_uses(&t, 1), 1);
    CHECK_EQ(hk__ht_last_handle(&t, 2), a);
    hkt_errors errs = {0};
    hk__reporter rep = test_rep(&errs);
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
    CHECK_EQ(errs.count, 0);
}

HKT_TEST(handles_config_refused) {
    hk__htab t;
    CHECK(ht_new(&t, 0, 1, 0, 0, mem_words, sizeof mem_words) == HK_ERR_INVALID);
    CHECK(ht_new(&t, 31, 1, 0, 0, mem_words, sizeof mem_words) == HK_ERR_INVALID);
    CHECK(ht_new(&t, 4, 16, 0, 0, mem_words, sizeof mem_words) == HK_ERR_INVALID); /* cap > 15 */
    CHECK(ht_new(&t, 4, 15, 0, 0, mem_words, sizeof mem_words) == HK_OK);
    CHECK(ht_new(&t, 4, 15, 0, 0, NULL, 0) == HK_ERR_INVALID); /* no storage */
    CHECK(ht_new(&t, 4, 15, 0, 0, mem_words, hk__ht_storage_size(15, 1) - 1) == HK_ERR_INVALID);
    CHECK(ht_new(&t, 4, 15, 0, 0, (char *)mem_words + 1, sizeof mem_words - 4) == HK_ERR_INVALID);
    CHECK(ht_new(&t, 4, 15, 0, 0, mem_words, hk__ht_storage_size(15, 1)) == HK_OK);
    CHECK(hk__ht_grow(&t, 1) == HK_ERR_UNSUPPORTED); /* caller storage */
    CHECK_EQ(hk__ht_storage_size(3, 1), 4 * 4 + 3 * 4 + 3);
    CHECK_EQ(hk__ht_storage_size(3, 0), 4 * 4 + 3);
}

HKT_TEST(handles_instance_tags_differ) {
    hk__htab a, b;
    static uint32_t m2[256];
    REQUIRE(ht_new(&a, 14, 8, 0, 0, mem_words, sizeof mem_words) == HK_OK);
    REQUIRE(ht_new(&b, 14, 8, 0, 0, m2, sizeof m2) == HK_OK);
    CHECK(a.gbase != b.gbase);
    CHECK(a.gbase >= 1 && a.gbase <= a.gmax);
    /* a handle of one table is foreign in the other */
    uint32_t ha = hk__ht_alloc(&a);
    (void)hk__ht_alloc(&b);
    hk__ht_verdict v = hk__ht_judge(&b, ha, 1);
    CHECK_EQ(v.result, HK_ERR_FOREIGN);
    CHECK_EQ(v.kind, HK_EK_FOREIGN_PTR);
    CHECK_EQ(v.why, HK__HT_WHY_NEVER);
}

/* ---- misuse verdicts -------------------------------------------------------- */

HKT_TEST(handles_misuse_verdicts) {
    hk__htab t;
    REQUIRE(ht_new(&t, 8, 4, 0, 100, mem_words, sizeof mem_words) == HK_OK);
    CHECK_EQ(t.gbase, 100);
    uint32_t h = hk__ht_alloc(&t);
    CHECK_EQ(h >> 8, 100);
    hk__ht_verdict v = hk__ht_judge(&t, h, 1);
    CHECK_EQ(v.result, HK_OK);
    /* the none handle */
    v = hk__ht_judge(&t, 0, 1);
    CHECK_EQ(v.result, HK_ERR_INVALID);
    CHECK_EQ(v.kind, HK_EK_INVALID_ARG);
    /* out of range, and the reserved all-ones index */
    v = hk__ht_judge(&t, (100u << 8) | 4u, 0);
    CHECK_EQ(v.result, HK_ERR_FOREIGN);
    CHECK_EQ(v.kind, HK_EK_FOREIGN_PTR);
    CHECK_EQ(v.why, HK__HT_WHY_RANGE);
    CHECK_EQ(hk__ht_judge(&t, (100u << 8) | 255u, 0).why, HK__HT_WHY_RANGE);
    /* generation 0; a generation not issued yet; a slot that never issued */
    CHECK_EQ(hk__ht_judge(&t, 0u | 0u, 0).why, HK__HT_WHY_NONE);
    CHECK_EQ(hk__ht_judge(&t, (0u << 8) | 1u, 0).why, HK__HT_WHY_NEVER);
    CHECK_EQ(hk__ht_judge(&t, (101u << 8) | 0u, 0).why, HK__HT_WHY_NEVER);
    CHECK_EQ(hk__ht_judge(&t, (99u << 8) | 0u, 0).why, HK__HT_WHY_NEVER); /* before the sequence start */
    CHECK_EQ(hk__ht_judge(&t, (100u << 8) | 1u, 0).why, HK__HT_WHY_NEVER);
    /* free; then free again (double free) and use (stale) */
    hk__ht_free(&t, 0);
    v = hk__ht_judge(&t, h, 1);
    CHECK_EQ(v.result, HK_ERR_DOUBLE_FREE);
    CHECK_EQ(v.kind, HK_EK_DOUBLE_FREE);
    v = hk__ht_judge(&t, h, 0);
    CHECK_EQ(v.result, HK_ERR_STALE);
    CHECK_EQ(v.kind, HK_EK_STALE);
    CHECK_EQ(v.why, HK__HT_WHY_FREED);
    /* reuse the slot: the old handle is stale for a free too */
    for (int i = 0; i < 4; i++) (void)hk__ht_alloc(&t); /* slots 1, 2, 3, then 0 again */
    CHECK_EQ(hk__ht_find(&t, (101u << 8) | 0u), 0);
    v = hk__ht_judge(&t, h, 1);
    CHECK_EQ(v.result, HK_ERR_STALE);
    CHECK_EQ(v.kind, HK_EK_STALE);
    CHECK_EQ(v.why, HK__HT_WHY_STALE);
    CHECK_EQ(v.slot_gen, 101);
    /* freed again: generation 100 is now older than the last freed one */
    hk__ht_free(&t, 0);
    CHECK_EQ(hk__ht_judge(&t, h, 1).result, HK_ERR_STALE);
    CHECK_EQ(hk__ht_judge(&t, (101u << 8) | 0u, 1).result, HK_ERR_DOUBLE_FREE);
}

HKT_TEST(handles_held_slots) {
    hk__htab t;
    REQUIRE(ht_new(&t, 8, 2, 0, 1, mem_words, sizeof mem_words) == HK_OK);
    uint32_t h = hk__ht_alloc(&t);
    hk__ht_kill(&t, 0);
    CHECK_EQ(hk__ht_find(&t, h), HK__HT_NONE);
    CHECK_EQ(hk__ht_status(&t, 0), HK__HT_HELD);
    CHECK_EQ(t.nheld, 1);
    CHECK_EQ(hk__ht_nlive(&t), 0);
    hk__ht_verdict v = hk__ht_judge(&t, h, 1);
    CHECK_EQ(v.result, HK_ERR_DOUBLE_FREE);
    CHECK_EQ(v.status, HK__HT_HELD);
    /* a held slot is not reused */
    uint32_t h1 = hk__ht_alloc(&t);
    CHECK_EQ(h1 & 0xFFu, 1);
    CHECK_EQ(hk__ht_alloc(&t), 0);
    hkt_errors errs = {0};
    hk__reporter rep = test_rep(&errs);
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
    CHECK_EQ(hk__ht_release(&t, 0), 0);
    CHECK_EQ(t.nheld, 0);
    CHECK_EQ(hk__ht_alloc(&t), (2u << 8) | 0u);
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
}

HKT_TEST(handles_report_messages) {
    hk__htab t;
    REQUIRE(ht_new(&t, 8, 2, 0, 1, mem_words, sizeof mem_words) == HK_OK);
    hkt_errors errs = {0};
    errs.quiet = 1;
    hk__reporter rep = test_rep(&errs);
    uint32_t h = hk__ht_alloc(&t);
    CHECK(hk__ht_report(&t, &rep, h, 1, "free", "ID", NULL, 0, NULL) == HK_OK);
    CHECK_EQ(errs.count, 0);
    hk__ht_free(&t, 0);
    CHECK(hk__ht_report(&t, &rep, h, 1, "free", "ID", NULL, 0, NULL) == HK_ERR_DOUBLE_FREE);
    CHECK_STR_CONTAINS(errs.last_message,
                       "table 't': double free: free of ID 0x00000100: it was already freed");
    CHECK(errs.last_address == (const void *)(uintptr_t)h);
    CHECK(hk__ht_report(&t, &rep, h, 0, "get", "ID", &errs, 8, NULL) == HK_ERR_STALE);
    CHECK_STR_CONTAINS(errs.last_message, "get of stale ID 0x00000100: it was freed");
    CHECK(errs.last_address == &errs);
    CHECK(hk__ht_report(&t, &rep, 0, 1, "free", "ID", NULL, 0, NULL) == HK_ERR_INVALID);
    CHECK_STR_CONTAINS(errs.last_message, "free of the none ID (0)");
    CHECK(hk__ht_report(&t, &rep, 0x105, 1, "free", "ID", NULL, 0, NULL) == HK_ERR_FOREIGN);
    CHECK_EQ(errs.last_kind, HK_EK_FOREIGN_PTR);
    CHECK_STR_CONTAINS(errs.last_message, "slot 5 is beyond this instance's 2 slots");
    CHECK(hk__ht_report(&t, &rep, 0x701, 1, "free", "ID", NULL, 0, NULL) == HK_ERR_FOREIGN);
    CHECK_STR_CONTAINS(errs.last_message, "generation 7 was never issued for slot 1");
    (void)hk__ht_alloc(&t); /* slot 1 */
    (void)hk__ht_alloc(&t); /* slot 0, generation 2 */
    CHECK(hk__ht_report(&t, &rep, h, 1, "free", "ID", NULL, 0, NULL) == HK_ERR_STALE);
    CHECK_STR_CONTAINS(errs.last_message, "free of stale ID 0x00000100: slot 0 is at generation 2 (live)");
    CHECK_EQ(errs.count, 6);
}

/* ---- retirement, recycling, wrapping ---------------------------------------------- */

HKT_TEST(handles_retire_after_last_generation) {
    hk__htab t;
    /* index_bits 28: 15 generations per slot; tag 10: the sequence is 10..15, 1..9 */
    REQUIRE(ht_new(&t, 28, 1, 0, 10, mem_words, sizeof mem_words) == HK_OK);
    CHECK_EQ(t.gmax, 15);
    CHECK_EQ(t.gen_last, 9);
    static const uint32_t seq[15] = {10, 11, 12, 13, 14, 15, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    uint32_t first = 0, last = 0;
    for (int i = 0; i < 15; i++) {
        uint32_t h = hk__ht_alloc(&t);
        CHECK_EQ(h >> 28, seq[i]);
        CHECK_EQ(hk__ht_uses(&t, 0), (uint32_t)i + 1u);
        if (!i) first = h;
        last = h;
        CHECK_EQ(hk__ht_free(&t, 0), i == 14);
    }
    CHECK_EQ(hk__ht_status(&t, 0), HK__HT_RETIRED);
    CHECK_EQ(t.nretired, 1);
    CHECK_EQ(hk__ht_alloc(&t), 0); /* never reused */
    CHECK_EQ(hk__ht_judge(&t, last, 1).result, HK_ERR_DOUBLE_FREE);
    CHECK_EQ(hk__ht_judge(&t, first, 1).result, HK_ERR_STALE); /* every generation was issued */
    CHECK_EQ(hk__ht_judge(&t, first, 1).why, HK__HT_WHY_STALE);
    hkt_errors errs = {0};
    hk__reporter rep = test_rep(&errs);
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
    CHECK_EQ(hk__ht_recycle(&t), 1);
    CHECK_EQ(t.nretired, 0);
    CHECK_EQ(hk__ht_uses(&t, 0), 0);
    CHECK_EQ(hk__ht_judge(&t, first, 1).why, HK__HT_WHY_NEVER);
    CHECK_EQ(hk__ht_alloc(&t), first); /* the sequence restarts */
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
}

HKT_TEST(handles_retire_with_gbase_one_and_fast_paths) {
    hk__htab t;
    uint32_t fs = 0;
    REQUIRE(ht_new(&t, 28, 2, 0, 1, mem_words, sizeof mem_words) == HK_OK);
    CHECK_EQ(t.gen_last, 15);
    CHECK_EQ(t.last_dead, 0xFFFFFFFFu);
    for (int i = 0; i < 14; i++) {
        uint32_t h = hk__ht_alloc_fast(&t, &fs);
        REQUIRE(h != 0);
        uint32_t s = h & t.index_mask;
        CHECK_EQ(fs, s);
        CHECK_EQ(hk__ht_find(&t, h), s);
        CHECK(hk__ht_free_fast(&t, s, h));
    }
    /* slot 0 and 1 have issued 7 each; go on until slot 0 holds generation 15 */
    for (int i = 0; i < 2 * 8; i++) {
        uint32_t h = hk__ht_alloc_fast(&t, &fs);
        if (!h) h = hk__ht_alloc(&t);
        REQUIRE(h != 0);
        uint32_t s = h & t.index_mask;
        if ((h >> 28) == 15) {
            CHECK(!hk__ht_free_fast(&t, s, h)); /* the last generation takes the full path */
            CHECK_EQ(hk__ht_free(&t, s), 1);
        } else {
            CHECK(hk__ht_free_fast(&t, s, h));
        }
    }
    CHECK_EQ(t.nretired, 2);
    CHECK_EQ(hk__ht_alloc_fast(&t, &fs), 0);
    CHECK_EQ(hk__ht_alloc(&t), 0);
    hkt_errors errs = {0};
    hk__reporter rep = test_rep(&errs);
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
}

HKT_TEST(handles_wrap_policy) {
    hk__htab t;
    uint32_t fs = 0;
    REQUIRE(ht_new(&t, 28, 1, HK__HT_WRAP, 1, mem_words, sizeof mem_words) == HK_OK);
    uint32_t first = 0;
    for (int i = 0; i < 40; i++) {
        uint32_t h = hk__ht_alloc_fast(&t, &fs);
        if (!h) h = hk__ht_alloc(&t); /* generation 15 -> 1 is the full path's */
        REQUIRE(h != 0);
        CHECK_EQ(h >> 28, (uint32_t)(i % 15) + 1u);
        if (!i) first = h;
        if (!hk__ht_free_fast(&t, 0, h)) CHECK_EQ(hk__ht_free(&t, 0), 0);
    }
    CHECK_EQ(t.nretired, 0);
    CHECK_EQ(hk__ht_uses(&t, 0), 15);
    CHECK(t.state[0] & HK__HT_S_WRAPPED);
    /* every generation was issued: an unknown one is stale, not foreign */
    CHECK_EQ(hk__ht_judge(&t, first, 1).why, HK__HT_WHY_STALE);
    hkt_errors errs = {0};
    hk__reporter rep = test_rep(&errs);
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
    CHECK_EQ(hk__ht_recycle(&t), 0);
}

/* ---- storage ---------------------------------------------------------------------- */

HKT_TEST(handles_grow_with_hooks) {
    counting_hooks ch = {0, 0, -1, 0};
    hk_alloc_hooks hooks = {ch_alloc, ch_free, &ch};
    hk__ht_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.index_bits = 10;
    cfg.hooks = &hooks;
    hk__htab t;
    REQUIRE(hk__ht_init(&t, &cfg) == HK_OK);
    CHECK_EQ(ch.allocs, 0);
    CHECK_EQ(hk__ht_alloc(&t), 0);
    REQUIRE(hk__ht_grow(&t, 3) == HK_OK);
    uint32_t a = hk__ht_alloc(&t), b = hk__ht_alloc(&t);
    hk__ht_free(&t, a & t.index_mask); /* ring: 2, 0 */
    REQUIRE(hk__ht_grow(&t, 100) == HK_OK);
    CHECK(ch.allocs >= 2);
    CHECK_EQ(hk__ht_find(&t, b), 1);
    CHECK_EQ(hk__ht_alloc(&t) & t.index_mask, 2); /* FIFO order kept across the move */
    CHECK_EQ(hk__ht_alloc(&t) & t.index_mask, 0);
    CHECK_EQ(hk__ht_alloc(&t) & t.index_mask, 3);
    hkt_errors errs = {0};
    hk__reporter rep = test_rep(&errs);
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
    CHECK(hk__ht_grow(&t, 1023 - 103 + 1) == HK_ERR_OVERFLOW);
    ch.fail_after = ch.allocs;
    uint32_t cap = t.cap;
    hk_result r = HK_OK;
    while (r == HK_OK && t.cap < 1000) r = hk__ht_grow(&t, 64);
    CHECK(r == HK_ERR_NOMEM);
    CHECK(t.cap >= cap);
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
    ch.fail_after = -1;
    CHECK(hk__ht_grow(&t, 1023 - t.cap) == HK_OK);
    CHECK_EQ(t.cap, 1023);
    CHECK(hk__ht_grow(&t, 1) == HK_ERR_OVERFLOW);
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
    hk__ht_fini(&t);
    CHECK_EQ(ch.live_bytes, 0);
    CHECK_EQ(ch.allocs, ch.frees);
    /* init fails cleanly when the hooks do */
    counting_hooks bad = {0, 0, 0, 0};
    hk_alloc_hooks bh = {ch_alloc, ch_free, &bad};
    cfg.hooks = &bh;
    cfg.cap = 4;
    CHECK(hk__ht_init(&t, &cfg) == HK_ERR_NOMEM);
}

/* Reserved storage: growth commits pages and never moves or copies the
 * words; the free ring keeps its FIFO order when it grows past a commit;
 * an injected OS failure leaves the table unchanged; fini releases it. */
HKT_TEST(handles_grow_reserved) {
    counting_hooks ch = {0, 0, -1, 0};
    hk_alloc_hooks hooks = {ch_alloc, ch_free, &ch};
    hk__ht_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.index_bits = 20;
    cfg.hooks = &hooks;
    cfg.reserve = 1;
    hk__htab t;
    REQUIRE(hk__ht_init(&t, &cfg) == HK_OK);
    if (!(t.flags & HK__HT_RESERVED)) { /* a 32-bit host: hook storage (tested above) */
        hk__ht_fini(&t);
        return;
    }
    CHECK_EQ(t.room, 0);
    REQUIRE(hk__ht_grow(&t, 3) == HK_OK);
    CHECK_EQ(t.room, HK__HT_COMMIT_SLOTS);
    CHECK(hk__ht_grow_needs_memory(&t, HK__HT_COMMIT_SLOTS));
    CHECK(!hk__ht_grow_needs_memory(&t, 100));
    uint32_t *words = t.words;
    uint32_t a = hk__ht_alloc(&t), b = hk__ht_alloc(&t);
    hk__ht_free(&t, a & t.index_mask);                          /* ring: 2, 0 */
    REQUIRE(hk__ht_grow(&t, HK__HT_COMMIT_SLOTS * 3) == HK_OK); /* past two commits, the ring remapped */
    CHECK(t.words == words);                                    /* nothing moved */
    CHECK_EQ(t.room, HK__HT_COMMIT_SLOTS * 4);
    CHECK_EQ(ch.allocs, 0); /* the hooks are not used */
    CHECK_EQ(hk__ht_find(&t, b), 1);
    CHECK_EQ(hk__ht_alloc(&t) & t.index_mask, 2); /* FIFO order kept */
    CHECK_EQ(hk__ht_alloc(&t) & t.index_mask, 0);
    CHECK_EQ(hk__ht_alloc(&t) & t.index_mask, 3);
    hkt_errors errs = {0};
    hk__reporter rep = test_rep(&errs);
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
    /* the stale handle is still judged stale after the growth */
    CHECK_EQ(hk__ht_judge(&t, a, 0).result, HK_ERR_STALE);
    /* a commit the OS refuses: NOMEM, the table as it was */
    uint32_t cap = t.cap, room = t.room;
    hk_os_fail_after(1, false);
    CHECK(hk__ht_grow(&t, room - cap + 1) == HK_ERR_NOMEM);
    hk_os_fail_after(0, false);
    CHECK_EQ(t.cap, cap);
    CHECK_EQ(t.room, room);
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
    CHECK(hk__ht_grow(&t, room - cap + 1) == HK_OK);
    CHECK(hk__ht_grow(&t, t.index_mask - t.cap) == HK_OK); /* every slot: the whole reservation */
    CHECK_EQ(t.room, t.index_mask);
    CHECK(hk__ht_grow(&t, 1) == HK_ERR_OVERFLOW);
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
    CHECK_EQ(errs.count, 0);
    hk__ht_fini(&t);
    CHECK_EQ(ch.allocs, 0);
    /* no address space: the table falls back to the hooks */
    hk_os_fail_after(1, false);
    REQUIRE(hk__ht_init(&t, &cfg) == HK_OK);
    hk_os_fail_after(0, false);
    CHECK(!(t.flags & HK__HT_RESERVED));
    REQUIRE(hk__ht_grow(&t, 10) == HK_OK);
    CHECK(ch.allocs >= 1);
    hk__ht_fini(&t);
    CHECK_EQ(ch.live_bytes, 0);
}

typedef struct ext_entry {
    uint32_t word;
    uint32_t stamp;
    void *data;
} ext_entry;

HKT_TEST(handles_external_words) {
    static ext_entry entries[8];
    counting_hooks ch = {0, 0, -1, 0};
    hk_alloc_hooks hooks = {ch_alloc, ch_free, &ch};
    hk__ht_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.index_bits = 3;
    cfg.cap = 7;
    cfg.hooks = &hooks;
    cfg.words = &entries[0].word;
    cfg.step = sizeof(ext_entry) / sizeof(uint32_t);
    hk__htab t;
    REQUIRE(hk__ht_init(&t, &cfg) == HK_OK);
    CHECK_EQ(ch.live_bytes, hk__ht_storage_size(7, 0));
    uint32_t h = hk__ht_alloc(&t);
    CHECK_EQ(entries[0].word, h);
    CHECK_EQ(hk__ht_find(&t, h), 0);
    entries[0].data = &t;
    hk__ht_free(&t, 0);
    CHECK_EQ(entries[0].word & 7u, 7u);
    CHECK(entries[0].data == &t); /* the rest of the entry is the caller's */
    CHECK(hk__ht_grow(&t, 1) == HK_ERR_UNSUPPORTED);
    hkt_errors errs = {0};
    hk__reporter rep = test_rep(&errs);
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
    hk__ht_fini(&t);
    CHECK_EQ(ch.live_bytes, 0);
}

/* ---- check ------------------------------------------------------------------------ */

HKT_TEST(handles_check_finds_damage) {
    hk__htab t;
    hkt_errors errs = {0};
    errs.quiet = 1;
    hk__reporter rep = test_rep(&errs);
    REQUIRE(ht_new(&t, 8, 6, 0, 1, mem_words, sizeof mem_words) == HK_OK);
    uint32_t h = hk__ht_alloc(&t);
    (void)hk__ht_alloc(&t);
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
    /* a live word naming another slot */
    t.words[0] = (1u << 8) | 3u;
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, HK_EK_CORRUPT_STRUCTURE);
    CHECK_STR_CONTAINS(errs.last_message, "slot 0 holds 0x00000103");
    t.words[0] = h;
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
    /* a ring entry naming a live slot */
    uint32_t saved = t.ring[(uint32_t)t.head & t.ring_mask];
    t.ring[(uint32_t)t.head & t.ring_mask] = 1;
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(errs.last_message, "names slot 1, which is live");
    /* the same free slot twice */
    t.ring[(uint32_t)t.head & t.ring_mask] = 3;
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(errs.last_message, "twice");
    t.ring[(uint32_t)t.head & t.ring_mask] = saved;
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
    for (uint32_t i = 0; i < t.cap; i++) CHECK(!(t.state[i] & HK__HT_S_SEEN)); /* scratch restored */
    /* counts */
    t.nheld = 1;
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(errs.last_message, "held");
    t.nheld = 0;
    t.tail++;
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_ERR_CORRUPT);
    t.tail--;
    CHECK(hk__ht_check(&t, &rep, "handle") == HK_OK);
}

/* ---- randomized operations against a model ------------------------------------------ */

#define MCAP  24
#define MBITS 26 /* 63 generations per slot */

typedef struct mslot {
    int live, held, retired, wrapped;
    uint32_t cur;     /* generation issued last (0: none since init or recycle) */
    uint64_t history; /* bit g - 1: generation g issued since init or recycle */
    uint32_t uses;
} mslot;

typedef struct mtable {
    mslot s[MCAP * 4];
    uint32_t queue[MCAP * 8];
    int qh, qt; /* FIFO of free slots */
    uint32_t cap;
    uint32_t issued[20000];
    int nissued;
} mtable;

static uint64_t mrng;
static uint32_t mrand(uint32_t n) {
    mrng ^= mrng << 13;
    mrng ^= mrng >> 7;
    mrng ^= mrng << 17;
    return (uint32_t)(mrng % n);
}

/* Slot s was released (by hk__ht_release, hk__ht_free or the fast path,
 * which returned ret): it is queued, or retired, or wraps. */
static void model_released(mtable *M, uint32_t s, int ret, uint32_t flags, uint32_t gbase) {
    const uint32_t gmax = 63, gen_last = gbase == 1 ? gmax : gbase - 1u;
    mslot *m = &M->s[s];
    int last = m->cur == gen_last && !m->wrapped;
    m->held = 0;
    CHECK_EQ(ret, last && !(flags & HK__HT_WRAP));
    if (last && (flags & HK__HT_WRAP)) m->wrapped = 1;
    if (last && !(flags & HK__HT_WRAP))
        m->retired = 1;
    else
        M->queue[M->qt++ % (MCAP * 8)] = s;
}

static void model_run(uint32_t flags, uint64_t seed, int grow) {
    static mtable M;
    memset(&M, 0, sizeof M);
    mrng = seed;
    hk__htab t;
    counting_hooks ch = {0, 0, -1, 0};
    hk_alloc_hooks hooks = {ch_alloc, ch_free, &ch};
    hk__ht_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.index_bits = MBITS;
    cfg.cap = MCAP;
    cfg.flags = flags;
    cfg.tag = 1 + mrand(63);
    if (grow)
        cfg.hooks = &hooks;
    else {
        cfg.memory = mem_words;
        cfg.size = sizeof mem_words;
    }
    REQUIRE(hk__ht_init(&t, &cfg) == HK_OK);
    const uint32_t gmax = 63, gbase = t.gbase;
    uint32_t fs = 0;
    M.cap = MCAP;
    for (uint32_t i = 0; i < MCAP; i++) M.queue[M.qt++ % (MCAP * 8)] = i;
    hkt_errors errs = {0};
    hk__reporter rep = test_rep(&errs);
    for (int step = 0; step < 30000; step++) {
        uint32_t op = mrand(100);
        if (op < 40) { /* alloc */
            uint32_t h = (M.qh == M.qt) ? 0 : 0xFFFFFFFFu;
            uint32_t got = (mrand(2) ? 0 : hk__ht_alloc_fast(&t, &fs));
            if (!got) got = hk__ht_alloc(&t);
            if (h == 0) {
                CHECK_EQ(got, 0);
                continue;
            }
            uint32_t s = M.queue[M.qh++ % (MCAP * 8)];
            mslot *m = &M.s[s];
            uint32_t g = m->uses == 0 ? gbase : (m->cur == gmax ? 1u : m->cur + 1u);
            REQUIRE(got == ((g << MBITS) | s));
            m->live = 1;
            m->cur = g;
            m->history |= 1ull << (g - 1u);
            if (m->uses < gmax) m->uses++;
            if (M.nissued < 20000) M.issued[M.nissued++] = got;
        } else if (op < 70) { /* free (sometimes in two steps: kill, then release) */
            uint32_t s = mrand(M.cap);
            mslot *m = &M.s[s];
            if (m->held) {
                model_released(&M, s, hk__ht_release(&t, s), flags, gbase);
                continue;
            }
            if (!m->live) continue;
            uint32_t h = (m->cur << MBITS) | s;
            REQUIRE(hk__ht_find(&t, h) == s);
            m->live = 0;
            m->held = 1;
            if (mrand(3) == 0) {
                hk__ht_kill(&t, s);
            } else if (mrand(2) && hk__ht_free_fast(&t, s, h)) {
                model_released(&M, s, 0, flags, gbase);
            } else {
                model_released(&M, s, hk__ht_free(&t, s), flags, gbase);
            }
        } else if (op < 95) { /* judge a handle: issued once, random, or none */
            uint32_t h;
            uint32_t k = mrand(4);
            if (k == 0 && M.nissued)
                h = M.issued[mrand((uint32_t)M.nissued)];
            else if (k == 1)
                h = (mrand(gmax + 1) << MBITS) | mrand(M.cap + 3);
            else if (k == 2)
                h = mrand(16) ? (uint32_t)(mrng >> 7) : 0;
            else
                h = M.nissued ? M.issued[M.nissued - 1] : 0;
            int freeing = (int)mrand(2);
            hk__ht_verdict v = hk__ht_judge(&t, h, freeing);
            uint32_t s = h & ((1u << MBITS) - 1u), g = h >> MBITS;
            hk__ht_why want;
            if (h == 0)
                want = HK__HT_WHY_NONE;
            else if (s >= M.cap)
                want = HK__HT_WHY_RANGE;
            else if (g == 0 || !(M.s[s].history & (1ull << (g - 1u))))
                want = HK__HT_WHY_NEVER;
            else if (M.s[s].live && g == M.s[s].cur)
                want = HK__HT_WHY_OK;
            else if (g == M.s[s].cur)
                want = freeing ? HK__HT_WHY_DOUBLE_FREE : HK__HT_WHY_FREED;
            else
                want = HK__HT_WHY_STALE;
            CHECK_EQ(v.why, want);
            CHECK_EQ(hk__ht_find(&t, h) != HK__HT_NONE, want == HK__HT_WHY_OK);
        } else if (op < 97) { /* recycle */
            uint32_t n = 0;
            for (uint32_t i = 0; i < M.cap; i++) {
                mslot *m = &M.s[i];
                if (!m->retired) continue;
                memset(m, 0, sizeof *m);
                M.queue[M.qt++ % (MCAP * 8)] = i;
                n++;
            }
            CHECK_EQ(hk__ht_recycle(&t), n);
        } else if (grow && M.cap + 8 <= MCAP * 4) { /* grow */
            REQUIRE(hk__ht_grow(&t, 8) == HK_OK);
            for (uint32_t i = M.cap; i < M.cap + 8; i++) M.queue[M.qt++ % (MCAP * 8)] = i;
            M.cap += 8;
        }
        /* after every step: the check, the counts, every slot's status */
        REQUIRE(hk__ht_check(&t, &rep, "handle") == HK_OK);
        uint32_t live = 0, held = 0, retired = 0;
        for (uint32_t i = 0; i < M.cap; i++) {
            const mslot *m = &M.s[i];
            int st = m->live      ? HK__HT_LIVE
                     : m->held    ? HK__HT_HELD
                     : m->retired ? HK__HT_RETIRED
                                  : HK__HT_FREE;
            REQUIRE(hk__ht_status(&t, i) == st);
            REQUIRE(hk__ht_uses(&t, i) == m->uses);
            live += m->live != 0;
            held += m->held != 0;
            retired += m->retired != 0;
        }
        REQUIRE(hk__ht_nlive(&t) == live);
        REQUIRE(t.nheld == held);
        REQUIRE(t.nretired == retired);
        REQUIRE(hk__ht_nfree(&t) == (uint32_t)(M.qt - M.qh));
        REQUIRE(t.cap == M.cap);
    }
    CHECK_EQ(errs.count, 0);
    hk__ht_fini(&t);
    CHECK_EQ(ch.live_bytes, 0);
}

HKT_TEST(handles_random_model_retire) {
    for (uint64_t seed = 1; seed <= 4; seed++) model_run(0, seed * 0x9E3779B97F4A7C15ull, 0);
}

HKT_TEST(handles_random_model_wrap) {
    for (uint64_t seed = 1; seed <= 4; seed++) model_run(HK__HT_WRAP, seed * 0x2545F4914F6CDD1Dull, 0);
}

HKT_TEST(handles_random_model_growing) {
    for (uint64_t seed = 1; seed <= 3; seed++) model_run(0, seed * 0xD1B54A32D192ED03ull, 1);
}
