/*
 * ports/doom/z_zone.c - Chocolate Doom's zone (every function of its
 * z_zone.h) on heapkit's zone, through heapkit's public API only. build.sh
 * puts this file in place of the engine's own z_zone.c in a copy of the
 * engine's source, fetched at build time (the engine is GPL-2 and never
 * enters this repository; this file is heapkit's).
 *
 * Invariants:
 * - One fixed zone, on the memory the engine asks for (I_ZoneBase, sized
 *   by -mb as for the original; -kb N, ours, asks for N KiB instead). It
 *   never grows: like the original, a request that cannot be met after
 *   purging fails, through I_Error with heapkit's report.
 * - Tags map one to one, in order: PU_STATIC, PU_SOUND, PU_MUSIC to
 *   heapkit's STATIC, SOUND, MUSIC; PU_LEVEL, PU_LEVSPEC to LEVEL,
 *   LEVSPEC; PU_PURGELEVEL, PU_CACHE to PURGELEVEL, CACHE (purgeable). So a
 *   range of DOOM tags maps to a range of heapkit tags holding exactly the
 *   mapped tags, and Z_FreeTags is one hk_zone_free_tags.
 * - The engine's user pointer is the block's owner: set when the block is
 *   made, cleared when it is freed, freed by tag or purged (oldest first).
 * - Loading packs what stays: while the engine loads (from Z_Init to the
 *   first level change, and from each level change to the level's first
 *   purgeable request, which in DOOM is R_PrecacheLevel's) every request
 *   for a block that stays (a tag below PU_PURGELEVEL) first purges every
 *   purgeable block. Loading interleaves such blocks with cached lumps
 *   (R_InitTextures caches each patch between the texture's own blocks;
 *   P_SetupLevel releases each map lump between the level's arrays): in a
 *   good-fit heap the lasting blocks would otherwise land in the holes the
 *   cache leaves, scattered over the zone, and split it into pieces too
 *   small for the next level's large arrays (freedoom2's demo1 then fails
 *   at 3 MiB with 2.1 MiB free in 60 pieces). DOOM's rover packs them by
 *   walking: a purge frees the block in front of the rover, and the next
 *   block goes right after the last one that stays. The purges only cost
 *   time (the cache reloads); play is the same, a purged block's user is
 *   cleared as DOOM expects.
 * - A cached lump's purge order is the order of its last tag change, not of
 *   its last use: Z_ChangeTag2 to the tag a block already has changes
 *   nothing (as DOOM's), so the renderer's re-requests cost no list work.
 * - No error passes silently: each failing heapkit call ends the engine
 *   with I_Error and the report heapkit gave (kept by on_error).
 */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "heapkit/map.h"
#include "heapkit/zone.h"

#include "doomtype.h"
#include "i_system.h"
#include "m_argv.h"
#include "z_zone.h"

static hk_zone *zone;
static unsigned int zone_bytes;
/* Loading (see Z_Malloc): STARTUP from Z_Init to the first level change,
 * LEVEL from each level change to the level's first purgeable request. */
enum { PLAYING, STARTUP, LEVEL };
static int loading = STARTUP;
static char last_error[512];
/* The tag of recent blocks by address (direct-mapped). Every block is made
 * by Z_Malloc and changes tag only through Z_ChangeTag2, which both write
 * the entry, so an entry naming a block holds its tag: Z_ChangeTag2 to the
 * tag a block has already returns at once (see there). */
#define TAG_CACHE 4096
static struct {
    void *p;
    int tag;
} tag_cache[TAG_CACHE];

static unsigned tag_slot(const void *p) {
    return (unsigned)((((uintptr_t)p >> 4) * 2654435761u) % TAG_CACHE);
}

static void on_error(const hk_error *err, void *user) {
    (void)user;
    snprintf(last_error, sizeof last_error, "%s", err->message != NULL ? err->message : "?");
}

static const int tag_map[PU_NUM_TAGS] = {0,
                                         HK_TAG_STATIC,
                                         HK_TAG_SOUND,
                                         HK_TAG_MUSIC,
                                         4 /* PU_FREE: no block has it */,
                                         HK_TAG_LEVEL,
                                         HK_TAG_LEVSPEC,
                                         HK_TAG_PURGELEVEL,
                                         HK_TAG_CACHE};

