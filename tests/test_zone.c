/* Zone: allocation, free, merging, alignment, realloc, regions, growth,
 * stats, walk, where, dump, debug flags. Misuse and tags are in
 * test_zone_misuse.c and test_zone_tags.c; the randomized model in
 * test_zone_model.c. */
#define _GNU_SOURCE 1
#include "heapkit/zone.h"
#include "hk_test.h"
#include "internal.h"

#ifndef _WIN32
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

/* The block at p with its provenance hidden from the compiler: the zone's
 * allocators are declared HK_MALLOC / HK_ALLOC_SIZE, so a deliberate write
 * past a block's end or into its header would be flagged at compile time
 * (and by UBSan's object-size check), or dropped as a dead store. opaque_size does the same for a size. */
static HK__UNUSED unsigned char *raw(void *p) {
    __asm__ volatile("" : "+r"(p));
    return (unsigned char *)p;
}
static HK__UNUSED size_t opaque_size(size_t n) {
    __asm__ volatile("" : "+r"(n));
    return n;
}

static unsigned char g_mem[1 << 20] __attribute__((aligned(64)));

static hk_zone *mk(hkt_errors *errs, uint32_t flags) {
    hk_zone_desc d;
    memset(&d, 0, sizeof d);
    d.memory = g_mem;
    d.size = sizeof g_mem;
    d.flags = flags;
    d.name = "test";
    d.on_error = hkt_on_error;
    d.error_user = errs;
    return hk_zone_create(&d);
}

HKT_TEST(create_caller_memory_and_os) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    hk_stats s;
    CHECK_EQ(hk_zone_stats(z, &s), HK_OK);
    CHECK(strcmp(s.allocator, "zone") == 0);
    CHECK(s.capacity > (sizeof g_mem) - 32768 && s.capacity < sizeof g_mem); /* control block about 31 KiB */
    CHECK_EQ(s.free, s.capacity);
    CHECK_EQ(s.free_blocks, 1);
    CHECK_EQ(s.live_blocks, 0);
    CHECK(s.largest_free > s.capacity - s.capacity / 16);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);

    hk_zone *o = hk_zone_create(&(hk_zone_desc){.size = 1 << 16});
    REQUIRE(o != NULL);
    void *p = hk_zone_alloc(o, 1000);
    CHECK(p != NULL);
    CHECK_EQ(hk_zone_check(o), HK_OK);
    hk_zone_destroy(o);

    unsigned char small[512];
    CHECK(hk_zone_create(&(hk_zone_desc){.memory = small, .size = sizeof small}) == NULL);
    CHECK(hk_zone_create(NULL) == NULL);
    CHECK_EQ(errs.count, 0);
}

HKT_TEST(alloc_free_alignment_and_overhead) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    void *ps[100];
    for (int i = 0; i < 100; i++) {
        size_t n = (size_t)i * 7;
        ps[i] = hk_zone_alloc(z, n);
        REQUIRE(ps[i] != NULL);
        CHECK(((uintptr_t)ps[i] & 15) == 0);
        CHECK(hk_zone_usable_size(z, ps[i]) >= n);
        CHECK(hk_zone_usable_size(z, ps[i]) < n + n / 8 + 32); /* the class rounding: docs/zone.md */
        memset(ps[i], 0xAB, n);
        CHECK(hk_zone_owns(z, ps[i]));
        CHECK_EQ(hk_zone_tag(z, ps[i]), HK_TAG_STATIC);
    }
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK_EQ(s.live_blocks, 100);
    /* Measured overhead: block bytes minus requested bytes, per block. Each
     * block pays 8 bytes of header plus rounding to 16 (below 16 on average). */
    size_t asked = 0;
    for (int i = 0; i < 100; i++) asked += (size_t)i * 7;
    CHECK_EQ(s.used, asked);
    CHECK((s.used_blocks_bytes - s.used) / 100 <= 24);
    for (int i = 0; i < 100; i += 2) CHECK_EQ(hk_zone_free(z, ps[i]), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    for (int i = 1; i < 100; i += 2) CHECK_EQ(hk_zone_free(z, ps[i]), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_stats(z, &s);
    CHECK_EQ(s.free_blocks, 1); /* everything merged back */
    CHECK_EQ(s.used, 0);
    CHECK_EQ(s.alloc_count, 100);
    CHECK_EQ(s.free_count, 100);
    CHECK_EQ(hk_zone_free(z, NULL), HK_OK);
    CHECK_EQ(errs.count, 0);
    hk_zone_destroy(z);
}

/* Sizes at the 8-byte overhead target: a 24-byte request fits a 32-byte
 * block, a 40-byte request a 48-byte one (up to the 16-byte classes' end,
 * 256; above, slots are 8 classes per doubling: the rounding is under 1/8). */
HKT_TEST(overhead_is_eight_bytes_untracked) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    hk_stats a, b;
    for (size_t n = 8; n <= 4096; n += 8) {
        hk_zone_stats(z, &a);
        void *p = hk_zone_alloc(z, n);
        REQUIRE(p != NULL);
        hk_zone_stats(z, &b);
        size_t block = b.used_blocks_bytes - a.used_blocks_bytes;
        if ((n + 8) % 16 == 0 && n >= 24 && n + 8 <= 256) CHECK_EQ(block - n, 8);
        CHECK(block - n <= 23 + (n + 23) / 8);
        CHECK_EQ(hk_zone_usable_size(z, p), block - 8);
        hk_zone_free(z, p);
    }
    hk_zone_destroy(z);
}

