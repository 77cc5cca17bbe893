/*
 * examples/demo.c - `make demo`: heapkit's main demonstration.
 *
 * The memory life of a small game, laid out the way Quake laid out its one
 * big block, with every heapkit allocator in its place:
 *
 *   hunk   the one big block: engine data at the bottom, levels above it
 *          (freed back to a mark), the video buffer at the top;
 *   zone   a heap carved out of the hunk (as Quake's was): tagged blocks,
 *          freed by tag when a level ends, cached blocks purged when short;
 *   cache  textures and sounds in the hunk's free middle, reached through
 *          handles, moved out of the way when a level needs the room;
 *   pool   the game's entities, addressed by generational IDs: a stale ID
 *          gives NULL instead of a use-after-free;
 *   gc     the script VM's objects, collected a few microseconds per frame;
 *   guard  (not shown here: it stops the program) run any program under
 *          `build/heapkit guard -- prog` to catch overruns and
 *          use-after-free with stack traces.
 *
 * Every allocation is checked at the end, and misuse along the way is
 * reported through one error hook instead of corrupting anything.
 */
#include <heapkit/cache.h>
#include <heapkit/gc.h>
#include <heapkit/hunk.h>
#include <heapkit/pool.h>
#include <heapkit/zone.h>

#include <stdio.h>
#include <string.h>

static int g_reports;
static void on_error(const hk_error *e, void *user) {
    (void)user;
    g_reports++;
    printf("    [report] %s\n", e->message);
}

/* ---- the script VM: structs that reference each other ------------------ */

typedef struct script_obj {
    hk_gc_obj *next;
    int value;
} script_obj;

static void script_trace(void *data, size_t size, hk_gc_visit_fn visit, void *ctx, void *user) {
    (void)size;
    (void)user;
    visit(((script_obj *)data)->next, ctx);
}
static const hk_gc_type k_script = {"struct", sizeof(script_obj), script_trace, NULL, NULL};

/* ---- entities ------------------------------------------------------------ */

typedef struct entity {
    float x, y;
    int hp;
} entity;

typedef struct game {
    hk_hunk *hunk;
    hk_zone *zone;
    hk_cache *cache;
    hk_pool *ents;
    hk_gc *gc;
    hk_cache_handle textures[8];
} game;

static void load_level(game *g, int n) {
    /* Level geometry on the hunk: the cache moves out of its way. */
    hk_hunk_alloc(g->hunk, (size_t)(600 + 200 * n) * 1024, "world");
    /* Level data in the zone, tagged so that one call frees it all. */
    for (int i = 0; i < 200; i++)
        hk_zone_alloc_tagged(g->zone, 256 + (size_t)i * 8, HK_TAG_LEVEL, NULL, "lines");
    /* Textures in the cache; the big ones may be purged and reloaded. */
    for (int i = 0; i < 8; i++) {
        if (!g->textures[i].value || hk_cache_is_purged(g->cache, g->textures[i])) {
            if (g->textures[i].value) hk_cache_free(g->cache, g->textures[i]);
            g->textures[i] = hk_cache_alloc(g->cache, 48 * 1024, "texture");
            hk_cache_set_purgeable(g->cache, g->textures[i], i >= 4);
        }
    }
}

static void play_frame(game *g, hk_pool_id *ids, int nids, int frame) {
    /* Entities: a few die, new ones spawn in their slots. */
    for (int i = frame % 7; i < nids; i += 7) {
        hk_pool_free(g->ents, ids[i], HK_POOL_FREE_SUBTREE);
        entity *e;
        ids[i] = hk_pool_alloc(g->ents, (void **)&e);
        if (e) e->hp = 100;
    }
    /* Textures: reached through handles every frame (deref, never cache the address). */
    for (int i = 0; i < 8; i++) {
        unsigned char *t = hk_cache_deref(g->cache, g->textures[i]);
        if (t) t[frame % 1024] = (unsigned char)frame;
    }
    /* Scratch on the hunk's high end for the frame, and the script's garbage. */
    hk_hunk_mark scratch = hk_hunk_high_mark(g->hunk);
    hk_hunk_alloc_high(g->hunk, 4096, "frame");
    for (int i = 0; i < 300; i++) hk_gc_release(g->gc, hk_gc_alloc(g->gc, &k_script));
    hk_gc_step(g->gc, 20 * 1000); /* 20 microseconds of collection */
    hk_hunk_free_to_high_mark(g->hunk, scratch);
}

