/* Zone: DOOM semantics: tags, owners, free_tags, change_tag, purge levels,
 * LRU purging on exhaustion. */
#include "heapkit/zone.h"
#include "hk_test.h"
#include "internal.h"

/* The block at p with its provenance hidden from the compiler: the zone's
 * allocators are declared HK_MALLOC / HK_ALLOC_SIZE, so a deliberate write
 * past a block's end or into its header would be flagged at compile time
 * (and by UBSan's object-size check), or dropped as a dead store. */
static unsigned char *raw(void *p) {
    __asm__ volatile("" : "+r"(p));
    return (unsigned char *)p;
}

static unsigned char g_mem[256 << 10] __attribute__((aligned(64)));

static hk_zone *mk(hkt_errors *errs, uint32_t flags) {
    return hk_zone_create(&(hk_zone_desc){.memory = g_mem,
                                          .size = sizeof g_mem,
                                          .flags = flags,
                                          .name = "tags",
                                          .on_error = hkt_on_error,
                                          .error_user = errs});
}

static size_t live(hk_zone *z) {
    hk_stats s;
    hk_zone_stats(z, &s);
    return s.live_blocks;
}

HKT_TEST(tagged_alloc_sets_owner_and_free_clears_it) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    void *owner = NULL;
    void *p = hk_zone_alloc_tagged(z, 100, HK_TAG_LEVEL, &owner, "map");
    REQUIRE(p != NULL);
    CHECK(owner == p);
    CHECK_EQ(hk_zone_tag(z, p), HK_TAG_LEVEL);
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    CHECK(owner == NULL);
    /* tracked blocks cost 64 bytes of overhead */
    hk_stats a, b;
    hk_zone_stats(z, &a);
    p = hk_zone_alloc_tagged(z, 104, HK_TAG_LEVEL, NULL, NULL);
    hk_zone_stats(z, &b);
    CHECK_EQ(b.used_blocks_bytes - a.used_blocks_bytes, 176);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(errs.count, 0);
    hk_zone_destroy(z);
}

HKT_TEST(bad_tags_are_refused) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    void *owner = NULL;
    CHECK(hk_zone_alloc_tagged(z, 10, -1, &owner, "x") == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_INVALID_ARG);
    CHECK_STR_CONTAINS(errs.last_message, "tag -1");
    CHECK(hk_zone_alloc_tagged(z, 10, 256, &owner, "x") == NULL);
    CHECK(hk_zone_alloc_tagged(z, 10, HK_TAG_CACHE, NULL, "x") == NULL); /* purgeable needs an owner */
    CHECK_STR_CONTAINS(errs.last_message, "needs an owner");
    CHECK(hk_zone_alloc_ex(z, NULL) == NULL);
    void *p = hk_zone_alloc_tagged(z, 10, 0, NULL, NULL); /* 0 means the default */
    CHECK_EQ(hk_zone_tag(z, p), HK_TAG_STATIC);
    CHECK_EQ(hk_zone_change_tag(z, p, 0), HK_ERR_INVALID);
    CHECK_EQ(hk_zone_change_tag(z, p, 300), HK_ERR_INVALID);
    CHECK_EQ(hk_zone_change_tag(z, p, HK_TAG_CACHE), HK_ERR_INVALID);
    CHECK_EQ(hk_zone_tag(z, p), HK_TAG_STATIC);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(free_tags_frees_exactly_the_range) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, HK_FLAG_FILL);
    REQUIRE(z != NULL);
    void *owners[300];
    memset(owners, 0, sizeof owners);
    int tags[] = {HK_TAG_STATIC, HK_TAG_LEVEL, HK_TAG_LEVSPEC, 60, HK_TAG_PURGELEVEL, HK_TAG_CACHE};
    for (int i = 0; i < 300; i++) {
        int t = tags[i % 6];
        void *p = hk_zone_alloc_tagged(z, (size_t)(i % 17) * 11, t, &owners[i], "blk");
        REQUIRE(p != NULL);
    }
    void *plain = hk_zone_alloc(z, 50);
    CHECK_EQ(live(z), 301);
    size_t n = hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_PURGELEVEL - 1);
    CHECK_EQ(n, 150);
    CHECK_EQ(live(z), 151);
    for (int i = 0; i < 300; i++) {
        int t = tags[i % 6];
        if (t >= HK_TAG_LEVEL && t < HK_TAG_PURGELEVEL)
            CHECK(owners[i] == NULL);
        else
            CHECK(owners[i] != NULL);
    }
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVSPEC), 0);
    CHECK_EQ(hk_zone_free_tags(z, 10, 5), 0);
    /* a range with the static tag also frees untracked blocks */
    n = hk_zone_free_tags(z, HK_TAG_STATIC, HK_TAG_STATIC);
    CHECK_EQ(n, 51);
    CHECK(!hk_zone_owns(z, plain));
    CHECK_EQ(live(z), 100);
    CHECK_EQ(hk_zone_free_tags(z, -5, 1000), 100);
    CHECK_EQ(live(z), 0);
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK_EQ(s.free_blocks, 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(errs.count, 0);
    hk_zone_destroy(z);
}