HKT_TEST(merging_both_neighbours) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, HK_ZONE_NO_RUNS) /* the layout of plain blocks */;
    REQUIRE(z != NULL);
    void *a = hk_zone_alloc(z, 100), *b = hk_zone_alloc(z, 100), *c = hk_zone_alloc(z, 100);
    void *guard = hk_zone_alloc(z, 100);
    REQUIRE(a && b && c && guard);
    hk_stats s;
    hk_zone_free(z, a);
    hk_zone_free(z, c);
    hk_zone_stats(z, &s);
    CHECK_EQ(s.free_blocks, 3); /* a, c, tail */
    hk_zone_free(z, b);         /* merges a+b+c */
    hk_zone_stats(z, &s);
    CHECK_EQ(s.free_blocks, 2);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* the merged hole is reused for a request that fits it exactly */
    void *d = hk_zone_alloc(z, 300);
    CHECK(d == a);
    hk_zone_destroy(z);
}

HKT_TEST(calloc_and_overflow) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, HK_FLAG_FILL);
    REQUIRE(z != NULL);
    unsigned char *p = hk_zone_calloc(z, 10, 30);
    REQUIRE(p != NULL);
    for (int i = 0; i < 300; i++) CHECK_EQ(p[i], 0);
    CHECK(hk_zone_calloc(z, opaque_size(SIZE_MAX / 2), 3) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_OVERFLOW);
    CHECK(hk_zone_alloc(z, opaque_size(SIZE_MAX)) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_OVERFLOW);
    CHECK(hk_zone_alloc(z, opaque_size(SIZE_MAX - 8)) == NULL);
    CHECK(hk_zone_alloc(z, (size_t)1 << 40) == NULL);
    CHECK(hk_zone_alloc(z, 2 << 20) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_NOMEM);
    CHECK_EQ(errs.last_size, 2 << 20);
    CHECK_STR_CONTAINS(errs.last_message, "cannot allocate 2097152 bytes");
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK_EQ(s.fail_count, 5);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(memalign_every_power_of_two) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, HK_FLAG_FILL | HK_FLAG_CANARY);
    REQUIRE(z != NULL);
    void *keep[20];
    for (int k = 0; k < 17; k++) {
        size_t al = (size_t)1 << k;
        void *filler = hk_zone_alloc(z, (size_t)k * 3 + 1); /* shift the free space around */
        void *p = hk_zone_alloc_aligned(z, al, 100);
        REQUIRE(p != NULL);
        CHECK(((uintptr_t)p & (al - 1)) == 0);
        CHECK(((uintptr_t)p & 15) == 0);
        keep[k] = p;
        hk_zone_free(z, filler);
        CHECK_EQ(hk_zone_check(z), HK_OK);
    }
    for (int k = 0; k < 17; k++) hk_zone_free(z, keep[k]);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK(hk_zone_alloc_aligned(z, opaque_size(48), 10) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_INVALID_ARG);
    CHECK(hk_zone_alloc_aligned(z, opaque_size((size_t)1 << 40), 10) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_INVALID_ARG);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(realloc_in_place_and_moving) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, HK_FLAG_FILL);
    REQUIRE(z != NULL);
    unsigned char *p = hk_zone_alloc(z, 100);
    for (int i = 0; i < 100; i++) p[i] = (unsigned char)i;
    /* grows in place into the free tail */
    unsigned char *q = hk_zone_realloc(z, p, 5000);
    CHECK(q == p);
    for (int i = 0; i < 100; i++) CHECK_EQ(q[i], i);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* shrinks in place; the surplus becomes free */
    hk_stats a, b;
    hk_zone_stats(z, &a);
    q = hk_zone_realloc(z, q, 50);
    CHECK(q == p);
    hk_zone_stats(z, &b);
    CHECK(b.free > a.free + 4000);
    CHECK_EQ(b.used, 50);
    for (int i = 0; i < 50; i++) CHECK_EQ(q[i], i);
    /* blocked by a neighbour: moves, and the data follows */
    void *wall = hk_zone_alloc(z, 16);
    REQUIRE(wall != NULL);
    unsigned char *r = hk_zone_realloc(z, q, 3000);
    REQUIRE(r != NULL);
    CHECK(r != q);
    for (int i = 0; i < 50; i++) CHECK_EQ(r[i], i);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* failure leaves the block alone */
    CHECK(hk_zone_realloc(z, r, 4 << 20) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_NOMEM);
    for (int i = 0; i < 50; i++) CHECK_EQ(r[i], i);
    CHECK(hk_zone_realloc(z, r, opaque_size(SIZE_MAX)) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_OVERFLOW);
    /* size 0 keeps a minimal block */
    void *m = hk_zone_realloc(z, r, 0);
    CHECK(m == r);
    CHECK(hk_zone_owns(z, m));
    /* NULL acts as alloc */
    void *n = hk_zone_realloc(z, NULL, 10);
    CHECK(n != NULL);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(realloc_keeps_alignment) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    void *p = hk_zone_alloc_aligned(z, 4096, 100);
    REQUIRE(p && ((uintptr_t)p & 4095) == 0);
    memset(p, 7, 100);
    void *wall = hk_zone_alloc(z, 10);
    (void)wall;
    for (size_t n = 200; n < 100000; n *= 3) {
        p = hk_zone_realloc(z, p, n);
        REQUIRE(p != NULL);
        CHECK(((uintptr_t)p & 4095) == 0);
        CHECK_EQ(((unsigned char *)p)[99], 7);
        void *w = hk_zone_alloc(z, 10); /* block the in-place path next time */
        (void)w;
    }
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(zero_size_allocations_are_unique) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, HK_FLAG_CANARY);
    REQUIRE(z != NULL);
    void *a = hk_zone_alloc(z, 0), *b = hk_zone_alloc(z, 0);
    CHECK(a && b && a != b);
    CHECK_EQ(hk_zone_usable_size(z, a), 0); /* exact size with canaries */
    CHECK_EQ(hk_zone_free(z, a), HK_OK);
    CHECK_EQ(hk_zone_free(z, b), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(regions_caller_memory) {
    hkt_errors errs = {0};
    static unsigned char r1[98304] __attribute__((aligned(16))), r2[4096] __attribute__((aligned(16)));
    hk_zone *z = hk_zone_create(
        &(hk_zone_desc){.memory = r1, .size = sizeof r1, .on_error = hkt_on_error, .error_user = &errs});
    REQUIRE(z != NULL);
    void *big = hk_zone_alloc(z, 60000);
    CHECK(big != NULL);
    CHECK(hk_zone_alloc(z, 20000) == NULL);
    CHECK_EQ(hk_zone_add_region(z, g_mem, sizeof g_mem), HK_OK);
    void *p = hk_zone_alloc(z, 20000);
    CHECK(p != NULL);
    CHECK((unsigned char *)p >= g_mem && (unsigned char *)p < g_mem + sizeof g_mem);
    CHECK_EQ(hk_zone_add_region(z, g_mem + 100, 1000), HK_ERR_INVALID); /* overlap */
    CHECK_EQ(errs.last_kind, HK_EK_INVALID_ARG);
    CHECK_EQ(hk_zone_add_region(z, r2, 100), HK_ERR_INVALID); /* too small */
    CHECK_EQ(hk_zone_add_region(z, NULL, 100000), HK_ERR_INVALID);
    CHECK_EQ(hk_zone_add_region(z, r2, sizeof r2), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    CHECK_EQ(hk_zone_free(z, big), HK_OK);
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK_EQ(s.free_blocks, 3); /* caller regions are never released */
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(region_limit) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    static unsigned char pool[HK_ZONE_MAX_REGIONS][512] __attribute__((aligned(16)));
    int ok = 0;
    for (int i = 0; i < HK_ZONE_MAX_REGIONS; i++)
        ok += hk_zone_add_region(z, pool[i], sizeof pool[i]) == HK_OK;
    CHECK_EQ(ok, HK_ZONE_MAX_REGIONS - 1);
    CHECK_EQ(errs.last_result, HK_ERR_NOMEM);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(growth_from_os_and_release) {
    hkt_errors errs = {0};
    hk_zone *z = hk_zone_create(&(hk_zone_desc){
        .size = 64 << 10, .grow_size = 64 << 10, .on_error = hkt_on_error, .error_user = &errs});
    REQUIRE(z != NULL);
    void *ps[200];
    for (int i = 0; i < 200; i++) {
        ps[i] = hk_zone_alloc(z, 3000);
        REQUIRE(ps[i] != NULL);
    }
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK(s.capacity >= 600000);
    void *big = hk_zone_alloc(z, 3 << 20); /* larger than any chunk: its own region */
    REQUIRE(big != NULL);
    memset(big, 1, 3 << 20);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    for (int i = 0; i < 200; i++) hk_zone_free(z, ps[i]);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_free(z, big);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_stats t;
    hk_zone_stats(z, &t);
    CHECK(t.capacity < s.capacity + (3 << 20)); /* the big block's own region went back to the OS */
    CHECK_EQ(t.live_blocks, 0);
    CHECK_EQ(errs.count, 0);
    /* a cap on growth */
    hk_zone *c = hk_zone_create(&(hk_zone_desc){.size = 64 << 10,
                                                .grow_size = 64 << 10,
                                                .max_size = 200 << 10,
                                                .on_error = hkt_on_error,
                                                .error_user = &errs});
    REQUIRE(c != NULL);
    CHECK(hk_zone_alloc(c, 100 << 10) != NULL);
    CHECK(hk_zone_alloc(c, 150 << 10) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_NOMEM);
    CHECK_EQ(hk_zone_check(c), HK_OK);
    hk_zone_destroy(c);
    hk_zone_destroy(z);
}

static int count_walk(const hk_block_info *i, void *user) {
    size_t *c = (size_t *)user;
    if (i->flags & HK_BLOCK_USED)
        c[0]++;
    else
        c[1]++;
    c[2] += i->requested;
    return 0;
}

static int stop_walk(const hk_block_info *i, void *user) {
    (void)i;
    return ++*(int *)user == 2 ? 42 : 0;
}

HKT_TEST(walk_where_dump) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, HK_FLAG_RECORD_SITE);
    REQUIRE(z != NULL);
    void *a = HK_ZONE_ALLOC(z, 100);
    void *owner = NULL;
    void *b = hk_zone_alloc_tagged(z, 200, HK_TAG_CACHE, &owner, "sprite");
    void *c = hk_zone_alloc(z, 300);
    hk_zone_free(z, c);
    size_t cnt[3] = {0, 0, 0};
    CHECK_EQ(hk_zone_walk(z, count_walk, cnt), 0);
    CHECK_EQ(cnt[0], 2);
    CHECK_EQ(cnt[1], 1);
    CHECK_EQ(cnt[2], 300);
    int calls = 0;
    CHECK_EQ(hk_zone_walk(z, stop_walk, &calls), 42);
    hk_block_info info;
    CHECK_EQ(hk_zone_where(z, (char *)b + 150, &info), HK_OK);
    CHECK(info.address == b);
    CHECK_EQ(info.requested, 200);
    CHECK_EQ(info.tag, HK_TAG_CACHE);
    CHECK(info.owner == (void *)&owner);
    CHECK(info.flags & HK_BLOCK_PURGEABLE);
    CHECK(strcmp(info.name, "sprite") == 0);
    CHECK_EQ(hk_zone_where(z, a, &info), HK_OK);
    CHECK(info.site_file && strstr(info.site_file, "test_zone.c"));
    CHECK(info.site_line > 0);
    CHECK_EQ(hk_zone_where(z, (char *)b - 3, &info), HK_OK); /* a header belongs to its block */
    CHECK(info.address == b);
    int x;
    CHECK_EQ(hk_zone_where(z, &x, &info), HK_ERR_FOREIGN);
    char buf[8192];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    REQUIRE(f != NULL);
    hk_zone_dump(z, hk_print_file, f);
    fclose(f);
    CHECK_STR_CONTAINS(buf, "zone 'test'");
    CHECK_STR_CONTAINS(buf, "sprite");
    CHECK_STR_CONTAINS(buf, "tag 101 (purgeable)");
    CHECK_STR_CONTAINS(buf, "test_zone.c:");
    CHECK_STR_CONTAINS(buf, "free");
    CHECK_EQ(errs.count, 0);
    hk_zone_destroy(z);
}

HKT_TEST(fill_patterns_on_alloc_and_free) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, HK_FLAG_FILL);
    REQUIRE(z != NULL);
    unsigned char *p = hk_zone_alloc(z, 64);
    REQUIRE(p != NULL);
    CHECK_EQ(hk_fill_check(p, 64, HK_FILL_ALLOC), 64);
    hk_zone_free(z, p);
    if (!hk__asan_enabled()) CHECK_EQ(hk_fill_check(p + 16, 48, HK_FILL_FREE), 48);
    hk_zone *zz = mk(&errs, HK_FLAG_ZERO);
    unsigned char *q = hk_zone_alloc(zz, 64);
    memset(q, 1, 64);
    hk_zone_free(zz, q);
    q = hk_zone_alloc(zz, 64);
    CHECK_EQ(hk_fill_check(q, 64, 0), 64);
    hk_zone_destroy(zz);
}

