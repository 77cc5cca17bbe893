/*
 * ports/doom/stock-zone-stats.c - appended by build.sh to the stock
 * engine's z_zone.c (so it sees that file's static mainzone) to give the
 * figures hk_sync.c samples: used and free bytes (block headers count as
 * used), the largest free block, the blocks in use and the purges counted
 * by the one-line edit build.sh makes in Z_Malloc's purge loop.
 * Invariant: reads the block list only; never changes the zone.
 */
unsigned long hk_stock_purges;

void HK_ZoneSample(unsigned long *used, unsigned long *free_bytes, unsigned long *largest,
                   unsigned long *blocks, unsigned long *purges) {
    memblock_t *b;
    *used = *free_bytes = *largest = *blocks = 0;
    for (b = mainzone->blocklist.next; b != &mainzone->blocklist; b = b->next) {
        if (b->tag == PU_FREE) {
            *free_bytes += (unsigned long)b->size;
            if ((unsigned long)b->size > *largest) *largest = (unsigned long)b->size;
        } else {
            *used += (unsigned long)b->size;
            (*blocks)++;
        }
    }
    /* a free block serves a request of its size minus the header */
    if (*largest >= sizeof(memblock_t)) *largest -= sizeof(memblock_t);
    *purges = hk_stock_purges;
}

/* The stock engine draws no heap map (hk_sync.c's -hkmap). */
void HK_ZoneMap(const char *path, const char *title) {
    (void)path;
    (void)title;
}
