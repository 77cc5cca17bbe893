/*
 * src/gc_slots.c - the gc's header slots: the handle table that turns a
 * slot into a reference (hk_gc_obj *), the chunks that hold the headers,
 * resolving a reference and judging a bad one, and giving a slot back.
 *
 * Invariants kept here (the full list is in gc_internal.h):
 *  - chunks[k] holds the headers of slots k * HK_GC_CHUNK_OBJECTS .. + 1023;
 *    nchunks * HK_GC_CHUNK_OBJECTS >= ht.cap; chunks move never and the
 *    pointer array is made at create for every chunk the index bits allow,
 *    so header pointers stay valid until destroy and no growth copies.
 *  - the headers of slots < ht.cap are initialised; those beyond it in the
 *    last chunk are not (a chunk is not zeroed when it is allocated: its
 *    headers are, GC_GROW_SLOTS at a time, as the table grows over them).
 *  - the table grows GC_GROW_SLOTS slots at a time, only when no slot is
 *    free; its storage is reserved address space (src/handles.h), so a
 *    growth is O(GC_GROW_SLOTS) plus, once per HK__HT_COMMIT_SLOTS slots, a
 *    commit; where the host cannot reserve, it is chunked storage, and a
 *    growth is O(GC_GROW_SLOTS) plus, once per HK__HT_CHUNK_SLOTS slots, a
 *    chunk (and at a power of two a new ring: the free slots move, none).
 *  - the table is used only through its chunk-aware calls (hk__ht_*_any and
 *    the out-of-line ones); gc_find reads the header, not the table.
 *  - a header is allocated iff its slot's handle is live, and then its ref
 *    is that handle; a freed header keeps its last ref, so a reference to
 *    a reclaimed object still names the slot it had.
 *  - a bad reference is never dereferenced: values above 32 bits are
 *    foreign at once, others are judged by the table from its words alone.
 */
#include "gc_internal.h"

/* Slots made FREE at a time: their headers are initialised here, not when
 * their chunk is allocated, so no growth pays for a whole chunk. */
#define GC_GROW_SLOTS HK_GC_GROW_OBJECTS
_Static_assert(HK_GC_CHUNK_OBJECTS % HK_GC_GROW_OBJECTS == 0, "a growth never spans two chunks");

static int gc_slots_grow(hk_gc *gc) {
    hk__htab *t = &gc->ht;
    if (t->cap >= t->index_mask) return 0; /* every reference value is taken (or retired) */
    uint32_t first = t->cap, add = t->index_mask - t->cap;
    if (add > GC_GROW_SLOTS) add = GC_GROW_SLOTS;
    gc_hdr *fresh = NULL;
    if ((size_t)first + add > gc->nchunks * (size_t)HK_GC_CHUNK_OBJECTS) {
        /* GC_GROW_SLOTS divides a chunk: the new slots start one */
        HK__ASSERT(gc->nchunks < gc->chunk_cap && first == gc->nchunks * HK_GC_CHUNK_OBJECTS);
        fresh = (gc_hdr *)hk__core_backing_alloc(&gc->core, GC_CHUNK_BYTES); /* not zeroed: see below */
        if (!fresh) return 0;
        gc->chunks[gc->nchunks++] = fresh;
    }
    if (hk__ht_grow(t, add) != HK_OK) {
        if (fresh) {
            gc->chunks[--gc->nchunks] = NULL;
            hk__core_backing_free(&gc->core, fresh, GC_CHUNK_BYTES);
        }
        return 0;
    }
    for (uint32_t i = first; i < first + add; i++) memset(gc_hdr_at(gc, i), 0, sizeof(gc_hdr)); /* FREE */
    return 1;
}

int hk__gc_slots_reserve(hk_gc *gc) { return hk__ht_nfree(&gc->ht) || gc_slots_grow(gc); }