int main(void) {
    printf("heapkit %d.%d.%d demo\n\n", HK_VERSION_MAJOR, HK_VERSION_MINOR, HK_VERSION_PATCH);
    game g;
    memset(&g, 0, sizeof g);

    g.hunk = hk_hunk_create(&(hk_hunk_desc){.size = 8u << 20, .name = "main", .on_error = on_error});
    if (!g.hunk) return 1;
    hk_hunk_alloc(g.hunk, 256 * 1024, "gfx.wad");   /* engine data, kept for good */
    hk_hunk_alloc_high(g.hunk, 320 * 200, "video"); /* the frame buffer, on top */
    size_t zone_bytes = 512 * 1024;                 /* the zone lives in the hunk */
    void *zone_mem = hk_hunk_alloc(g.hunk, zone_bytes, "zone");
    g.zone = hk_zone_create(
        &(hk_zone_desc){.memory = zone_mem, .size = zone_bytes, .name = "zone", .on_error = on_error});
    hk_pool_desc pd = {0};
    pd.elem_size = sizeof(entity);
    pd.capacity = 1024;
    pd.name = "entities";
    pd.on_error = on_error;
    g.ents = hk_pool_create(&pd);
    g.gc = hk_gc_create(&(hk_gc_desc){.name = "script", .pace_bytes = 64 * 1024, .on_error = on_error});
    hk_hunk_mark engine = hk_hunk_low_mark(g.hunk);
    /* The cache takes whatever the hunk's middle has free, and gives it back on demand. */
    g.cache = hk_cache_create(&(hk_cache_desc){.hunk = g.hunk, .name = "assets", .on_error = on_error});
    if (!g.zone || !g.ents || !g.gc || !g.cache) return 1;

    hk_pool_id ids[200];
    for (int i = 0; i < 200; i++) ids[i] = hk_pool_alloc(g.ents, NULL);

    for (int level = 1; level <= 3; level++) {
        load_level(&g, level);
        for (int frame = 0; frame < 120; frame++) play_frame(&g, ids, 200, frame);
        hk_stats hs, zs, cs, ps;
        hk_gc_info gi;
        hk_hunk_stats(g.hunk, &hs);
        hk_zone_stats(g.zone, &zs);
        hk_cache_stats(g.cache, &cs);
        hk_pool_stats(g.ents, &ps);
        hk_gc_get_info(g.gc, &gi);
        printf(
            "level %d, 120 frames: hunk %zu KiB in use; zone %zu blocks; cache %zu textures in %zu KiB;\n"
            "  %zu entities (%llu created); script: %llu objects collected, backlog %zu, step p99 %llu ns\n",
            level, hs.used_blocks_bytes / 1024, zs.live_blocks, cs.live_blocks, cs.capacity / 1024,
            ps.live_blocks, (unsigned long long)ps.alloc_count, (unsigned long long)gi.freed, gi.backlog,
            (unsigned long long)gi.step_p99_ns);
        /* Level exit: one call per allocator, whatever was allocated. */
        size_t freed = hk_zone_free_tags(g.zone, HK_TAG_LEVEL, HK_TAG_PURGELEVEL - 1);
        hk_hunk_free_to_low_mark(g.hunk, engine);
        printf("  unloaded: %zu zone blocks freed by tag, hunk back to its mark\n", freed);
    }

    printf("\nthe hunk at the end (Hunk_Print):\n");
    hk_hunk_dump(g.hunk, hk_print_file, stdout);
    printf("\nthe cache (MacsBug hd):\n");
    hk_cache_dump(g.cache, hk_print_file, stdout);

    printf("\nmistakes are reported, and nothing is damaged:\n");
    hk_pool_id dead = ids[0];
    hk_pool_free(g.ents, dead, HK_POOL_FREE_SUBTREE);
    entity *e = hk_pool_get(g.ents, dead);
    printf("  entity by a stale ID: %s\n", e ? "found (bug!)" : "NULL, no use-after-free");
    hk_pool_free(g.ents, dead, HK_POOL_FREE_SUBTREE); /* double free */
    void *p = hk_zone_alloc(g.zone, 100);
    hk_zone_free(g.zone, p);
    hk_zone_free(g.zone, p);                       /* double free */
    hk_zone_free(g.zone, (char *)zone_mem - 4096); /* not the zone's */
    hk_cache_unlock(g.cache, g.textures[0]);       /* not locked */
    hk_hunk_alloc(g.hunk, 64u << 20, "too big");   /* exhaustion */

    size_t collected = hk_gc_collect(g.gc);
    int ok = hk_hunk_check(g.hunk) == HK_OK && hk_zone_check(g.zone) == HK_OK &&
             hk_cache_check(g.cache) == HK_OK && hk_pool_check(g.ents) == HK_OK && hk_gc_check(g.gc) == HK_OK;
    printf("\nfull script collection: %zu objects; %d reports; every heap check: %s\n", collected, g_reports,
           ok ? "ok" : "FAILED");

    hk_cache_destroy(g.cache);
    hk_gc_destroy(g.gc);
    hk_pool_destroy(g.ents);
    hk_zone_destroy(g.zone);
    hk_hunk_destroy(g.hunk);
    return ok ? 0 : 1;
}