static int map_tag(int tag, const char *who) {
    if (tag < PU_STATIC || tag >= PU_NUM_TAGS || tag == PU_FREE) I_Error("%s: bad tag %i", who, tag);
    return tag_map[tag];
}

void Z_Init(void) {
    hk_zone_desc d;
    byte *mem;
    int size, p;

    p = M_CheckParmWithArgs("-kb", 1);
    if (p > 0) {
        size = atoi(myargv[p + 1]) * 1024;
        mem = malloc((size_t)size);
        if (size <= 0 || mem == NULL) I_Error("Z_Init: cannot take %s KiB", myargv[p + 1]);
        printf("zone memory: %p, %x allocated for zone\n", (void *)mem, (unsigned)size);
    } else {
        mem = I_ZoneBase(&size);
    }
    memset(&d, 0, sizeof d);
    d.memory = mem;
    d.size = (size_t)size;
    d.name = "doom";
    d.on_error = on_error;
    /* -zonedebug (ours): a canary after every block, new and freed memory
     * filled with patterns; with hk_sync.c's -zonecheck every tic checks them */
    if (M_ParmExists("-zonedebug")) d.flags |= HK_FLAG_CANARY | HK_FLAG_FILL;
    zone = hk_zone_create(&d);
    if (zone == NULL) I_Error("Z_Init: heapkit: %s", last_error);
    zone_bytes = (unsigned int)size;
}

void *Z_Malloc(int size, int tag, void *user) {
    void *p;
    int t = map_tag(tag, "Z_Malloc");
    if (size < 0) I_Error("Z_Malloc: negative size %i", size);
    if (user == NULL && tag >= PU_PURGELEVEL) I_Error("Z_Malloc: an owner is required for purgable blocks");
    if (tag >= PU_PURGELEVEL) {
        if (loading == LEVEL) loading = PLAYING;
    } else if (loading != PLAYING) {
        hk_zone_purge(zone, 0);
    }
    p = hk_zone_alloc_tagged(zone, (size_t)size, t, (void **)user, NULL);
    if (p == NULL) I_Error("Z_Malloc: failed on allocation of %i bytes (heapkit: %s)", size, last_error);
    tag_cache[tag_slot(p)].p = p;
    tag_cache[tag_slot(p)].tag = tag;
    return p;
}

void Z_Free(void *ptr) {
    if (tag_cache[tag_slot(ptr)].p == ptr) tag_cache[tag_slot(ptr)].p = NULL;
    if (hk_zone_free(zone, ptr) != HK_OK) I_Error("Z_Free: heapkit: %s", last_error);
}

void Z_FreeTags(int lowtag, int hightag) {
    if (lowtag < PU_STATIC) lowtag = PU_STATIC;
    if (hightag >= PU_NUM_TAGS) hightag = PU_NUM_TAGS - 1;
    if (lowtag > hightag) return;
    if (lowtag <= PU_LEVEL && hightag >= PU_LEVEL) {
        hk_zone_purge(zone, 0);
        loading = LEVEL;
    }
    hk_zone_free_tags(zone, tag_map[lowtag], tag_map[hightag]);
}

/* Z_DumpHeap's walk: the blocks of one range of heapkit tags. */
struct dump_range {
    int lo, hi;
};

static int dump_block(const hk_block_info *b, void *user) {
    const struct dump_range *r = user;
    if ((b->flags & HK_BLOCK_USED) && b->tag >= r->lo && b->tag <= r->hi)
        printf("block:%p    size:%7lu    user:%p    tag:%3i\n", b->address, (unsigned long)b->size, b->owner,
               (int)b->tag);
    return 0;
}

void Z_DumpHeap(int lowtag, int hightag) {
    struct dump_range r;
    printf("zone size: %u  (heapkit)\ntag range: %i to %i\n", zone_bytes, lowtag, hightag);
    if (lowtag < PU_STATIC) lowtag = PU_STATIC;
    if (hightag >= PU_NUM_TAGS) hightag = PU_NUM_TAGS - 1;
    if (lowtag > hightag) return;
    r.lo = tag_map[lowtag];
    r.hi = tag_map[hightag];
    hk_zone_walk(zone, dump_block, &r);
    if (hk_zone_check(zone) != HK_OK) printf("ERROR: %s\n", last_error);
}

