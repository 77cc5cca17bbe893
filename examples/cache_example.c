/* examples/cache_example.c - a cache of assets living in a hunk's free
 * middle: the level loads on the hunk, assets come and go in the cache,
 * purgeable ones are thrown out when memory is short, and code reaches them
 * through handles (deref after anything that may move blocks). */
#include <heapkit/cache.h>
#include <heapkit/hunk.h>

#include <stdio.h>
#include <string.h>

static void purged(hk_cache *c, hk_cache_handle h, void *data, size_t size, void *user) {
    (void)c;
    (void)data;
    (void)user;
    printf("  purged handle %08x (%zu bytes)\n", h.value, size);
}

int main(void) {
    hk_hunk *hunk = hk_hunk_create(&(hk_hunk_desc){.size = 1 << 20, .name = "main"});
    hk_cache *cache = hk_cache_create(&(hk_cache_desc){.hunk = hunk, .name = "assets", .on_purge = purged});
    if (!hunk || !cache) return 1;

    hk_cache_handle skin = hk_cache_alloc(cache, 64 * 1024, "skin");
    hk_cache_handle sound = hk_cache_alloc(cache, 300 * 1024, "sound");
    memset(hk_cache_deref(cache, skin), 7, 64 * 1024);
    hk_cache_set_purgeable(cache, sound, true); /* can be reloaded from disk */

    /* The level grows the hunk into the cache: the skin moves, the sound may go. */
    void *level = hk_hunk_alloc(hunk, 700 * 1024, "level");
    unsigned char *p = hk_cache_deref(cache, skin); /* deref again: it moved */
    printf("level %s, skin still holds %d, sound %s\n", level ? "loaded" : "failed", p ? p[100] : -1,
           hk_cache_is_purged(cache, sound) ? "purged" : "resident");
    if (hk_cache_is_purged(cache, sound) && hk_cache_reallocate(cache, sound, 100 * 1024) == HK_OK)
        printf("sound reloaded at a smaller size\n");

    hk_cache_dump(cache, hk_print_file, stdout); /* MacsBug-style heap display */
    int ok = hk_cache_check(cache) == HK_OK && hk_hunk_check(hunk) == HK_OK;
    hk_cache_destroy(cache);
    hk_hunk_destroy(hunk);
    return ok ? 0 : 1;
}