/* Paranoid mode runs the check after every call; with a lock the zone is
 * shared by threads. */

HKT_TEST(paranoid_and_lock_hooks) {
    hkt_errors errs = {0};
    hk_zone_desc d;
    memset(&d, 0, sizeof d);
    d.memory = g_mem;
    d.size = sizeof g_mem;
    d.flags = HK_FLAG_PARANOID | HK_FLAG_CANARY | HK_FLAG_FILL;
    d.on_error = hkt_on_error;
    d.error_user = &errs;
    d.lock.lock = hkt_lock;
    d.lock.unlock = hkt_unlock;
    hk_zone *z = hk_zone_create(&d);
    REQUIRE(z != NULL);
    void *ps[50];
    for (int i = 0; i < 50; i++) ps[i] = hk_zone_alloc(z, (size_t)i * 13);
    for (int i = 0; i < 50; i += 3) ps[i] = hk_zone_realloc(z, ps[i], (size_t)i * 40);
    for (int i = 0; i < 50; i++) hk_zone_free(z, ps[i]);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hkt_lock_depth, 0);
    CHECK(hkt_lock_calls >= 117);
    /* paranoid mode catches damage at the next call */
    unsigned char *p = raw(hk_zone_alloc(z, 20));
    hk__san_access(p + 20, 1);
    p[20] = 0; /* into the canary */
    void *q = hk_zone_alloc(z, 10);
    CHECK(q != NULL);
    CHECK(errs.count >= 1);
    CHECK_EQ(errs.last_kind, HK_EK_CORRUPT_CANARY);
    hk__san_access(p + 20, 1);
    p[20] = HK_FILL_PAD;
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
    d.lock.unlock = NULL;
    CHECK(hk_zone_create(&d) == NULL); /* both hooks or neither */
}