void Z_FileDumpHeap(FILE *f) {
    fprintf(f, "zone size: %u  (heapkit)\n", zone_bytes);
    hk_zone_dump(zone, hk_print_file, f);
}

void Z_CheckHeap(void) {
    if (hk_zone_check(zone) != HK_OK) I_Error("Z_CheckHeap: heapkit: %s", last_error);
}

void Z_ChangeTag2(void *ptr, int tag, const char *file, int line) {
    int t = map_tag(tag, "Z_ChangeTag");
    unsigned k = tag_slot(ptr);
    /* The renderer asks for every patch, flat and sprite it draws
     * (W_CacheLumpNum), and each lump already cached is given its tag
     * again: 668 thousand calls in freedoom2's demo4, most to the tag the
     * block has. heapkit's change_tag would move the block to the newest
     * end of its tag's list each time (244 instructions a call); DOOM's
     * only sets the tag, and so does this. */
    if (tag_cache[k].p == ptr && tag_cache[k].tag == tag) return;
    if (hk_zone_change_tag(zone, ptr, t) != HK_OK)
        I_Error("%s:%i: Z_ChangeTag: heapkit: %s", file, line, last_error);
    tag_cache[k].p = ptr;
    tag_cache[k].tag = tag;
}

/* heapkit's public API sets a block's owner only when it makes the block:
 * a new owner for a live block cannot be given. The doom engine never
 * calls this (heretic, hexen and strife do); asking for the owner the
 * block already has is accepted. */
void Z_ChangeUser(void *ptr, void **user) {
    hk_block_info b;
    if (hk_zone_where(zone, ptr, &b) != HK_OK || b.address != ptr)
        I_Error("Z_ChangeUser: not a block: %p", ptr);
    if (b.owner != (void *)user) I_Error("Z_ChangeUser: heapkit's zone cannot give a live block a new owner");
    *user = ptr;
}

/* Z_FreeMemory: free bytes plus the bytes of purgeable blocks. */
static int sum_purgeable(const hk_block_info *b, void *user) {
    if ((b->flags & HK_BLOCK_USED) && (b->flags & HK_BLOCK_PURGEABLE))
        *(size_t *)user += b->size + b->overhead;
    return 0;
}

int Z_FreeMemory(void) {
    hk_stats s;
    size_t n = 0;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.version = HK_STATS_VERSION;
    hk_zone_stats(zone, &s);
    hk_zone_walk(zone, sum_purgeable, &n);
    return (int)(s.free + n);
}

unsigned int Z_ZoneSize(void) { return zone_bytes; }

/* For ports/doom/hk_sync.c (check-doom's figures and heap maps). */
void HK_ZoneSample(unsigned long *used, unsigned long *free_bytes, unsigned long *largest,
                   unsigned long *blocks, unsigned long *purges);
void HK_ZoneMap(const char *path, const char *title);

void HK_ZoneSample(unsigned long *used, unsigned long *free_bytes, unsigned long *largest,
                   unsigned long *blocks, unsigned long *purges) {
    hk_stats s;
    hk_zone_info zi;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.version = HK_STATS_VERSION;
    hk_zone_stats(zone, &s);
    hk_zone_get_info(zone, &zi);
    *used = (unsigned long)s.used_blocks_bytes;
    *free_bytes = (unsigned long)s.free;
    *largest = (unsigned long)s.largest_free;
    *blocks = (unsigned long)s.live_blocks;
    *purges = (unsigned long)zi.purge_count;
}

void HK_ZoneMap(const char *path, const char *title) {
    hk_map_options o;
    FILE *f = fopen(path, "w");
    if (f == NULL) I_Error("HK_ZoneMap: cannot write %s", path);
    memset(&o, 0, sizeof o);
    o.title = title;
    hk_map_zone(zone, &o, hk_print_file, f);
    fclose(f);
}
