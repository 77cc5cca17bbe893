/*
 * examples/demo.c - `make demo`: heapkit's main demonstration.
 *
 * A small game's memory life: the engine loads its permanent data, then
 * loads levels, plays frames and unloads them again, the way Quake used its
 * hunk. Every allocation is named, so the summary printed at the end tells
 * where the memory went, and the heap check proves nothing was damaged.
 */
#include <heapkit/heapkit.h>
#include <heapkit/hunk.h>

#include <stdio.h>
#include <string.h>

static void on_error(const hk_error *e, void *user) {
    (void)user;
    printf("  [heapkit report] %s\n", e->message);
}

/* "Loading" an asset: allocate it on the low end and fill it in. */
static void *load_asset(hk_hunk *h, const char *name, size_t bytes) {
    unsigned char *p = hk_hunk_alloc(h, bytes, name);
    if (p) memset(p, 0x2a, bytes);
    return p;
}

static void play_frames(hk_hunk *h, int frames) {
    for (int f = 0; f < frames; f++) {
        /* Per-frame scratch on the high end, released at the end of the frame. */
        hk_hunk_mark frame = hk_hunk_high_mark(h);
        for (int i = 0; i < 200; i++) {
            char *msg = hk_hunk_alloc_high(h, 64 + (size_t)(i % 7) * 16, "frame");
            if (msg) snprintf(msg, 64, "entity %d think", i);
        }
        /* A file read into the temp block, gone at the next high allocation. */
        char *file = hk_hunk_alloc_temp(h, 16 * 1024);
        if (file) memset(file, 0, 16 * 1024);
        hk_hunk_free_to_high_mark(h, frame);
    }
}

int main(void) {
    printf("heapkit %d.%d.%d demo: a level-load cycle on the hunk\n\n", HK_VERSION_MAJOR, HK_VERSION_MINOR,
           HK_VERSION_PATCH);
    hk_hunk_desc desc = {0};
    desc.size = 8u << 20; /* Quake's 8 MiB */
    desc.name = "main";
    desc.on_error = on_error;
    hk_hunk *h = hk_hunk_create(&desc);
    if (!h) {
        fprintf(stderr, "could not create the hunk\n");
        return 1;
    }

    /* Permanent data, below every level. */
    load_asset(h, "console", 32 * 1024);
    load_asset(h, "gfx.wad", 256 * 1024);
    hk_hunk_alloc_high(h, 320 * 200, "video"); /* the video buffer lives on the high end */
    hk_hunk_mark engine = hk_hunk_low_mark(h);

    const char *levels[] = {"e1m1", "e1m2", "e1m3"};
    for (int l = 0; l < 3; l++) {
        load_asset(h, "world", (size_t)(900 + 300 * l) * 1024);
        for (int m = 0; m < 12; m++) load_asset(h, "models", 24 * 1024);
        load_asset(h, "sounds", 180 * 1024);
        hk_stats st;
        hk_hunk_stats(h, &st);
        printf("level %s loaded: %zu blocks, %zu KiB in use, %zu KiB free\n", levels[l], st.live_blocks,
               st.used_blocks_bytes / 1024, st.free / 1024);
        play_frames(h, 100);
        if (l == 2) {
            printf("\nsummary while %s is loaded (Hunk_Print):\n", levels[l]);
            hk_hunk_print(h, stdout);
            printf("\n");
        }
        hk_hunk_free_to_low_mark(h, engine); /* unload the level */
    }

    /* Mistakes are reported, not fatal: a level too big for the hunk, and a
     * mark that went stale when the level it pointed into was unloaded. */
    printf("\nwhat misuse looks like:\n");
    hk_hunk_mark inside = hk_hunk_low_mark(h);
    load_asset(h, "world", 1024);
    hk_hunk_mark stale = hk_hunk_low_mark(h);
    hk_hunk_free_to_low_mark(h, inside);
    load_asset(h, "world", 4096);
    load_asset(h, "huge", 64u << 20);
    hk_hunk_free_to_low_mark(h, stale);
    hk_hunk_free_to_low_mark(h, engine);

    hk_stats st;
    hk_hunk_stats(h, &st);
    hk_result check = hk_hunk_check(h);
    printf("\nafter unloading: %zu blocks, peak %zu KiB of %zu KiB, %llu allocations, %llu reports; check: %s\n",
           st.live_blocks, st.peak_used / 1024, st.capacity / 1024, (unsigned long long)st.alloc_count,
           (unsigned long long)st.error_count, hk_result_str(check));
    hk_hunk_destroy(h);
    return check == HK_OK ? 0 : 1;
}
