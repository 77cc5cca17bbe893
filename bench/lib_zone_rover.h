/* bench/lib_zone_rover.h - the Quake-style rover first-fit zone, the
 * historical baseline of the zone suite (see lib_zone_rover.c). */
#ifndef HEAPKIT_BENCH_ZONE_ROVER_H
#define HEAPKIT_BENCH_ZONE_ROVER_H

#include <stddef.h>

typedef struct hkb_rover hkb_rover;

hkb_rover *hkb_rover_create(void *mem, size_t size);
void *hkb_rover_alloc(hkb_rover *z, size_t size, int tag);
void hkb_rover_free(hkb_rover *z, void *p);
void *hkb_rover_realloc(hkb_rover *z, void *p, size_t size);
size_t hkb_rover_usable(hkb_rover *z, void *p);
size_t hkb_rover_free_tags(hkb_rover *z, int lo, int hi); /* DOOM Z_FreeTags: walks the heap */
size_t hkb_rover_blocks(hkb_rover *z);
unsigned char *hkb_rover_base(hkb_rover *z);

#endif