/* A growing zone reserves address space after its first region and grows
 * that region in place: a block can straddle the old end, and the old tail
 * free block merges with the new memory. */
HKT_TEST(growth_in_place_extends_the_region) {
    hkt_errors errs = {0};
    hk_zone *z = hk_zone_create(&(hk_zone_desc){
        .size = 64 << 10, .grow_size = 64 << 10, .on_error = hkt_on_error, .error_user = &errs});
    REQUIRE(z != NULL);
    hk_stats s0;
    hk_zone_stats(z, &s0);
    unsigned char *a = hk_zone_alloc(z, 40 << 10);
    REQUIRE(a != NULL);
    unsigned char *b = hk_zone_alloc(z, 40 << 10); /* does not fit in what is left: the zone grows */
    REQUIRE(b != NULL);
    hk_stats s1;
    hk_zone_stats(z, &s1);
    CHECK(s1.capacity > s0.capacity);
    /* in place: b starts right after a (the old tail and the growth merged) */
    CHECK_EQ((uintptr_t)b, (uintptr_t)a + hk_zone_usable_size(z, a) + 8);
    memset(a, 1, 40 << 10);
    memset(b, 2, 40 << 10);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* many growth steps still make one contiguous heap */
    void *ps[64];
    for (int i = 0; i < 64; i++) {
        ps[i] = hk_zone_alloc(z, 30000);
        REQUIRE(ps[i] != NULL);
    }
    CHECK_EQ(hk_zone_check(z), HK_OK);
    for (int i = 0; i < 64; i++) CHECK_EQ(hk_zone_free(z, ps[i]), HK_OK);
    CHECK_EQ(hk_zone_free(z, a), HK_OK);
    CHECK_EQ(hk_zone_free(z, b), HK_OK);
    hk_stats s2;
    hk_zone_stats(z, &s2);
    CHECK_EQ(s2.free_blocks, 1); /* everything merged back into one block */
    CHECK_EQ(s2.free, s2.capacity);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(errs.count, 0);
    hk_zone_destroy(z);
}

