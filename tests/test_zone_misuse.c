/* Zone: every bad input is reported with the address and what was wrong,
 * the call fails, and the zone stays consistent (check passes afterwards). */
#include "heapkit/zone.h"
#include "hk_test.h"
#include "internal.h"
#include "zone_internal.h"

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

static unsigned char g_mem[256 << 10] __attribute__((aligned(64)));

static hk_zone *mk(hkt_errors *errs, uint32_t flags) {
    hkt_errors_reset(errs);
    return hk_zone_create(&(hk_zone_desc){.memory = g_mem,
                                          .size = sizeof g_mem,
                                          .flags = flags,
                                          .name = "bad",
                                          .on_error = hkt_on_error,
                                          .error_user = errs});
}

static char *hexaddr(const void *p) {
    static char buf[32];
    snprintf(buf, sizeof buf, "%p", p);
    return buf;
}

HKT_TEST(double_free) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    void *keep = hk_zone_alloc(z, 100);
    void *p = hk_zone_alloc(z, 100);
    void *wall = hk_zone_alloc(z, 100);
    (void)keep;
    (void)wall;
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    CHECK_EQ(hk_zone_free(z, p), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(errs.count, 1);
    CHECK_EQ(errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK(errs.last_address == p);
    CHECK_STR_CONTAINS(errs.last_message, "zone 'bad': double free");
    CHECK_STR_CONTAINS(errs.last_message, hexaddr(p));
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK_EQ(s.error_count, 1);
    CHECK_EQ(s.free_count, 1);
    hk_zone_destroy(z);
}

/* After a merge the freed block's header is inside a bigger free block:
 * still reported as a double free (pointer into free space). */
static void double_free_after_merge_with(uint32_t flags) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, flags);
    void *a = hk_zone_alloc(z, 100), *b = hk_zone_alloc(z, 100), *wall = hk_zone_alloc(z, 10);
    (void)wall;
    hk_zone_free(z, a);
    hk_zone_free(z, b); /* merges into a */
    CHECK_EQ(hk_zone_free(z, b), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* and merged into the next free block */
    void *c = hk_zone_alloc(z, 100), *d = hk_zone_alloc(z, 100);
    hk_zone_free(z, d);
    hk_zone_free(z, c);
    CHECK_EQ(hk_zone_free(z, d), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(hk_zone_free(z, c), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(errs.count, 3);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(double_free_after_merge) {
    double_free_after_merge_with(HK_FLAG_FILL);
    double_free_after_merge_with(0);
}

HKT_TEST(foreign_pointer) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    int local;
    static unsigned char other[4096] __attribute__((aligned(16)));
    CHECK_EQ(hk_zone_free(z, &local), HK_ERR_FOREIGN);
    CHECK_EQ(errs.last_kind, HK_EK_FOREIGN_PTR);
    CHECK(errs.last_address == &local);
    CHECK_STR_CONTAINS(errs.last_message, "does not belong to this zone");
    CHECK_EQ(hk_zone_free(z, other + 16), HK_ERR_FOREIGN);
    /* a pointer from another zone */
    hk_zone *z2 = hk_zone_create(&(hk_zone_desc){.size = 1 << 16});
    void *p2 = hk_zone_alloc(z2, 10);
    CHECK_EQ(hk_zone_free(z, p2), HK_ERR_FOREIGN);
    CHECK_EQ(hk_zone_usable_size(z, p2), 0);
    CHECK(hk_zone_realloc(z, p2, 100) == NULL);
    CHECK_EQ(hk_zone_change_tag(z, p2, HK_TAG_LEVEL), HK_ERR_FOREIGN);
    CHECK_EQ(hk_zone_tag(z, p2), 0);
    CHECK(!hk_zone_owns(z, p2));
    CHECK_EQ(errs.count, 7);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_check(z2), HK_OK);
    hk_zone_destroy(z2);
    hk_zone_destroy(z);
}

HKT_TEST(interior_pointer) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    void *owner = NULL;
    unsigned char *p = hk_zone_alloc_tagged(z, 200, HK_TAG_LEVEL, &owner, "texture");
    CHECK_EQ(hk_zone_free(z, p + 5), HK_ERR_INVALID);
    CHECK_EQ(errs.last_kind, HK_EK_INTERIOR_PTR);
    CHECK_STR_CONTAINS(errs.last_message, "5 bytes into block");
    CHECK_STR_CONTAINS(errs.last_message, "texture");
    CHECK_EQ(hk_zone_free(z, p + 64), HK_ERR_INVALID); /* aligned, but no header there */
    CHECK_EQ(errs.last_kind, HK_EK_INTERIOR_PTR);
    CHECK_STR_CONTAINS(errs.last_message, "64 bytes into block");
    CHECK(hk_zone_realloc(z, p + 32, 10) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_INTERIOR_PTR);
    CHECK(owner == p);
    CHECK(hk_zone_owns(z, p));
    CHECK(!hk_zone_owns(z, p + 32));
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* A damaged header is reported and the block is left alone; check reports
 * it too. Once the bytes are restored, everything is consistent again. */
HKT_TEST(damaged_header) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    void *a = hk_zone_alloc(z, 100);
    unsigned char *p = raw(hk_zone_alloc(z, 100));
    void *c = hk_zone_alloc(z, 100);
    unsigned char saved[16];
    memcpy(saved, p - 16, 16);
    p[-8] ^= 0x40; /* size field */
    CHECK_EQ(hk_zone_free(z, p), HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, HK_EK_CORRUPT_HEADER);
    CHECK_STR_CONTAINS(errs.last_message, "damaged");
    CHECK_STR_CONTAINS(errs.last_message, hexaddr(p));
    CHECK_EQ(hk_zone_usable_size(z, p), 0);
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, HK_EK_CORRUPT_HEADER);
    memcpy(p - 16, saved, 16);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* the tag and flag bytes are covered too */
    p[-4] ^= 1;
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    p[-4] ^= 1;
    p[-3] ^= 4;
    CHECK_EQ(hk_zone_free(z, p), HK_ERR_CORRUPT);
    p[-3] ^= 4;
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    CHECK_EQ(hk_zone_free(z, a), HK_OK);
    CHECK_EQ(hk_zone_free(z, c), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* An overrun that reaches the next block's header is caught by check. */
HKT_TEST(overrun_into_next_header) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    unsigned char *p = raw(hk_zone_alloc(z, 24)); /* block of 32: usable 24 */
    unsigned char *q = raw(hk_zone_alloc(z, 24));
    REQUIRE(q == p + 32);
    unsigned char saved[8];
    memcpy(saved, q - 8, 8);
    hk__san_access(p, 40);
    memset(p, 0x41, 40); /* 16 bytes too far */
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(errs.last_message, "overrun of the block before");
    CHECK_EQ(hk_zone_free(z, q), HK_ERR_CORRUPT);
    memcpy(q - 8, saved, 8);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, q), HK_OK);
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* A damaged canary is reported on free (the block is freed anyway, so the
 * zone is consistent afterwards) and by check. */
