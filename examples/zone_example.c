/* The zone in a few lines: DOOM-style tags, owners, purging and free_tags. */
#include <heapkit/zone.h>
#include <stdio.h>
#include <string.h>

static unsigned char heap[1 << 20]; /* caller memory: no OS calls at all */

int main(void) {
    hk_zone *z = hk_zone_create(&(hk_zone_desc){.memory = heap, .size = sizeof heap, .name = "main"});
    if (!z) return 1;

    char *console = hk_zone_alloc(z, 256); /* Quake's Z_Malloc: tag HK_TAG_STATIC */
    strcpy(console, "] map e1m1");

    void *map = NULL, *sound = NULL; /* owner pointers, cleared by the zone */
    hk_zone_alloc_tagged(z, 64 << 10, HK_TAG_LEVEL, &map, "e1m1 lines");
    hk_zone_alloc_tagged(z, 8 << 10, HK_TAG_CACHE, &sound, "dspistol");

    hk_zone_dump(z, hk_print_file, stdout);                                   /* Z_DumpHeap */
    size_t purged = hk_zone_purge(z, HK_TAG_PURGELEVEL);                      /* cached data goes first */
    size_t freed = hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_PURGELEVEL - 1); /* level exit */
    printf("purged %zu, freed %zu, sound %s, map %s, console \"%s\"\n", purged, freed,
           sound ? "kept" : "NULL", map ? "kept" : "NULL", console);

    int ok = hk_zone_check(z) == HK_OK && !map && !sound;
    hk_zone_free(z, console);
    hk_zone_destroy(z);
    return ok ? 0 : 1;
}