#ifndef _WIN32 /* page-fault counts: POSIX only (cmake/windows.cmake) */
/* Minor and major page faults of this process so far. */
static long faults_now(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt + ru.ru_majflt;
}

/* Allocates `total` bytes in 48 KiB blocks from z, writes them all, frees
 * them; returns the page faults taken while writing. */
static long faults_writing(hk_zone *z, size_t total) {
    enum { BLK = 48 << 10 };
    static void *ps[1024];
    size_t n = total / BLK;
    for (size_t i = 0; i < n; i++) {
        ps[i] = hk_zone_alloc(z, BLK);
        REQUIRE(ps[i] != NULL);
    }
    long f0 = faults_now();
    for (size_t i = 0; i < n; i++) memset(ps[i], 0x5a, BLK);
    long f = faults_now() - f0;
    for (size_t i = 0; i < n; i++) CHECK_EQ(hk_zone_free(z, ps[i]), HK_OK);
    return f;
}

#endif

/* A zone on OS memory: `size` bytes, growing by `grow` (0: never). */
static hk_zone *mk_os(hkt_errors *errs, size_t size, size_t grow, uint32_t flags) {
    return hk_zone_create(&(hk_zone_desc){
        .size = size, .grow_size = grow, .flags = flags, .on_error = hkt_on_error, .error_user = errs});
}