HKT_TEST(damaged_canary) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, HK_FLAG_CANARY);
    unsigned char *p = raw(hk_zone_alloc_tagged(z, 30, HK_TAG_LEVEL, NULL, "hud"));
    REQUIRE(p != NULL);
    CHECK_EQ(hk_zone_usable_size(z, p), 30);
    hk__san_access(p + 30, 1);
    p[30] = 'x';
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, HK_EK_CORRUPT_CANARY);
    CHECK_STR_CONTAINS(errs.last_message, "hud");
    CHECK_EQ(hk_zone_free(z, p), HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, HK_EK_CORRUPT_CANARY);
    CHECK_STR_CONTAINS(errs.last_message, hexaddr(p));
    CHECK_STR_CONTAINS(errs.last_message, "byte 0 past the end");
    CHECK(!hk_zone_owns(z, p));
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* realloc of a block with a damaged canary: reported, repaired, resized */
    unsigned char *q = raw(hk_zone_alloc(z, 17));
    hk__san_access(q + 17, 5);
    q[21] = 0;
    unsigned char *r = hk_zone_realloc(z, q, 40);
    CHECK(r != NULL);
    CHECK_EQ(errs.last_kind, HK_EK_CORRUPT_CANARY);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* With HK_FLAG_FILL, a write into freed memory is found by check. */
HKT_TEST(write_after_free) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, HK_FLAG_FILL);
    unsigned char *p = hk_zone_alloc(z, 200);
    void *wall = hk_zone_alloc(z, 10);
    (void)wall;
    hk_zone_free(z, p);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk__san_access(p + 100, 1);
    p[100] = 1;
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, HK_EK_CORRUPT_FREE);
    CHECK_STR_CONTAINS(errs.last_message, "written after free");
    hk__san_access(p + 100, 1);
    p[100] = HK_FILL_FREE;
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* Damaged free-list link and counters are found by check: the link of a
 * free plain block, or of a free small block in its run. */
static void damaged_structures(uint32_t flags, hk_error_kind link_kind) {
    hkt_errors errs = {0};
    /* small blocks need OS memory (their space); caller memory has none */
    hk_zone *z = flags & HK_ZONE_NO_RUNS
                     ? mk(&errs, flags)
                     : hk_zone_create(&(hk_zone_desc){
                           .flags = flags, .name = "bad", .on_error = hkt_on_error, .error_user = &errs});
    unsigned char *a = hk_zone_alloc(z, 100);
    void *wall = hk_zone_alloc(z, 10);
    (void)wall;
    hk_zone_free(z, a);
    void **link = (void **)a; /* next_free of the freed block, or the slot's free-list link */
    hk__san_access(link, sizeof *link);
    void *saved = *link;
    int local;
    *link = &local;
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, link_kind);
    hk__san_access(link, sizeof *link);
    *link = saved;
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(damaged_structures_plain) { damaged_structures(HK_ZONE_NO_RUNS, HK_EK_CORRUPT_STRUCTURE); }
HKT_TEST(damaged_structures_runs) { damaged_structures(0, HK_EK_CORRUPT_FREE); }

