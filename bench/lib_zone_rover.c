/*
 * bench/lib_zone_rover.c - the historical baseline: a Quake-style zone
 * (Z_TagMalloc / Z_Free, zone.c of 1996) written for the benchmark.
 *
 * One region holds a doubly linked list of blocks in address order; a rover
 * points just past the last allocation. Allocation walks from the rover,
 * first fit, merging nothing on the way (free neighbours are merged on free),
 * so its cost grows with the number of blocks between the rover and a big
 * enough hole: O(n). Free merges with both neighbours in O(1). free_tags is
 * DOOM's Z_FreeTags: a walk of the whole heap.
 */
#include "lib_zone_rover.h"

#include <stdint.h>
#include <string.h>

#define ROVER_ID           0x1d4a11
#define ROVER_MIN_FRAGMENT 64

typedef struct rover_block {
    size_t size; /* including this header */
    int tag;     /* 0 = free */
    int id;
    struct rover_block *next, *prev;
    size_t pad; /* header is 48 bytes: user pointers stay 16-aligned */
} rover_block;

struct hkb_rover {
    rover_block blocklist; /* sentinel, tag 1 */
    rover_block *rover;
    size_t size;
    unsigned char *base;
};

hkb_rover *hkb_rover_create(void *mem, size_t size) {
    uintptr_t a = ((uintptr_t)mem + 15) & ~(uintptr_t)15;
    hkb_rover *z = (hkb_rover *)a;
    uintptr_t first = (a + sizeof *z + 15) & ~(uintptr_t)15;
    size_t avail = (((uintptr_t)mem + size) & ~(uintptr_t)15) - first;
    rover_block *b = (rover_block *)first;
    z->blocklist.next = z->blocklist.prev = b;
    z->blocklist.tag = 1;
    z->blocklist.id = 0;
    z->blocklist.size = 0;
    z->rover = b;
    z->size = avail;
    z->base = (unsigned char *)first;
    b->prev = b->next = &z->blocklist;
    b->tag = 0;
    b->size = avail;
    b->id = ROVER_ID;
    return z;
}

void *hkb_rover_alloc(hkb_rover *z, size_t size, int tag) {
    size = (size + sizeof(rover_block) + 15) & ~(size_t)15;
    rover_block *base = z->rover, *rover = base, *start = base->prev;
    do {
        if (rover == start) return NULL; /* scanned the whole zone */
        if (rover->tag)
            base = rover = rover->next;
        else
            rover = rover->next;
    } while (base->tag || base->size < size);
    size_t extra = base->size - size;
    if (extra > ROVER_MIN_FRAGMENT) {
        rover_block *n = (rover_block *)((unsigned char *)base + size);
        n->size = extra;
        n->tag = 0;
        n->id = ROVER_ID;
        n->prev = base;
        n->next = base->next;
        n->next->prev = n;
        base->next = n;
        base->size = size;
    }
    base->tag = tag ? tag : 1;
    base->id = ROVER_ID;
    z->rover = base->next;
    return (unsigned char *)base + sizeof(rover_block);
}

void hkb_rover_free(hkb_rover *z, void *p) {
    if (!p) return;
    rover_block *b = (rover_block *)((unsigned char *)p - sizeof(rover_block));
    if (b->id != ROVER_ID || b->tag == 0) return;
    b->tag = 0;
    rover_block *o = b->prev;
    if (!o->tag) { /* merge with the previous free block */
        o->size += b->size;
        o->next = b->next;
        o->next->prev = o;
        if (b == z->rover) z->rover = o;
        b = o;
    }
    o = b->next;
    if (!o->tag) { /* merge with the next free block */
        b->size += o->size;
        b->next = o->next;
        b->next->prev = b;
        if (o == z->rover) z->rover = b;
    }
}

size_t hkb_rover_usable(hkb_rover *z, void *p) {
    (void)z;
    rover_block *b = (rover_block *)((unsigned char *)p - sizeof(rover_block));
    return b->size - sizeof(rover_block);
}

void *hkb_rover_realloc(hkb_rover *z, void *p, size_t size) {
    if (!p) return hkb_rover_alloc(z, size, 1);
    size_t old = hkb_rover_usable(z, p);
    if (size <= old) return p;
    void *q = hkb_rover_alloc(z, size, 1);
    if (!q) return NULL;
    memcpy(q, p, old);
    hkb_rover_free(z, p);
    return q;
}

size_t hkb_rover_free_tags(hkb_rover *z, int lo, int hi) {
    size_t n = 0;
    for (rover_block *b = z->blocklist.next; b != &z->blocklist;) {
        if (b->tag >= lo && b->tag <= hi) {
            /* the block merges with free neighbours: continue after the result */
            rover_block *prev = b->prev;
            hkb_rover_free(z, (unsigned char *)b + sizeof(rover_block));
            if (prev->tag == 0) b = prev;
            n++;
        }
        b = b->next;
    }
    return n;
}

size_t hkb_rover_blocks(hkb_rover *z) {
    size_t n = 0;
    for (rover_block *b = z->blocklist.next; b != &z->blocklist; b = b->next) n++;
    return n;
}

unsigned char *hkb_rover_base(hkb_rover *z) { return z->base; }