int hk__gc_slots_init(hk_gc *gc, uint32_t reserve_objects) {
    hk__htab *t = &gc->ht;
    size_t n = ((size_t)t->index_mask + HK_GC_CHUNK_OBJECTS - 1u) / HK_GC_CHUNK_OBJECTS, bytes;
    if (!hk_size_mul(n, sizeof(gc_hdr *), &bytes)) return 0;
    gc->chunks = (gc_hdr **)hk__core_backing_alloc(&gc->core, bytes);
    if (!gc->chunks) return 0;
    gc->chunk_cap = n;
    if (reserve_objects > t->index_mask) reserve_objects = t->index_mask;
    uint32_t room = reserve_objects > GC_GROW_SLOTS ? reserve_objects : GC_GROW_SLOTS;
    if (hk__ht_room(t, room) != HK_OK) return 0;
    while (t->cap < reserve_objects)
        if (!gc_slots_grow(gc)) return 0;
    return 1;
}

gc_hdr *hk__gc_slot_take(hk_gc *gc) {
    uint32_t h = hk__ht_alloc_any(&gc->ht);
    HK__ASSERT(h != 0);
    gc_hdr *o = gc_hdr_at(gc, h & gc->ht.index_mask);
    o->ref = h;
    return o;
}

void hk__gc_free_object(hk_gc *gc, gc_hdr *o) {
    if (o->data) {
        if (HK__TRACKED(&gc->core)) hk__track_free(&gc->core, o->data);
        if (gc->core.flags & HK_FLAG_FILL) hk_fill(o->data, o->size, HK_FILL_FREE);
        hk__core_backing_free(&gc->core, o->data, o->size);
    }
    gc->data_bytes -= o->size;
    gc->objects--;
    gc->freed++;
    o->data = NULL;
    o->size = 0;
    o->type = NULL;
    o->rc = 0;
    o->color = GC_BLACK;
    o->buffered = 0;
    o->queued = 0;
    o->state = GC_FREE;
    (void)hk__ht_free_any(&gc->ht, o->ref & gc->ht.index_mask); /* o->ref stays: the last reference */
}

gc_hdr *hk__gc_checked(hk_gc *gc, const hk_gc_obj *r, const char *op, int freeing, hk_result *res) {
    gc_hdr *o = gc_find(gc, r);
    if (o) return o;
    uintptr_t v = (uintptr_t)r;
    if (v > UINT32_MAX) {
        *res = hk__report(&gc->core.rep, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, r, 0, NULL,
                          "%s of foreign reference %p: not a reference of this collector (a pointer, or "
                          "another collector's)",
                          op, (const void *)r);
        return NULL;
    }
    *res = hk__ht_report(&gc->ht, &gc->core.rep, (uint32_t)v, freeing, op, "reference", r, 0, NULL);
    return NULL;
}

const char *hk__gc_ref_what(const hk_gc *gc, const hk_gc_obj *r) {
    uintptr_t v = (uintptr_t)r;
    if (v > UINT32_MAX) return "not a reference of this collector";
    switch (hk__ht_judge(&gc->ht, (uint32_t)v, 0).why) {
    case HK__HT_WHY_OK: return "an allocated object";
    case HK__HT_WHY_FREED:
    case HK__HT_WHY_DOUBLE_FREE: return "a reclaimed object";
    case HK__HT_WHY_STALE: return "a reclaimed object whose slot was reused";
    default: return "not a reference of this collector";
    }
}

void hk__gc_slots_destroy(hk_gc *gc) {
    for (size_t c = 0; c < gc->nchunks; c++) hk__core_backing_free(&gc->core, gc->chunks[c], GC_CHUNK_BYTES);
    if (gc->chunks) hk__core_backing_free(&gc->core, gc->chunks, gc->chunk_cap * sizeof(gc_hdr *));
    gc->chunks = NULL;
    gc->nchunks = gc->chunk_cap = 0;
    hk__ht_fini(&gc->ht);
}