#ifndef _WIN32 /* page-fault counts: POSIX only (cmake/windows.cmake) */
/* HK_ZONE_PREFAULT: the first region and every growth are faulted in when
 * the zone takes them, so writing the blocks takes no page fault (without
 * the flag, one per page). */
HKT_TEST(prefault_first_region_and_growth) {
    hkt_errors errs = {0};
    size_t mib = (size_t)1 << 20;
    /* ThreadSanitizer's shadow memory takes page faults of its own on first
     * writes: there only the zone's own results are checked. */
    int count_faults = !hk__tsan_enabled();
    hk_zone *lazy = mk_os(&errs, 8 * mib, 0, 0), *pre = mk_os(&errs, 8 * mib, 0, HK_ZONE_PREFAULT);
    REQUIRE(lazy && pre);
    long fl = faults_writing(lazy, 6 * mib), fp = faults_writing(pre, 6 * mib);
    CHECK(fl >= (long)(6 * mib / 4096) / 2); /* about one per page */
    if (count_faults) CHECK(fp < 16);
    hk_zone_destroy(lazy);
    hk_zone_destroy(pre);
    /* growth in place (within the reserved address space): each chunk is
     * faulted in as it is added */
    hk_zone *g = mk_os(&errs, 1 * mib, 1 * mib, HK_ZONE_PREFAULT);
    REQUIRE(g != NULL);
    long fg = faults_writing(g, 24 * mib);
    if (count_faults) CHECK(fg < 16);
    hk_stats s;
    hk_zone_stats(g, &s);
    CHECK(s.capacity >= 24 * mib);
    CHECK_EQ(hk_zone_check(g), HK_OK);
    hk_zone_destroy(g);
    /* a request larger than the growth chunk gets a region of its own */
    hk_zone *d = mk_os(&errs, 1 * mib, 1 * mib, HK_ZONE_PREFAULT);
    REQUIRE(d != NULL);
    unsigned char *big = hk_zone_alloc(d, 8 * mib);
    REQUIRE(big != NULL);
    hk_zone_stats(d, &s);
    CHECK(s.capacity >= 9 * mib);
    long f0 = faults_now();
    memset(big, 0x5a, 8 * mib);
    if (count_faults) CHECK(faults_now() - f0 < 16);
    CHECK_EQ(hk_zone_free(d, big), HK_OK);
    CHECK_EQ(hk_zone_check(d), HK_OK);
    CHECK_EQ(errs.count, 0);
    hk_zone_destroy(d);
}

#endif

/* An allocation from a free block that is not the region's last one is
 * carved from that block's end; the free remainder keeps its address. */
HKT_TEST(carving_from_the_end_of_an_interior_hole) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, HK_ZONE_NO_RUNS);
    REQUIRE(z != NULL);
    unsigned char *a = hk_zone_alloc(z, 100);
    unsigned char *hole = hk_zone_alloc(z, 20000);
    unsigned char *c = hk_zone_alloc(z, 100);
    REQUIRE(a && hole && c);
    CHECK_EQ(hk_zone_free(z, hole), HK_OK);
    unsigned char *p = hk_zone_alloc(z, 1000); /* only the hole's class or the tail can serve it */
    REQUIRE(p != NULL);
    CHECK(p > hole && p < c);
    /* taken from the hole: at its end, right before c's header */
    CHECK_EQ((uintptr_t)p + hk_zone_usable_size(z, p) + 8, (uintptr_t)c);
    hk_block_info info;
    CHECK_EQ(hk_zone_where(z, hole, &info), HK_OK);
    CHECK_EQ(info.flags & HK_BLOCK_USED, 0u); /* the remainder still starts where the hole did */
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* freeing p merges it back into the remainder before it, in place */
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK_EQ(s.free_blocks, 2); /* the hole and the tail */
    CHECK_EQ(hk_zone_check(z), HK_OK);
    unsigned char *q = hk_zone_alloc(z, 20000); /* the whole hole again */
    CHECK(q == hole);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(errs.count, 0);
    hk_zone_destroy(z);
}

