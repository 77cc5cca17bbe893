/* tests/test_pool_frame.c - frame lists (hk_pool_flist) and their iterator
 * (hk_pool_fiter): push order, dead entries skipped (freed objects, slots
 * reused by new objects), the defer scope of an iteration, misuse (stale,
 * foreign and none IDs, double frees, bad and destroyed handles), clear,
 * destroy and growth during an iteration, early exit, nesting, overflow
 * objects, locked pools, failing backing hooks, the bounded step
 * (hk_pool_fiter_next_within), and a randomized run against a model. hk_pool_check passes after every misuse.
 */
#include "pool_test_util.h"

#include <stdlib.h>
#include <string.h>

/* n fresh objects numbered 0..n-1, pushed in order onto a new frame list. */
static hk_pool_flist filled(hk_pool *p, hk_pool_id *ids, int n) {
    hk_pool_flist fl = hk_pool_flist_create(p, 0, "fl");
    for (int i = 0; i < n; i++) {
        obj *o;
        ids[i] = hk_pool_alloc(p, (void **)&o);
        o->magic = 0x0b1ec7u;
        o->n = (uint32_t)i;
        CHECK_EQ(hk_pool_flist_push(p, fl, ids[i]), HK_OK);
    }
    return fl;
}

HKT_TEST(flist_visits_in_push_order) {
    hk_pool *p = mk(256, 0);
    hk_pool_id ids[150]; /* more than the first array's 64 entries: it grows */
    hk_pool_flist fl = filled(p, ids, 150);
    CHECK(fl.value != 0);
    CHECK_EQ(hk_pool_flist_count(p, fl), 150u);
    CHECK_EQ(hk_pool_flist_live(p, fl), 150u);
    int k = 0;
    obj *o;
    hk_pool_fiter it;
    for (it = hk_pool_fiter_begin(p, fl); (o = (obj *)hk_pool_fiter_next(&it)) != NULL; k++) {
        CHECK_EQ(o->n, (uint32_t)k);
        CHECK_EQ(it.id.value, ids[k].value);
        CHECK(it.obj == o);
        CHECK(hk_pool_get(p, it.id) == o);
        CHECK_EQ(depth_of(p), 1u); /* inside a defer scope */
    }
    CHECK_EQ(k, 150);
    CHECK_EQ(depth_of(p), 0u);
    CHECK(hk_pool_fiter_next(&it) == NULL); /* again after the end */
    /* a second push of the same object: a sequence, visited twice */
    CHECK_EQ(hk_pool_flist_push(p, fl, ids[3]), HK_OK);
    CHECK_EQ(hk_pool_flist_count(p, fl), 151u);
    k = 0;
    for (it = hk_pool_fiter_begin(p, fl); hk_pool_fiter_next(&it) != NULL;) k += it.id.value == ids[3].value;
    CHECK_EQ(k, 2);
    /* clear: O(1), empty, the room kept; an empty list visits nothing */
    CHECK_EQ(hk_pool_flist_clear(p, fl), HK_OK);
    CHECK_EQ(hk_pool_flist_count(p, fl), 0u);
    for (it = hk_pool_fiter_begin(p, fl); hk_pool_fiter_next(&it) != NULL;) k++;
    CHECK_EQ(k, 2);
    CHECK_EQ(depth_of(p), 0u);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* Freed objects' entries are skipped, also once their slot holds a new
 * object (the entry's generation is stale); frees touch no frame list. */
HKT_TEST(flist_skips_dead_and_reused_slots) {
    hk_pool *p = mk(8, HK_POOL_NO_OVERFLOW);
    hk_pool_id ids[8];
    hk_pool_flist fl = filled(p, ids, 8);
    CHECK_EQ(hk_pool_free(p, ids[1], HK_POOL_FREE_SUBTREE), HK_OK);
    CHECK_EQ(hk_pool_free(p, ids[5], HK_POOL_FREE_SUBTREE), HK_OK);
    /* the pool is full again: the two new objects sit in slots 1 and 5 */
    hk_pool_id n1 = hk_pool_alloc(p, NULL), n2 = hk_pool_alloc(p, NULL);
    REQUIRE(n1.value && n2.value);
    CHECK_EQ(hk_pool_id_index(p, n1) + hk_pool_id_index(p, n2),
             hk_pool_id_index(p, ids[1]) + hk_pool_id_index(p, ids[5]));
    CHECK_EQ(hk_pool_flist_count(p, fl), 8u);
    CHECK_EQ(hk_pool_flist_live(p, fl), 6u);
    uint32_t got[8], k = 0;
    obj *o;
    for (hk_pool_fiter it = hk_pool_fiter_begin(p, fl); (o = (obj *)hk_pool_fiter_next(&it)) != NULL;)
        got[k++] = o->n;
    static const uint32_t want[6] = {0, 2, 3, 4, 6, 7};
    CHECK_EQ(k, 6u);
    for (uint32_t i = 0; i < 6 && i < k; i++) CHECK_EQ(got[i], want[i]);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* Inside the loop a free is deferred: the object is dead at once (its later
 * entries are skipped), its memory valid and its slot unused until the loop
 * ends; a freed parent takes its children, whose entries are skipped. */
HKT_TEST(flist_free_inside_loop_is_deferred) {
    hk_pool *p = mk(32, HK_POOL_NO_OVERFLOW);
    hk_pool_flist fl = hk_pool_flist_create(p, 4, "fl");
    hk_pool_id par = hk_pool_alloc(p, NULL), kids[3], other = {0};
    CHECK_EQ(hk_pool_flist_push(p, fl, par), HK_OK);
    for (int i = 0; i < 3; i++) {
        kids[i] = hk_pool_alloc_child(p, par, NULL);
        CHECK_EQ(hk_pool_flist_push(p, fl, kids[i]), HK_OK);
    }
    other = hk_pool_alloc(p, NULL);
    CHECK_EQ(hk_pool_flist_push(p, fl, other), HK_OK);
    CHECK_EQ(hk_pool_flist_push(p, fl, par), HK_OK); /* again at the end: dead by then */
    int visited = 0;
    obj *held = NULL;
    for (hk_pool_fiter it = hk_pool_fiter_begin(p, fl); hk_pool_fiter_next(&it) != NULL;) {
        visited++;
        if (it.id.value == par.value) {
            held = (obj *)it.obj;
            held->magic = 0xfeedu;
            CHECK_EQ(hk_pool_free(p, par, HK_POOL_FREE_SUBTREE), HK_OK);
            CHECK(!hk_pool_is_alive(p, par));
            CHECK(!hk_pool_is_alive(p, kids[0]));
            /* new objects do not take the pending slots */
            void *fresh;
            hk_pool_id n = hk_pool_alloc(p, &fresh);
            CHECK(fresh != (void *)held);
            CHECK_EQ(hk_pool_free(p, n, HK_POOL_FREE_SUBTREE), HK_OK);
        } else {
            CHECK_EQ(held->magic, 0xfeedu); /* still valid memory */
        }
    }
    CHECK_EQ(visited, 2); /* par, other */
    hk_pool_info in;
    hk_pool_get_info(p, &in);
    CHECK_EQ(in.pending, 0u);
    CHECK_EQ(in.live, 1u);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* Pushing an ID that names no live object is reported and adds nothing. */
HKT_TEST(flist_push_misuse_reported) {
    hk_pool *p = mk(16, 0);
    hk_pool *q = mk(16, 0);
    hk_pool_flist fl = hk_pool_flist_create(p, 0, "fl");
    hk_pool_id a = hk_pool_alloc(p, NULL), b = hk_pool_alloc(p, NULL);
    CHECK_EQ(hk_pool_free(p, b, HK_POOL_FREE_SUBTREE), HK_OK);
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_pool_flist_push(p, fl, b), HK_ERR_STALE);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    CHECK_EQ(hk_pool_flist_push(p, fl, (hk_pool_id){0}), HK_ERR_INVALID);
    CHECK_EQ(g_errs.last_kind, HK_EK_INVALID_ARG);
    hk_pool_id theirs = hk_pool_alloc(q, NULL);
    CHECK_EQ(hk_pool_flist_push(p, fl, theirs), HK_ERR_FOREIGN);
    CHECK_EQ(g_errs.last_kind, HK_EK_FOREIGN_PTR);
    hk_pool_id beyond = {(1u << 14) | 100u}; /* slot 100 of a 16-slot pool */
    CHECK_EQ(hk_pool_flist_push(p, fl, beyond), HK_ERR_FOREIGN);
    CHECK_EQ(g_errs.count, 4);
    CHECK_EQ(hk_pool_flist_count(p, fl), 0u);
    CHECK_EQ(hk_pool_flist_push(p, fl, a), HK_OK);
    CHECK_EQ(hk_pool_flist_count(p, fl), 1u);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(q);
    hk_pool_destroy(p);
}

/* A double free inside the loop (the object pending) and after it (the
 * object released) are both reported as such; the pool stays sound. */
HKT_TEST(flist_double_free_reported) {
    hk_pool *p = mk(16, 0);
    hk_pool_id ids[4];
    hk_pool_flist fl = filled(p, ids, 4);
    int visited = 0;
    for (hk_pool_fiter it = hk_pool_fiter_begin(p, fl); hk_pool_fiter_next(&it) != NULL;) {
        visited++;
        if (it.id.value == ids[1].value) {
            CHECK_EQ(hk_pool_free(p, it.id, HK_POOL_FREE_SUBTREE), HK_OK);
            CHECK_EQ(hk_pool_free(p, it.id, HK_POOL_FREE_SUBTREE), HK_ERR_DOUBLE_FREE);
            CHECK_EQ(g_errs.last_kind, HK_EK_DOUBLE_FREE);
            CHECK_EQ(hk_pool_check(p), HK_OK);
        }
    }
    CHECK_EQ(visited, 4);
    CHECK_EQ(hk_pool_free(p, ids[1], HK_POOL_FREE_SUBTREE), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(g_errs.count, 2);
    CHECK_EQ(hk_pool_flist_live(p, fl), 3u);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* Bad handles: the none handle, a forged one, a destroyed list's (stale),
 * and a doubly-linked list's handle value; creation beyond max_lists. */
HKT_TEST(flist_bad_handles_reported) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = sizeof(obj);
    d.capacity = 16;
    d.max_lists = 2;
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    hk_pool *p = hk_pool_create(&d);
    REQUIRE(p);
    hk_pool_id a = hk_pool_alloc(p, NULL);
    CHECK_EQ(hk_pool_flist_push(p, (hk_pool_flist){0}, a), HK_ERR_INVALID);
    CHECK_EQ(hk_pool_flist_clear(p, (hk_pool_flist){0x00010009u}), HK_ERR_INVALID);   /* index 9 of 2 */
    CHECK_EQ(hk_pool_flist_push(p, (hk_pool_flist){0x00000001u}, a), HK_ERR_INVALID); /* generation 0 */
    CHECK_EQ(g_errs.count, 3);
    hk_pool_flist f1 = hk_pool_flist_create(p, 0, "one"), f2 = hk_pool_flist_create(p, 0, "two");
    CHECK(f1.value && f2.value && f1.value != f2.value);
    hk_pool_flist f3 = hk_pool_flist_create(p, 0, "three"); /* max_lists is 2 */
    CHECK_EQ(f3.value, 0u);
    CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
    CHECK_EQ(hk_pool_flist_push(p, f1, a), HK_OK);
    CHECK_EQ(hk_pool_flist_destroy(p, f1), HK_OK);
    int before = g_errs.count;
    CHECK_EQ(hk_pool_flist_push(p, f1, a), HK_ERR_STALE);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    CHECK_EQ(hk_pool_flist_clear(p, f1), HK_ERR_STALE);
    CHECK_EQ(hk_pool_flist_destroy(p, f1), HK_ERR_STALE);
    CHECK_EQ(hk_pool_flist_count(p, f1), 0u);
    hk_pool_fiter it = hk_pool_fiter_begin(p, f1);
    CHECK(hk_pool_fiter_next(&it) == NULL);
    CHECK_EQ(g_errs.count, before + 4);
    /* the slot is reused with a new handle; the old one stays stale */
    hk_pool_flist f4 = hk_pool_flist_create(p, 0, "four");
    CHECK(f4.value && f4.value != f1.value);
    CHECK_EQ(hk_pool_flist_push(p, f1, a), HK_ERR_STALE);
    CHECK_EQ(hk_pool_flist_push(p, f4, a), HK_OK);
    /* a list destroyed between begin and the first step: nothing visited */
    it = hk_pool_fiter_begin(p, f4);
    CHECK_EQ(hk_pool_flist_destroy(p, f4), HK_OK);
    CHECK(hk_pool_fiter_next(&it) == NULL);
    CHECK_EQ(depth_of(p), 0u);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    CHECK_EQ(hk_pool_flist_push(NULL, f2, a), HK_ERR_INVALID);
    hk_pool_destroy(p);
}

/* Clearing or destroying the list being iterated ends the iteration at
 * its next step; check passes meanwhile; pushes during the iteration (the
 * array growing and moving) are not visited and move nothing visited. */
HKT_TEST(flist_clear_destroy_and_growth_during_iteration) {
    hk_pool *p = mk(256, 0);
    hk_pool_id ids[10];
    hk_pool_flist fl = filled(p, ids, 10);
    int k = 0;
    for (hk_pool_fiter it = hk_pool_fiter_begin(p, fl); hk_pool_fiter_next(&it) != NULL;) {
        CHECK_EQ(it.id.value, ids[k].value);
        if (++k == 3) {
            CHECK_EQ(hk_pool_flist_clear(p, fl), HK_OK);
            CHECK_EQ(hk_pool_check(p), HK_OK);
        }
    }
    CHECK_EQ(k, 3);
    CHECK_EQ(depth_of(p), 0u);
    for (int i = 0; i < 10; i++) hk_pool_flist_push(p, fl, ids[i]);
    k = 0;
    for (hk_pool_fiter it = hk_pool_fiter_begin(p, fl); hk_pool_fiter_next(&it) != NULL;) {
        CHECK_EQ(it.id.value, ids[k].value);
        /* 200 pushes onto the list itself: it grows past 64 and 128 */
        if (k++ == 0)
            for (int j = 0; j < 200; j++) CHECK_EQ(hk_pool_flist_push(p, fl, ids[j % 10]), HK_OK);
        CHECK_EQ(hk_pool_check(p), HK_OK);
    }
    CHECK_EQ(k, 10);
    CHECK_EQ(hk_pool_flist_count(p, fl), 210u);
    k = 0;
    for (hk_pool_fiter it = hk_pool_fiter_begin(p, fl); hk_pool_fiter_next(&it) != NULL;) {
        if (++k == 2) {
            CHECK_EQ(hk_pool_flist_destroy(p, fl), HK_OK);
            CHECK_EQ(hk_pool_check(p), HK_OK);
        }
    }
    CHECK_EQ(k, 2);
    CHECK_EQ(depth_of(p), 0u);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* hk_pool_fiter_end closes the scope of a loop left early (releasing what
 * it freed); nested iterations of one list each see every entry. */
HKT_TEST(flist_early_exit_and_nesting) {
    hk_pool *p = mk(64, 0);
    hk_pool_id ids[6];
    hk_pool_flist fl = filled(p, ids, 6);
    hk_pool_fiter it;
    for (it = hk_pool_fiter_begin(p, fl); hk_pool_fiter_next(&it) != NULL;) {
        hk_pool_free(p, it.id, HK_POOL_FREE_SUBTREE);
        if (it.id.value == ids[2].value) break;
    }
    CHECK_EQ(depth_of(p), 1u);
    hk_pool_info in;
    hk_pool_get_info(p, &in);
    CHECK_EQ(in.pending, 3u);
    hk_pool_fiter_end(&it);
    hk_pool_fiter_end(&it); /* harmless again */
    CHECK_EQ(depth_of(p), 0u);
    hk_pool_get_info(p, &in);
    CHECK_EQ(in.pending, 0u);
    CHECK_EQ(in.live, 3u);
    hk_pool_fiter never = hk_pool_fiter_begin(p, fl);
    hk_pool_fiter_end(&never); /* never started */
    CHECK_EQ(depth_of(p), 0u);
    int pairs = 0;
    for (hk_pool_fiter a = hk_pool_fiter_begin(p, fl); hk_pool_fiter_next(&a) != NULL;)
        for (hk_pool_fiter b = hk_pool_fiter_begin(p, fl); hk_pool_fiter_next(&b) != NULL;) {
            pairs++;
            CHECK_EQ(depth_of(p), 2u);
        }
    CHECK_EQ(pairs, 9);
    CHECK_EQ(depth_of(p), 0u);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* Overflow objects (from the backing hooks) go through the out-of-line
 * push and step, and are skipped once freed. */
HKT_TEST(flist_overflow_members) {
    hk_pool *p = mk(4, 0);
    hk_pool_id ids[10];
    hk_pool_flist fl = filled(p, ids, 10);
    hk_pool_info in;
    hk_pool_get_info(p, &in);
    CHECK_EQ(in.overflow_live, 6u);
    CHECK_EQ(hk_pool_free(p, ids[6], HK_POOL_FREE_SUBTREE), HK_OK);
    CHECK_EQ(hk_pool_free(p, ids[2], HK_POOL_FREE_SUBTREE), HK_OK);
    uint32_t got[10], k = 0;
    obj *o;
    for (hk_pool_fiter it = hk_pool_fiter_begin(p, fl); (o = (obj *)hk_pool_fiter_next(&it)) != NULL;) {
        CHECK(hk_pool_get(p, it.id) == o);
        got[k++] = o->n;
    }
    static const uint32_t want[8] = {0, 1, 3, 4, 5, 7, 8, 9};
    CHECK_EQ(k, 8u);
    for (uint32_t i = 0; i < 8 && i < k; i++) CHECK_EQ(got[i], want[i]);
    CHECK_EQ(hk_pool_flist_live(p, fl), 8u);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* With lock hooks the push and every step go out of line and take the lock. */
HKT_TEST(flist_locked_pool_takes_the_lock) {
    hk_pool *p = mk_counting_locked(16);
    REQUIRE(p);
    hk_pool_flist fl = hk_pool_flist_create(p, 8, "fl");
    hk_pool_id ids[5];
    for (int i = 0; i < 5; i++) ids[i] = hk_pool_alloc(p, NULL);
    g_locks = 0;
    for (int i = 0; i < 5; i++) CHECK_EQ(hk_pool_flist_push(p, fl, ids[i]), HK_OK);
    CHECK_EQ(g_locks, 5);
    g_locks = 0;
    int k = 0;
    for (hk_pool_fiter it = hk_pool_fiter_begin(p, fl); hk_pool_fiter_next(&it) != NULL;) k++;
    CHECK_EQ(k, 5);
    CHECK_EQ(g_locks, 1 + 6); /* begin, then five steps and the last */
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

static int g_fail_after;
static void *fail_alloc(size_t n, void *u) {
    (void)u;
    if (g_fail_after-- <= 0) return NULL;
    return malloc(n);
}
static void plain_free(void *ptr, size_t n, void *u) {
    (void)n;
    (void)u;
    free(ptr);
}

/* The backing hooks refusing memory: create with a reserve fails (reported,
 * no list made), a push that must grow is reported and adds nothing. */
HKT_TEST(flist_growth_failure_reported) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = sizeof(obj);
    d.capacity = 256;
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    d.backing.alloc = fail_alloc;
    d.backing.free = plain_free;
    hk_pool *p = hk_pool_create(&d);
    REQUIRE(p);
    g_fail_after = 0;
    hk_pool_flist none = hk_pool_flist_create(p, 10, "refused");
    CHECK_EQ(none.value, 0u);
    CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
    g_fail_after = 1; /* the first array, not the second */
    hk_pool_flist fl = hk_pool_flist_create(p, 0, "fl");
    REQUIRE(fl.value);
    hk_pool_id a = hk_pool_alloc(p, NULL);
    int fails = 0;
    for (int i = 0; i < 64; i++) fails += hk_pool_flist_push(p, fl, a) != HK_OK;
    CHECK_EQ(fails, 0);
    int before = g_errs.count;
    CHECK_EQ(hk_pool_flist_push(p, fl, a), HK_ERR_NOMEM);
    CHECK_EQ(g_errs.count, before + 1);
    CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
    CHECK_EQ(hk_pool_flist_count(p, fl), 64u);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    g_fail_after = 1000;
    CHECK_EQ(hk_pool_flist_push(p, fl, a), HK_OK);
    CHECK_EQ(hk_pool_flist_count(p, fl), 65u);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* A damaged frame list is found by the check. */
HKT_TEST(flist_check_finds_damage) {
    hk_pool *p = mk(16, 0);
    hk_pool_id ids[3];
    hk_pool_flist fl = filled(p, ids, 3);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk__pool_hot *h = (hk__pool_hot *)p;
    hk__pool_fl *f = &h->fl[(fl.value & 0xFFFFu) - 1];
    uint32_t keep = f->ents[1];
    f->ents[1] = 200; /* slot 200 of a 16-slot pool, generation 0 */
    CHECK_EQ(hk_pool_check(p), HK_ERR_CORRUPT);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_STRUCTURE);
    f->ents[1] = keep;
    f->count = f->room + 1;
    CHECK_EQ(hk_pool_check(p), HK_ERR_CORRUPT);
    f->count = 3;
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* The storm's pattern: two tick lists in turn and layers rebuilt every
 * frame, random frees of subtrees in the tick, random refills; every
 * visit compared with a model (live objects in push order). */
HKT_TEST(flist_random_frames_match_model) {
    enum { CAP = 96, FRAMES = 300, LAYERS = 3 };
    hk_pool *p = mk(CAP, 0); /* overflow allowed: the refill may exceed the fast slots */
    hk_pool_flist tick[2], layer[LAYERS];
    for (int t = 0; t < 2; t++) tick[t] = hk_pool_flist_create(p, 0, "tick");
    for (int l = 0; l < LAYERS; l++) layer[l] = hk_pool_flist_create(p, 0, "layer");
    static uint32_t mt[2][4096], ml[LAYERS][4096];
    uint32_t nt[2] = {0, 0}, nl[LAYERS] = {0};
    uint64_t rng = 12345;
    int cur = 0;
    for (int f = 0; f < FRAMES; f++) {
        int nxt = cur ^ 1;
        hk_pool_flist_clear(p, tick[nxt]);
        nt[nxt] = 0;
        for (int l = 0; l < LAYERS; l++) {
            hk_pool_flist_clear(p, layer[l]);
            nl[l] = 0;
        }
        uint32_t mi = 0;
        obj *o;
        for (hk_pool_fiter it = hk_pool_fiter_begin(p, tick[cur]);
             (o = (obj *)hk_pool_fiter_next(&it)) != NULL;) {
            /* the model: the next entry of the model list that is alive
             * (entries die only through frees below, counted as they happen) */
            while (mi < nt[cur] && !hk_pool_is_alive(p, (hk_pool_id){mt[cur][mi]})) mi++;
            REQUIRE(mi < nt[cur]);
            CHECK_EQ(it.id.value, mt[cur][mi]);
            mi++;
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            if ((rng >> 33) % 4 == 0) {
                CHECK_EQ(hk_pool_free(p, it.id, HK_POOL_FREE_SUBTREE), HK_OK);
            } else {
                CHECK_EQ(hk_pool_flist_push(p, tick[nxt], it.id), HK_OK);
                mt[nxt][nt[nxt]++] = it.id.value;
                uint32_t l = o->n % LAYERS;
                CHECK_EQ(hk_pool_flist_push(p, layer[l], it.id), HK_OK);
                ml[l][nl[l]++] = it.id.value;
            }
        }
        cur = nxt;
        for (int l = 0; l < LAYERS; l++) {
            uint32_t j = 0;
            for (hk_pool_fiter it = hk_pool_fiter_begin(p, layer[l]); hk_pool_fiter_next(&it) != NULL;) {
                while (j < nl[l] && !hk_pool_is_alive(p, (hk_pool_id){ml[l][j]})) j++;
                REQUIRE(j < nl[l]);
                CHECK_EQ(it.id.value, ml[l][j]);
                j++;
            }
            while (j < nl[l]) CHECK(!hk_pool_is_alive(p, (hk_pool_id){ml[l][j++]}));
        }
        /* refill: families of a parent and two children */
        hk_pool_info in;
        hk_pool_get_info(p, &in);
        while (in.live + 3 <= CAP + 20) {
            obj *po;
            hk_pool_id par = hk_pool_alloc(p, (void **)&po);
            po->n = (uint32_t)(rng >> 40);
            hk_pool_flist_push(p, tick[cur], par);
            mt[cur][nt[cur]++] = par.value;
            for (int k = 0; k < 2; k++) {
                obj *ko;
                hk_pool_id kid = hk_pool_alloc_child(p, par, (void **)&ko);
                ko->n = (uint32_t)k;
                hk_pool_flist_push(p, tick[cur], kid);
                mt[cur][nt[cur]++] = kid.value;
            }
            in.live += 3;
        }
        CHECK_EQ(hk_pool_flist_count(p, tick[cur]), nt[cur]);
        if (f % 25 == 0) CHECK_EQ(hk_pool_check(p), HK_OK);
    }
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* recycle restarts retired slots' generation sequences, so an old ID can
 * name a new object again: the frame lists' dead entries are dropped
 * first, and an entry kept there never reaches the new object. */
HKT_TEST(flist_recycle_drops_dead_entries) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = sizeof(obj);
    d.capacity = 2;
    d.index_bits = 24; /* 8-bit generations: 255 uses per slot */
    d.flags = HK_POOL_NO_OVERFLOW;
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    hk_pool *p = hk_pool_create(&d);
    REQUIRE(p);
    hk_pool_flist fl = hk_pool_flist_create(p, 0, "fl");
    hk_pool_id keep = hk_pool_alloc(p, NULL);  /* slot 0, stays alive */
    hk_pool_id first = hk_pool_alloc(p, NULL); /* slot 1's first ID */
    CHECK_EQ(hk_pool_flist_push(p, fl, keep), HK_OK);
    CHECK_EQ(hk_pool_flist_push(p, fl, first), HK_OK);
    CHECK_EQ(hk_pool_free(p, first, HK_POOL_FREE_SUBTREE), HK_OK);
    for (int i = 1; i < 255; i++) { /* slot 1 issues the rest of its sequence */
        hk_pool_id id = hk_pool_alloc(p, NULL);
        REQUIRE(id.value);
        CHECK_EQ(hk_pool_free(p, id, HK_POOL_FREE_SUBTREE), HK_OK);
    }
    hk_pool_info in;
    hk_pool_get_info(p, &in);
    CHECK_EQ(in.retired_slots, 1u);
    CHECK_EQ(hk_pool_flist_count(p, fl), 2u);
    CHECK_EQ(hk_pool_recycle(p), 1);
    CHECK_EQ(hk_pool_flist_count(p, fl), 1u); /* first's entry dropped, keep's kept */
    hk_pool_id again = hk_pool_alloc(p, NULL);
    CHECK_EQ(again.value, first.value); /* the restarted sequence */
    int k = 0;
    for (hk_pool_fiter it = hk_pool_fiter_begin(p, fl); hk_pool_fiter_next(&it) != NULL; k++)
        CHECK_EQ(it.id.value, keep.value);
    CHECK_EQ(k, 1);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* hk_pool_fiter_next_within: the same objects in the same order as
 * hk_pool_fiter_next, no call looking at more entries than its budget, a
 * NULL that is not the end (a run of dead entries) leaving the iteration
 * running inside its defer scope, and the end closing it. Mixed with
 * hk_pool_fiter_next on one iteration; early exit; a clear mid-run; a
 * locked pool takes the lock per call. */
HKT_TEST(flist_next_within_bounds_each_step) {
    hk_pool *p = mk(512, 0);
    hk_pool_id ids[300];
    hk_pool_flist fl = filled(p, ids, 300);
    for (int i = 0; i < 300; i++) /* dead runs of every length up to 24 */
        if ((i % 25) < (i / 25) * 2) CHECK_EQ(hk_pool_free(p, ids[i], HK_POOL_DETACH), HK_OK);
    int want[300], nw = 0;
    obj *o;
    hk_pool_fiter it;
    for (it = hk_pool_fiter_begin(p, fl); (o = (obj *)hk_pool_fiter_next(&it)) != NULL;)
        want[nw++] = (int)o->n;
    CHECK(nw > 0 && nw < 300);
    for (uint32_t budget = 0; budget <= 9; budget += 3) {
        int k = 0, nulls = 0;
        for (it = hk_pool_fiter_begin(p, fl); !hk_pool_fiter_done(&it);) {
            uint32_t before = it.f.i;
            o = (obj *)hk_pool_fiter_next_within(&it, budget);
            if (!hk_pool_fiter_done(&it)) {
                CHECK(it.f.i - before <= (budget ? budget : 1u)); /* the bound */
                CHECK_EQ(depth_of(p), 1u);
            }
            if (!o) {
                nulls++;
                CHECK(it.obj == NULL);
                continue;
            }
            REQUIRE(k < nw);
            CHECK_EQ(o->n, (uint32_t)want[k]);
            CHECK_EQ(it.id.value, ids[want[k]].value);
            k++;
            if (k % 2) { /* mixing in the unbounded step */
                o = (obj *)hk_pool_fiter_next(&it);
                if (!o) break;
                CHECK_EQ(o->n, (uint32_t)want[k]);
                k++;
            }
        }
        CHECK_EQ(k, nw);
        CHECK(nulls >= 1); /* the end at least; with small budgets, dead runs too */
        if (budget && budget < 20) CHECK(nulls > 1);
        CHECK_EQ(depth_of(p), 0u);
        CHECK(hk_pool_fiter_next_within(&it, 4) == NULL); /* again after the end */
    }
    /* early exit after a budget ran out, and a clear mid-run */
    it = hk_pool_fiter_begin(p, fl);
    CHECK(!hk_pool_fiter_done(&it));
    while (hk_pool_fiter_next_within(&it, 1) != NULL) continue; /* stops at the first dead entry */
    CHECK(!hk_pool_fiter_done(&it));
    CHECK_EQ(depth_of(p), 1u);
    hk_pool_fiter_end(&it);
    CHECK(hk_pool_fiter_done(&it));
    CHECK_EQ(depth_of(p), 0u);
    it = hk_pool_fiter_begin(p, fl);
    CHECK(hk_pool_fiter_next_within(&it, 64) != NULL);
    CHECK_EQ(hk_pool_flist_clear(p, fl), HK_OK);
    CHECK(hk_pool_fiter_next_within(&it, 64) == NULL);
    CHECK(hk_pool_fiter_done(&it));
    CHECK_EQ(depth_of(p), 0u);
    CHECK_EQ(g_errs.count, 0);
    /* misuse inside a bounded iteration: a double free is reported, the
     * object freed inside is released at the end, check passes */
    fl = filled(p, ids, 20);
    it = hk_pool_fiter_begin(p, fl);
    o = (obj *)hk_pool_fiter_next_within(&it, 8);
    REQUIRE(o);
    hk_pool_id cur = it.id;
    CHECK_EQ(hk_pool_free(p, cur, HK_POOL_DETACH), HK_OK);
    CHECK_EQ(hk_pool_free(p, cur, HK_POOL_DETACH), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(o->magic, 0x0b1ec7u); /* deferred: still readable */
    while (!hk_pool_fiter_done(&it)) (void)hk_pool_fiter_next_within(&it, 8);
    CHECK(hk_pool_get(p, cur) == NULL);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
    /* a locked pool: one lock per bounded call */
    p = mk_counting_locked(16);
    REQUIRE(p);
    fl = hk_pool_flist_create(p, 8, "fl");
    for (int i = 0; i < 6; i++) CHECK_EQ(hk_pool_flist_push(p, fl, ids[i] = hk_pool_alloc(p, NULL)), HK_OK);
    for (int i = 0; i < 5; i++) CHECK_EQ(hk_pool_free(p, ids[i], HK_POOL_DETACH), HK_OK);
    g_locks = 0;
    int calls = 0;
    for (it = hk_pool_fiter_begin(p, fl); !hk_pool_fiter_done(&it); calls++)
        (void)hk_pool_fiter_next_within(&it, 2);
    CHECK_EQ(calls, 4); /* 2 dead, 2 dead, 1 dead + the live one, the end */
    CHECK_EQ(g_locks, 1 + calls);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}