/* An owner that lives inside another block freed by the same call: all
 * owners are cleared before any block is freed, so nothing is written into
 * freed memory. */
HKT_TEST(free_tags_owner_inside_freed_block) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, HK_FLAG_FILL);
    REQUIRE(z != NULL);
    void **holder = hk_zone_alloc_tagged(z, 64, HK_TAG_LEVEL, NULL, "holder");
    REQUIRE(holder != NULL);
    void *p = hk_zone_alloc_tagged(z, 64, HK_TAG_LEVEL, &holder[0], "child");
    REQUIRE(p != NULL);
    CHECK(holder[0] == p);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL), 2);
    CHECK_EQ(hk_zone_check(z), HK_OK); /* free fill intact */
    hk_zone_destroy(z);
}

HKT_TEST(change_tag_moves_between_lists) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    void *o1 = NULL, *o2 = NULL;
    void *a = hk_zone_alloc_tagged(z, 100, HK_TAG_STATIC, &o1, "a");
    void *b = hk_zone_alloc_tagged(z, 100, HK_TAG_LEVEL, &o2, "b");
    REQUIRE(a && b);
    CHECK_EQ(hk_zone_change_tag(z, a, HK_TAG_CACHE), HK_OK);
    CHECK_EQ(hk_zone_tag(z, a), HK_TAG_CACHE);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_STATIC, HK_TAG_LEVEL), 1);
    CHECK(o2 == NULL && o1 == a);
    CHECK_EQ(hk_zone_purge(z, 0), 1);
    CHECK(o1 == NULL);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(change_tag_of_untracked_block) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, HK_FLAG_CANARY | HK_FLAG_FILL);
    REQUIRE(z != NULL);
    /* room after it: converts in place */
    unsigned char *p = hk_zone_alloc(z, 40);
    REQUIRE(p != NULL);
    memset(p, 9, 40);
    CHECK_EQ(hk_zone_change_tag(z, p, HK_TAG_LEVEL), HK_OK);
    CHECK_EQ(hk_zone_tag(z, p), HK_TAG_LEVEL);
    for (int i = 0; i < 40; i++) CHECK_EQ(p[i], 9);
    CHECK_EQ(hk_zone_usable_size(z, p), 40);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* no room: refused, unchanged */
    unsigned char *q = hk_zone_alloc(z, 40);
    void *wall = hk_zone_alloc(z, 10);
    REQUIRE(q && wall);
    CHECK_EQ(hk_zone_change_tag(z, q, HK_TAG_LEVEL), HK_ERR_NOMEM);
    CHECK_EQ(errs.last_kind, HK_EK_NOMEM);
    CHECK_EQ(hk_zone_tag(z, q), HK_TAG_STATIC);
    CHECK_EQ(hk_zone_change_tag(z, q, HK_TAG_STATIC), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL), 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
    /* with HK_ZONE_TRACK_ALL every block can change tag */
    z = mk(&errs, HK_ZONE_TRACK_ALL);
    q = hk_zone_alloc(z, 40);
    wall = hk_zone_alloc(z, 10);
    CHECK_EQ(hk_zone_change_tag(z, q, HK_TAG_LEVEL), HK_OK);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL), 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* When memory runs out, purgeable blocks go oldest first and owners are
 * cleared; non-purgeable blocks are never touched. */