/*@RUNS_TEST@*/

/* ---- the instance core, info, dump output ------------------------------------- */

/* A desc with only one of lock/unlock is refused, with a report naming the
 * missing hook, before any memory is taken. */
HKT_TEST(create_refuses_half_set_lock_hooks) {
    hkt_errors errs = {0};
    hk_zone_desc d;
    memset(&d, 0, sizeof d);
    d.memory = g_mem;
    d.size = sizeof g_mem;
    d.on_error = hkt_on_error;
    d.error_user = &errs;
    d.lock.lock = hkt_lock;
    CHECK(hk_zone_create(&d) == NULL);
    CHECK_EQ(errs.count, 1);
    CHECK_EQ(errs.last_kind, HK_EK_INVALID_ARG);
    CHECK_STR_CONTAINS(errs.last_message, "unlock is missing");
    d.lock.lock = NULL;
    d.lock.unlock = hkt_unlock;
    d.memory = NULL; /* would take OS memory: refused first */
    CHECK(hk_zone_create(&d) == NULL);
    CHECK_EQ(errs.count, 2);
    CHECK_STR_CONTAINS(errs.last_message, "lock is missing");
}

/* Memory too small for the control block is refused with a report. */
HKT_TEST(create_reports_memory_too_small) {
    hkt_errors errs = {0};
    static unsigned char small[4096] __attribute__((aligned(64)));
    hk_zone *z = hk_zone_create(&(hk_zone_desc){
        .memory = small, .size = sizeof small, .on_error = hkt_on_error, .error_user = &errs});
    CHECK(z == NULL);
    CHECK_EQ(errs.count, 1);
    CHECK_EQ(errs.last_kind, HK_EK_INVALID_ARG);
    CHECK_STR_CONTAINS(errs.last_message, "control block");
}

/* HK_FLAG_PARANOID: the full check runs after every mutating call (here a
 * free of another block finds the damaged canary), not after a read-only
 * one (stats, usable_size). */
HKT_TEST(paranoid_reports_damage_on_next_mutating_call) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, HK_FLAG_PARANOID | HK_FLAG_CANARY);
    REQUIRE(z != NULL);
    unsigned char *a = raw(hk_zone_alloc(z, 40));
    void *b = hk_zone_alloc(z, 40);
    REQUIRE(a && b);
    CHECK_EQ(errs.count, 0);
    hk__san_access(a + 40, 1);
    a[40] ^= 0xff; /* into a's canary */
    hk_stats s;
    CHECK_EQ(hk_zone_stats(z, &s), HK_OK);
    CHECK_EQ(hk_zone_usable_size(z, b), 40);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_free(z, b), HK_OK); /* b is fine; the check after it is not */
    CHECK_EQ(errs.count, 1);
    CHECK_EQ(errs.last_kind, HK_EK_CORRUPT_CANARY);
    CHECK(errs.last_address == a);
    hk__san_access(a + 40, 1);
    a[40] ^= 0xff;
    CHECK_EQ(hk_zone_free(z, a), HK_OK);
    CHECK_EQ(errs.count, 1);
    hk_zone_destroy(z);
}

HKT_TEST(get_info_counters) {
    hkt_errors errs = {0};
    hk_zone_info info;
    CHECK_EQ(hk_zone_get_info(NULL, &info), HK_ERR_INVALID);
    hk_zone *z = hk_zone_create(&(hk_zone_desc){.size = 1 << 20,
                                                .grow_size = 1 << 20,
                                                .purge_level = 100,
                                                .on_error = hkt_on_error,
                                                .error_user = &errs});
    REQUIRE(z != NULL);
    CHECK_EQ(hk_zone_get_info(z, NULL), HK_ERR_INVALID);
    CHECK_EQ(hk_zone_get_info(z, &info), HK_OK);
    CHECK(info.control_bytes > 1024 && info.control_bytes < 65536);
    CHECK_EQ(info.regions, 1);
    CHECK_EQ(info.purge_level, 100);
    CHECK_EQ(info.runs, 0);
    CHECK_EQ(info.grow_count, 0);
    void *s = hk_zone_alloc(z, 40);    /* a small block: one run */
    void *p = hk_zone_alloc(z, 40000); /* a plain untracked block */
    void *owner = NULL;
    REQUIRE(hk_zone_alloc_tagged(z, 1000, HK_TAG_CACHE, &owner, "cached") != NULL);
    REQUIRE(s && p);
    CHECK_EQ(hk_zone_get_info(z, &info), HK_OK);
    CHECK_EQ(info.runs, 1);
    CHECK(info.run_bytes > 40);
    CHECK_EQ(info.slot_bytes, 40); /* the 40-byte class */
    CHECK_EQ(info.untracked_blocks, 1);
    CHECK_EQ(hk_zone_purge(z, 0), 1);
    CHECK(owner == NULL);
    void *big = hk_zone_alloc(z, 3 << 20); /* grows */
    REQUIRE(big != NULL);
    CHECK_EQ(hk_zone_get_info(z, &info), HK_OK);
    CHECK_EQ(info.purge_count, 1);
    CHECK(info.grow_count >= 1);
    hk_zone_free(z, big);
    hk_zone_free(z, p);
    hk_zone_free(z, s);
    CHECK_EQ(hk_zone_get_info(z, &info), HK_OK);
    CHECK_EQ(info.slot_bytes, 0);
    CHECK_EQ(info.untracked_blocks, 0);
    CHECK_EQ(errs.count, 0);
    hk_zone_destroy(z);
}

