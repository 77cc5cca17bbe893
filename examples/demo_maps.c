/*
 * examples/demo_maps.c - heap maps of a small game's memory, level by level
 * (`make demo` runs it; heapkit/map.h draws them):
 *
 *   demo_maps [DIR]     writes DIR/{hunk,zone,cache}_level{1,2,3}.svg [demo]
 *
 * The layout is examples/demo.c's: one hunk, a zone carved out of it, a
 * cache of textures in its free middle. Each level loads tagged zone blocks,
 * hunk geometry and textures (some locked, some purgeable); the maps are
 * taken with the level loaded, before it is freed. The program also keeps
 * "script strings" in malloc, so that `heapkit record` of it gives a trace
 * worth a report (make demo writes that report next to the maps).
 */
#include <heapkit/map.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#ifdef _WIN32
#include <direct.h> /* _mkdir */
#endif

static void write_map(const char *dir, const char *what, int level,
                      hk_result (*draw)(void *heap, const char *title, FILE *f), void *heap) {
    char path[1024], title[128];
    snprintf(path, sizeof path, "%s/%s_level%d.svg", dir, what, level);
    snprintf(title, sizeof title, "%s, level %d loaded", what, level);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return;
    }
    draw(heap, title, f);
    fclose(f);
    printf("  %s\n", path);
}

static hk_result draw_hunk(void *h, const char *title, FILE *f) {
    hk_map_options o = {.title = title};
    return hk_map_hunk(h, &o, hk_print_file, f);
}
static hk_result draw_zone(void *z, const char *title, FILE *f) {
    hk_map_options o = {.title = title};
    return hk_map_zone(z, &o, hk_print_file, f);
}
static hk_result draw_cache(void *c, const char *title, FILE *f) {
    hk_map_options o = {.title = title};
    return hk_map_cache(c, &o, hk_print_file, f);
}

/* malloc traffic: a script's strings, most short-lived, a few kept. */
static char *g_kept[64];
static int g_nkept;
static void run_script(int level) {
    for (int i = 0; i < 2000 * level; i++) {
        size_t n = 16 + (size_t)(i * 37 % 500);
        char *s = malloc(n);
        if (!s) return;
        memset(s, 'a', n - 1);
        s[n - 1] = 0;
        if (i % 97 == 0 && g_nkept < 64)
            g_kept[g_nkept++] = s; /* kept (and left for the leak table) */
        else
            free(s);
    }
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "demo";
#ifdef _WIN32
    _mkdir(dir);
#else
    mkdir(dir, 0755);
#endif
    hk_hunk *hunk = hk_hunk_create(&(hk_hunk_desc){.size = 8u << 20, .name = "main"});
    if (!hunk) return 1;
    hk_hunk_alloc(hunk, 256 * 1024, "gfx.wad");
    hk_hunk_alloc_high(hunk, 320 * 200, "video");
    size_t zone_bytes = 512 * 1024;
    void *zone_mem = hk_hunk_alloc(hunk, zone_bytes, "zone");
    hk_zone *zone = hk_zone_create(&(hk_zone_desc){.memory = zone_mem, .size = zone_bytes, .name = "zone"});
    hk_hunk_mark engine = hk_hunk_low_mark(hunk);
    hk_cache *cache = hk_cache_create(&(hk_cache_desc){.hunk = hunk, .name = "assets"});
    if (!zone || !cache) return 1;
    hk_cache_handle tex[12] = {{0}};
    void *sound_owner[8] = {0};
    printf("heap maps:\n");
    for (int level = 1; level <= 3; level++) {
        hk_hunk_alloc(hunk, (size_t)(600 + 200 * level) * 1024, "world");
        for (int i = 0; i < 200; i++)
            hk_zone_alloc_tagged(zone, 256 + (size_t)i * 8, HK_TAG_LEVEL, NULL, "lines");
        for (int i = 0; i < 8; i++)
            if (!sound_owner[i]) hk_zone_alloc_tagged(zone, 4096, HK_TAG_CACHE, &sound_owner[i], "sound");
        for (int i = 0; i < 12; i++) {
            if (!tex[i].value || hk_cache_is_purged(cache, tex[i])) {
                if (tex[i].value) hk_cache_free(cache, tex[i]);
                tex[i] = hk_cache_alloc(cache, (size_t)(24 + 8 * (i % 4)) * 1024, "texture");
                hk_cache_set_purgeable(cache, tex[i], i >= 6);
            }
        }
        hk_cache_lock(cache, tex[level]); /* in use while the level runs */
        run_script(level);
        write_map(dir, "hunk", level, draw_hunk, hunk);
        write_map(dir, "zone", level, draw_zone, zone);
        write_map(dir, "cache", level, draw_cache, cache);
        hk_cache_unlock(cache, tex[level]);
        hk_zone_free_tags(zone, HK_TAG_LEVEL, HK_TAG_PURGELEVEL - 1);
        hk_hunk_free_to_low_mark(hunk, engine);
    }
    int ok = hk_hunk_check(hunk) == HK_OK && hk_zone_check(zone) == HK_OK && hk_cache_check(cache) == HK_OK;
    hk_cache_destroy(cache);
    hk_zone_destroy(zone);
    hk_hunk_destroy(hunk);
    printf("(open them in a browser; hover a cell to name its block)\n");
    return ok ? 0 : 1;
}
