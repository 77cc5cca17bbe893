/*
 * src/gc_slots.c - the gc's header slots: the handle table that turns a
 * slot into a reference (hk_gc_obj *), the chunks that hold the headers,
 * resolving a reference and judging a bad one, and giving a slot back.
 *
 * Invariants kept here (the full list is in gc_internal.h):
 *  - chunks[k] holds the headers of slots k * HK_GC_CHUNK_OBJECTS .. + 1023;
 *    nchunks * HK_GC_CHUNK_OBJECTS >= ht.cap; chunks move never (only the
 *    pointer array grows), so header pointers stay valid until destroy.
 *  - a header is allocated iff its slot's handle is live, and then its ref
 *    is that handle; a freed header keeps its last ref, so a reference to
 *    a reclaimed object still names the slot it had.
 *  - a bad reference is never dereferenced: values above 32 bits are
 *    foreign at once, others are judged by the table from its words alone.
 */
#include "gc_internal.h"

int hk__gc_slots_reserve(hk_gc *gc) {
    hk__htab *t = &gc->ht;
    if (hk__ht_nfree(t)) return 1;
    if (t->cap >= t->index_mask) return 0; /* every reference value is taken (or retired) */
    if (gc->nchunks == gc->chunk_cap) {
        size_t ncap = gc->chunk_cap ? gc->chunk_cap * 2 : 16, bytes;
        if (!hk_size_mul(ncap, sizeof(gc_hdr *), &bytes)) return 0;
        gc_hdr **tab = (gc_hdr **)hk__core_backing_alloc(&gc->core, bytes);
        if (!tab) return 0;
        if (gc->nchunks) memcpy(tab, gc->chunks, gc->nchunks * sizeof *tab);
        hk__core_backing_free(&gc->core, gc->chunks, gc->chunk_cap * sizeof *tab);
        gc->chunks = tab;
        gc->chunk_cap = ncap;
    }
    gc_hdr *c = (gc_hdr *)hk__core_backing_alloc(&gc->core, GC_CHUNK_BYTES);
    if (!c) return 0;
    memset(c, 0, GC_CHUNK_BYTES);
    uint32_t add = t->index_mask - t->cap;
    if (add > HK_GC_CHUNK_OBJECTS) add = HK_GC_CHUNK_OBJECTS;
    if (hk__ht_grow(t, add) != HK_OK) {
        hk__core_backing_free(&gc->core, c, GC_CHUNK_BYTES);
        return 0;
    }
    gc->chunks[gc->nchunks++] = c;
    return 1;
}

gc_hdr *hk__gc_slot_take(hk_gc *gc) {
    uint32_t h = hk__ht_alloc(&gc->ht);
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
    (void)hk__ht_free(&gc->ht, o->ref & gc->ht.index_mask); /* o->ref stays: the last reference */
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
    hk__core_backing_free(&gc->core, gc->chunks, gc->chunk_cap * sizeof(gc_hdr *));
    gc->chunks = NULL;
    gc->nchunks = gc->chunk_cap = 0;
    hk__ht_fini(&gc->ht);
}