typedef struct dump_sink {
    char text[16384];
    size_t len;
    int pieces, whole_lines;
} dump_sink;

static void dump_collect(const char *text, void *user) {
    dump_sink *s = (dump_sink *)user;
    size_t n = strlen(text);
    s->pieces++;
    if (n && text[n - 1] == '\n') s->whole_lines++;
    if (s->len + n < sizeof s->text) {
        memcpy(s->text + s->len, text, n + 1);
        s->len += n;
    }
}

/* The dump goes to the caller's print function, a whole line per call. */
HKT_TEST(dump_to_print_function) {
    hkt_errors errs = {0};
    /* OS memory: small blocks have their space */
    hk_zone *z = hk_zone_create(
        &(hk_zone_desc){.size = 1 << 20, .name = "test", .on_error = hkt_on_error, .error_user = &errs});
    REQUIRE(z != NULL);
    void *owner = NULL;
    void *a = hk_zone_alloc_tagged(z, 300, HK_TAG_LEVEL, &owner, "e1m1");
    void *b = hk_zone_alloc(z, 50);
    REQUIRE(a && b);
    static dump_sink sink;
    memset(&sink, 0, sizeof sink);
    hk_zone_dump(z, dump_collect, &sink);
    CHECK(sink.pieces >= 6);
    CHECK_EQ(sink.whole_lines, sink.pieces);
    CHECK_STR_CONTAINS(sink.text, "zone 'test'");
    CHECK_STR_CONTAINS(sink.text, "e1m1");
    CHECK_STR_CONTAINS(sink.text, "tag  50");
    CHECK_STR_CONTAINS(sink.text, "run of 56-byte blocks: 1 of");
    CHECK_STR_CONTAINS(sink.text, "small block");
    CHECK_STR_CONTAINS(sink.text, "totals per tag");
    hk_zone_dump(NULL, dump_collect, &sink); /* ignored */
    CHECK_EQ(errs.count, 0);
    hk_zone_destroy(z);
}

#ifndef _WIN32 /* setrlimit and fork: POSIX-only (cmake/windows.cmake) */
/* Regression: under an address-space limit (ulimit -v, valgrind) the
 * growing zone's 64 GiB reservation was refused and the zone then grew by
 * separate regions, one per chunk. It now halves the reservation until the
 * host grants one, and grows in place. */
HKT_TEST(zone_growing_zone_reserves_less_under_address_space_limit) {
    if (hk__tsan_enabled() || hk__asan_enabled()) return; /* sanitizers reserve terabytes of shadow */
    size_t vm = hkt_vm_size();
    if (!vm || sizeof(void *) < 8) return;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {vm + ((size_t)4 << 30), vm + ((size_t)4 << 30)};
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(2);
        hkt_errors errs = {.quiet = 1};
        hk_zone *z = hk_zone_create(&(hk_zone_desc){
            .size = 1 << 20, .grow_size = 1 << 20, .on_error = hkt_on_error, .error_user = &errs});
        if (!z) _exit(3);
        void *blocks[512];
        for (int i = 0; i < 512; i++)
            if (!(blocks[i] = hk_zone_alloc(z, 64 << 10))) _exit(4);
        hk_zone_info info;
        if (hk_zone_get_info(z, &info) != HK_OK) _exit(5);
        if (info.regions != 1) _exit(6);
        for (int i = 0; i < 512; i++)
            if (hk_zone_free(z, blocks[i]) != HK_OK) _exit(7);
        if (hk_zone_check(z) != HK_OK || errs.count != 0) _exit(8);
        hk_zone_destroy(z);
        _exit(0);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
}
#endif /* !_WIN32 */