HKT_TEST(exhaustion_purges_lru_first) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, HK_FLAG_FILL);
    REQUIRE(z != NULL);
    enum { N = 40 };
    void *owners[N];
    memset(owners, 0, sizeof owners);
    for (int i = 0; i < N; i++) {
        void *p =
            hk_zone_alloc_tagged(z, 4000, i % 2 ? HK_TAG_CACHE : HK_TAG_PURGELEVEL, &owners[i], "cache");
        REQUIRE(p != NULL);
    }
    void *stat = hk_zone_alloc_tagged(z, 4000, HK_TAG_LEVEL, NULL, "level");
    REQUIRE(stat != NULL);
    hk_stats s;
    hk_zone_stats(z, &s);
    size_t want = s.largest_free + 12000; /* needs about three purged blocks' room */
    void *big = hk_zone_alloc(z, want);
    REQUIRE(big != NULL);
    int purged = 0, first_kept = -1;
    for (int i = 0; i < N; i++) {
        if (!owners[i])
            purged++;
        else if (first_kept < 0)
            first_kept = i;
    }
    CHECK(purged >= 3);
    CHECK_EQ(first_kept, purged); /* exactly the oldest ones went */
    CHECK(hk_zone_owns(z, stat));
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(errs.count, 0);
    /* nothing purgeable left and still too big: fails, reports the size */
    CHECK(hk_zone_alloc(z, sizeof g_mem) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_NOMEM);
    CHECK_EQ(errs.last_size, sizeof g_mem);
    for (int i = 0; i < N; i++) CHECK(owners[i] == NULL);
    CHECK(hk_zone_owns(z, stat));
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(purge_level_and_custom_threshold) {
    hkt_errors errs = {0};
    hk_zone *z = hk_zone_create(&(hk_zone_desc){.memory = g_mem,
                                                .size = sizeof g_mem,
                                                .purge_level = 10,
                                                .on_error = hkt_on_error,
                                                .error_user = &errs});
    REQUIRE(z != NULL);
    void *o[4] = {0, 0, 0, 0};
    hk_zone_alloc_tagged(z, 10, 9, &o[0], NULL);
    hk_zone_alloc_tagged(z, 10, 10, &o[1], NULL);
    hk_zone_alloc_tagged(z, 10, 20, &o[2], NULL);
    hk_zone_alloc_tagged(z, 10, 30, &o[3], NULL);
    CHECK_EQ(hk_zone_purge(z, 20), 2);
    CHECK(o[0] && o[1] && !o[2] && !o[3]);
    CHECK_EQ(hk_zone_purge(z, 1), 1); /* below the threshold means the threshold */
    CHECK(o[0] && !o[1]);
    hk_block_info info;
    CHECK_EQ(hk_zone_where(z, o[0], &info), HK_OK);
    CHECK(!(info.flags & HK_BLOCK_PURGEABLE));
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(realloc_keeps_tag_owner_name) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    void *owner = NULL;
    void *p = hk_zone_alloc_tagged(z, 100, HK_TAG_CACHE, &owner, "snd");
    void *wall = hk_zone_alloc(z, 10);
    (void)wall;
    void *q = hk_zone_realloc(z, p, 10000);
    REQUIRE(q != NULL);
    CHECK(q != p);
    CHECK(owner == q);
    hk_block_info info;
    CHECK_EQ(hk_zone_where(z, q, &info), HK_OK);
    CHECK_EQ(info.tag, HK_TAG_CACHE);
    CHECK(info.name && strcmp(info.name, "snd") == 0);
    CHECK_EQ(hk_zone_purge(z, 0), 1);
    CHECK(owner == NULL);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* free_tags cost: a zone full of untracked blocks and a handful of tagged
 * ones; freeing the tagged ones touches only them (the untracked ones are
 * not visited: checked by counting how many blocks a walk would need). */
HKT_TEST(free_tags_does_not_walk_the_heap) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    /* damage an untracked block far away: a walk would stop there and report */
    unsigned char *victim = raw(hk_zone_alloc(z, 32));
    for (int i = 0; i < 2000; i++) REQUIRE(hk_zone_alloc(z, 32) != NULL);
    void *o[5];
    for (int i = 0; i < 5; i++) hk_zone_alloc_tagged(z, 32, HK_TAG_LEVEL, &o[i], NULL);
    unsigned char saved[16];
    memcpy(saved, victim - 16, 16);
    memset(victim - 8, 0x55, 8);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL), 5);
    CHECK_EQ(errs.count, 0);
    memcpy(victim - 16, saved, 16);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}
