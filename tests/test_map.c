/*
 * tests/test_map.c - heap maps (heapkit/map.h) for every allocator: the SVG
 * is well formed, names the blocks in hover text, colours states with a
 * legend of the states present, aggregates tiny blocks, reports a failed
 * check, and uses nothing but the public calls.
 */
#include "heapkit/map.h"
#include "hk_test.h"

#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int pieces;
} sbuf;

static void sbuf_print(const char *text, void *user) {
    sbuf *b = user;
    size_t l = strlen(text);
    if (b->n + l + 1 > b->cap) {
        b->cap = (b->n + l + 1) * 2;
        b->s = realloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, text, l + 1);
    b->n += l;
    b->pieces++;
}

static size_t count(const char *s, const char *what) {
    size_t n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

/* Well formed enough: one svg element, balanced groups, closed at the end. */
static void check_svg(const sbuf *b) {
    REQUIRE(b->s != NULL);
    CHECK(strncmp(b->s, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39) == 0);
    CHECK_EQ(count(b->s, "<svg"), 1);
    CHECK(b->n > 7 && strcmp(b->s + b->n - 7, "</svg>\n") == 0);
    CHECK_EQ(count(b->s, "<g "), count(b->s, "</g>"));
    CHECK_EQ(count(b->s, "<title>"), count(b->s, "</title>"));
    CHECK_EQ(count(b->s, "<text"), count(b->s, "</text>"));
}

HKT_TEST(map_zone_states_and_hover_text) {
    hk_zone_desc d = {0};
    d.size = 256 * 1024;
    hk_zone *z = hk_zone_create(&d);
    REQUIRE(z != NULL);
    void *owner = NULL;
    void *a = hk_zone_alloc_tagged(z, 4000, HK_TAG_LEVEL, NULL, "level <lines> & \"walls\"");
    void *b = hk_zone_alloc_tagged(z, 9000, HK_TAG_CACHE, &owner, "sound cache");
    void *c = hk_zone_alloc(z, 20000);
    REQUIRE(a && b && c);
    hk_zone_free(z, c);
    sbuf s = {0};
    hk_map_options o = {0};
    o.title = "zone <test>";
    CHECK_EQ(hk_map_zone(z, &o, sbuf_print, &s), HK_OK);
    check_svg(&s);
    CHECK_STR_CONTAINS(s.s, "zone &lt;test&gt;");
    CHECK_STR_CONTAINS(s.s, "check: <tspan fill=\"#1b7f3b\">ok</tspan>");
    CHECK_STR_CONTAINS(s.s, "'level &lt;lines&gt; &amp; &quot;walls&quot;'"); /* the name, escaped */
    CHECK_STR_CONTAINS(s.s, "tag 50");
    CHECK_STR_CONTAINS(s.s, "purgeable");
    CHECK_STR_CONTAINS(s.s, ">free</text>");
    CHECK(s.pieces > 10);
    free(s.s);
    hk_zone_destroy(z);
}

HKT_TEST(map_hunk_low_high_temp) {
    hk_hunk_desc d = {0};
    d.size = 1 << 20;
    hk_hunk *h = hk_hunk_create(&d);
    REQUIRE(h != NULL);
    REQUIRE(hk_hunk_alloc(h, 100000, "world") != NULL);
    REQUIRE(hk_hunk_alloc_high(h, 50000, "video") != NULL);
    REQUIRE(hk_hunk_alloc_temp(h, 30000) != NULL);
    sbuf s = {0};
    CHECK_EQ(hk_map_hunk(h, NULL, sbuf_print, &s), HK_OK);
    check_svg(&s);
    CHECK_STR_CONTAINS(s.s, "hunk heap map");
    CHECK_STR_CONTAINS(s.s, "'world'");
    CHECK_STR_CONTAINS(s.s, "'video'");
    CHECK_STR_CONTAINS(s.s, ">high end</text>");
    free(s.s);
    hk_hunk_destroy(h);
}

HKT_TEST(map_cache_locked_purgeable_purged) {
    hk_cache_desc d = {0};
    d.size = 256 * 1024;
    hk_cache *c = hk_cache_create(&d);
    REQUIRE(c != NULL);
    hk_cache_handle a = hk_cache_alloc(c, 10000, "locked texture");
    hk_cache_handle b = hk_cache_alloc(c, 20000, "purgeable sound");
    hk_cache_handle p = hk_cache_alloc(c, 5000, "gone");
    REQUIRE(a.value && b.value && p.value);
    CHECK_EQ(hk_cache_lock(c, a), HK_OK);
    CHECK_EQ(hk_cache_set_purgeable(c, b, true), HK_OK);
    CHECK_EQ(hk_cache_set_purgeable(c, p, true), HK_OK);
    CHECK_EQ(hk_cache_purge(c, p), HK_OK);
    sbuf s = {0};
    CHECK_EQ(hk_map_cache(c, NULL, sbuf_print, &s), HK_OK);
    check_svg(&s);
    CHECK_STR_CONTAINS(s.s, ">locked</text>");
    CHECK_STR_CONTAINS(s.s, ">purgeable</text>");
    CHECK_STR_CONTAINS(s.s, "1 purged handles (no memory, not drawn)");
    CHECK_STR_CONTAINS(s.s, "locked 1");
    free(s.s);
    hk_cache_destroy(c);
}

HKT_TEST(map_pool_gc_guard) {
    hk_pool_desc pd = {0};
    pd.elem_size = 48;
    pd.capacity = 64;
    hk_pool *p = hk_pool_create(&pd);
    REQUIRE(p != NULL);
    void *obj;
    for (int i = 0; i < 10; i++) CHECK(hk_pool_alloc(p, &obj).value != 0);
    sbuf s = {0};
    CHECK_EQ(hk_map_pool(p, NULL, sbuf_print, &s), HK_OK);
    check_svg(&s);
    CHECK_STR_CONTAINS(s.s, "pool heap map");
    free(s.s);
    hk_pool_destroy(p);

    hk_gc_desc gd = {0};
    hk_gc *gc = hk_gc_create(&gd);
    REQUIRE(gc != NULL);
    static const hk_gc_type ty = {"node", 32, NULL, NULL, NULL};
    for (int i = 0; i < 5; i++) CHECK(hk_gc_alloc(gc, &ty) != NULL);
    memset(&s, 0, sizeof s);
    CHECK_EQ(hk_map_gc(gc, NULL, sbuf_print, &s), HK_OK);
    check_svg(&s);
    CHECK_STR_CONTAINS(s.s, "gc heap map");
    free(s.s);
    hk_gc_destroy(gc);

    hk_guard_desc gdd = {0};
    hk_guard *g = hk_guard_create(&gdd);
    REQUIRE(g != NULL);
    void *x = hk_guard_alloc(g, 100);
    void *y = hk_guard_alloc(g, 5000);
    REQUIRE(x && y);
    hk_guard_free(g, x);
    memset(&s, 0, sizeof s);
    CHECK_EQ(hk_map_guard(g, NULL, sbuf_print, &s), HK_OK);
    check_svg(&s);
    CHECK_STR_CONTAINS(s.s, "guard heap map");
    free(s.s);
    hk_guard_free(g, y);
    hk_guard_destroy(g);
}

HKT_TEST(map_tiny_blocks_drawn_together) {
    hk_zone_desc d = {0};
    d.size = 8 << 20;
    hk_zone *z = hk_zone_create(&d);
    REQUIRE(z != NULL);
    static void *blocks[20000];
    for (int i = 0; i < 20000; i++) blocks[i] = hk_zone_alloc(z, 24 + (size_t)(i % 7) * 8);
    for (int i = 0; i < 20000; i += 3) hk_zone_free(z, blocks[i]);
    sbuf s = {0};
    hk_map_options o = {0};
    o.width = 600;
    CHECK_EQ(hk_map_zone(z, &o, sbuf_print, &s), HK_OK);
    check_svg(&s);
    CHECK_STR_CONTAINS(s.s, " blocks at 0x");
    /* bounded output: at most about 12 cells per 100 px of every row */
    CHECK(count(s.s, "<g ") < 60 * 600 / 3);
    CHECK(s.n < 4u << 20);
    free(s.s);
    hk_zone_destroy(z);
}

HKT_TEST(map_failed_check_and_options) {
    hkt_errors errs = {0};
    errs.quiet = 1;
    hk_zone_desc d = {0};
    d.size = 128 * 1024;
    d.flags = HK_FLAG_QUIET;
    d.on_error = hkt_on_error;
    d.error_user = &errs;
    hk_zone *z = hk_zone_create(&d);
    REQUIRE(z != NULL);
    unsigned char *a = hk_zone_alloc(z, 256);
    /* hk_zone_alloc is HK_MALLOC / HK_ALLOC_SIZE: hide a's provenance, since
     * the test writes into the granule around the block */
    __asm__ volatile("" : "+r"(a));
    REQUIRE(a != NULL);
    sbuf s = {0};
    hk_map_options o = {0};
    o.flags = HK_MAP_NO_CHECK | HK_MAP_NO_HEADER;
    o.row_bytes = 4096;
    CHECK_EQ(hk_map_zone(z, &o, sbuf_print, &s), HK_OK);
    check_svg(&s);
    CHECK(strstr(s.s, "check:") == NULL);
    CHECK_STR_CONTAINS(s.s, "used</text>");
    free(s.s);
    /* damage in the block's run: the last bytes of its 64 KiB granule's
     * remote bitmap (its first 512 bytes; a small block has no header) mark
     * slots never carved as freed by another thread: the map says so */
    unsigned char *bits = (unsigned char *)((uintptr_t)a & ~(uintptr_t)0xffff) + 496;
    unsigned char saved[16];
    memcpy(saved, bits, 16);
    memset(bits, 0x5a, 16);
    memset(&s, 0, sizeof s);
    (void)hk_map_zone(z, NULL, sbuf_print, &s);
    check_svg(&s);
    CHECK(strstr(s.s, "check: <tspan fill=\"#c0392b\">") != NULL);
    CHECK(errs.count > 0); /* the check reported what broke */
    free(s.s);
    memcpy(bits, saved, 16);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
    /* bad arguments */
    hk_stats st = {0};
    CHECK_EQ(hk_map_zone(NULL, NULL, sbuf_print, &s), HK_ERR_INVALID);
    CHECK_EQ(hk_map_heap(NULL, &st, NULL, HK_OK, NULL, sbuf_print, &s), HK_ERR_INVALID);
}