HKT_TEST(exhaustion_reports_size) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    CHECK(hk_zone_alloc(z, 300000) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_NOMEM);
    CHECK_EQ(errs.last_result, HK_ERR_NOMEM);
    CHECK_EQ(errs.last_size, 300000);
    CHECK_STR_CONTAINS(errs.last_message, "300000");
    CHECK(hk_zone_alloc_aligned(z, 4096, 300000) == NULL);
    CHECK(hk_zone_alloc_tagged(z, 300000, HK_TAG_LEVEL, NULL, "big") == NULL);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(null_arguments) {
    CHECK(hk_zone_alloc(NULL, 10) == NULL);
    CHECK(hk_zone_alloc_tagged(NULL, 10, 1, NULL, NULL) == NULL);
    CHECK(hk_zone_calloc(NULL, 1, 1) == NULL);
    CHECK(hk_zone_alloc_aligned(NULL, 16, 1) == NULL);
    CHECK(hk_zone_realloc(NULL, NULL, 1) == NULL);
    CHECK_EQ(hk_zone_free(NULL, NULL), HK_ERR_INVALID);
    CHECK_EQ(hk_zone_usable_size(NULL, NULL), 0);
    CHECK_EQ(hk_zone_free_tags(NULL, 1, 2), 0);
    CHECK_EQ(hk_zone_purge(NULL, 1), 0);
    CHECK_EQ(hk_zone_check(NULL), HK_ERR_INVALID);
    CHECK_EQ(hk_zone_stats(NULL, NULL), HK_ERR_INVALID);
    CHECK_EQ(hk_zone_walk(NULL, NULL, NULL), -1);
    CHECK_EQ(hk_zone_add_region(NULL, NULL, 0), HK_ERR_INVALID);
    hk_zone_destroy(NULL);
    hk_zone_dump(NULL, NULL, NULL);
}

/* Alignments that are not powers of two are refused and reported, before
 * any rounding (3 used to be taken for 16); 0 and small powers of two mean 16. */
HKT_TEST(alloc_aligned_non_power_of_two_refused) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    const size_t bad[] = {3, 5, 12, 15, 24, 48, 100, (size_t)1 << 35, SIZE_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int before = errs.count;
        CHECK(hk_zone_alloc_aligned(z, bad[i], 10) == NULL);
        CHECK_EQ(errs.count, before + 1);
        CHECK_EQ(errs.last_kind, HK_EK_INVALID_ARG);
        CHECK_EQ(errs.last_size, bad[i]);
        hk_zone_alloc_desc d = {0};
        d.size = 10;
        d.align = bad[i];
        CHECK(hk_zone_alloc_ex(z, &d) == NULL);
        CHECK_EQ(errs.count, before + 2);
    }
    CHECK_STR_CONTAINS(errs.last_message, "not a power of two");
    const size_t good[] = {0, 1, 2, 4, 8, 16, 32, 4096};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        void *p = hk_zone_alloc_aligned(z, good[i], 10);
        REQUIRE(p != NULL);
        CHECK_EQ((uintptr_t)p % (good[i] > 16 ? good[i] : 16), 0);
        CHECK_EQ(hk_zone_free(z, p), HK_OK);
    }
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* Wild addresses near 0 and near the top of the address space: reported as
 * foreign, and validated without pointer arithmetic that could wrap (the
 * sanitizer build turns such undefined behaviour into a failure). */
HKT_TEST(wild_pointers_near_address_space_ends) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    void *keep = hk_zone_alloc(z, 40);
    REQUIRE(keep != NULL);
    memset(keep, 7, 40);
    const uintptr_t wild[] = {1, 8, 15, 16, 32, 4096, UINTPTR_MAX, UINTPTR_MAX - 15, UINTPTR_MAX - 4095};
    for (size_t i = 0; i < sizeof wild / sizeof wild[0]; i++) {
        void *p = (void *)wild[i];
        int before = errs.count;
        CHECK_EQ(hk_zone_free(z, p), HK_ERR_FOREIGN);
        CHECK_EQ(errs.count, before + 1);
        CHECK_EQ(errs.last_kind, HK_EK_FOREIGN_PTR);
        CHECK(hk_zone_realloc(z, p, 10) == NULL);
        CHECK_EQ(hk_zone_usable_size(z, p), 0);
        CHECK(!hk_zone_owns(z, p));
        CHECK_EQ(hk_zone_tag(z, p), 0);
    }
    unsigned char *k = keep;
    for (int i = 0; i < 40; i++) CHECK_EQ(k[i], 7);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, keep), HK_OK);
    hk_zone_destroy(z);
}
