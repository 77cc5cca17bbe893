/*
 * src/gc_check.c - the gc's introspection: hk_gc_check (every invariant of
 * gc_internal.h, the handle table's included, and every reference traced
 * from every object), hk_gc_walk, hk_gc_where and hk_gc_stats.
 *
 * The check writes nothing but the aux counters of headers (scratch) and
 * the table's scratch bits (restored); walk, where and stats only read. The
 * check is also the collector's paranoid hook (hk__gc_check, run by the
 * core after every mutating call with HK_FLAG_PARANOID), so it takes no
 * lock, and it does nothing from inside a callback (it would run the
 * type's trace functions there).
 */
#include "gc_internal.h"

#include <stdio.h>

typedef struct gc_check_ctx {
    hk_gc *gc;
    int bad; /* a reference that names no allocated object was found */
    const void *bad_ref;
} gc_check_ctx;

static void gc_check_visit(hk_gc_obj *child, void *vctx) {
    gc_check_ctx *v = (gc_check_ctx *)vctx;
    if (!child) return;
    gc_hdr *c = gc_find(v->gc, child);
    if (c)
        c->aux++;
    else if (!v->bad) {
        v->bad = 1;
        v->bad_ref = child;
    }
}

static hk_result gc_corrupt(hk_gc *gc, const gc_hdr *o, const char *fmt, ...) HK__PRINTF(3, 4);
static hk_result gc_corrupt(hk_gc *gc, const gc_hdr *o, const char *fmt, ...) {
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return hk__report(&gc->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, gc_ref_of(o), o->size,
                      gc_tname(o), "object %p (%s): %s", (void *)gc_ref_of(o), gc_tname(o), what);
}

/* Walks a list checking links and membership; returns 0 when broken. */
static int gc_check_list(hk_gc *gc, const gc_list *l, const char *name, int state, size_t limit) {
    size_t n = 0;
    const gc_hdr *prev = NULL;
    for (const gc_hdr *o = l->head; o; prev = o, o = o->next) {
        if (++n > limit || o->prev != prev) {
            hk__report(&gc->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, o, 0, NULL,
                       "%s list broken at header %p (entry %zu)", name, (const void *)o, n);
            return 0;
        }
        int ok = state == -1 ? (o->buffered && o->state == GC_LIVE) : o->state == state;
        if (!ok) {
            gc_corrupt(gc, o, "on the %s list in the wrong state (state %u, candidate %u)", name, o->state,
                       o->buffered);
            return 0;
        }
    }
    if (prev != l->tail || n != l->n) {
        hk__report(&gc->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, l->tail, 0, NULL,
                   "%s list: %zu entries found, %zu recorded (or tail wrong)", name, n, l->n);
        return 0;
    }
    return 1;
}

static hk_result gc_check_slots(hk_gc *gc) {
    size_t nlive = 0, npend = 0, nbuf = 0, bytes = 0;
    if ((size_t)gc->nchunks * HK_GC_CHUNK_OBJECTS < gc->ht.cap || gc->ht.nheld)
        return hk__report(&gc->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, NULL, 0, NULL,
                          "control block damaged: %zu chunks for %u slots, %u held", gc->nchunks, gc->ht.cap,
                          gc->ht.nheld);
    for (uint32_t i = 0; i < gc->ht.cap; i++) {
        gc_hdr *o = gc_hdr_at(gc, i);
        uint32_t w = *hk__ht_w(&gc->ht, i);
        int live = hk__ht_word_live(&gc->ht, w);
        o->aux = 0;
        if (live != (o->state != GC_FREE) || (live && o->ref != w))
            return gc_corrupt(gc, o, "slot %u: state %u, but its reference 0x%08x is %s (table word 0x%08x)",
                              i, o->state, o->ref, live ? "live" : "dead", w);
        switch (o->state) {
        case GC_FREE:
            if (o->data || o->type || o->buffered)
                return gc_corrupt(gc, o, "free slot still has data, type or candidacy");
            break;
        case GC_LIVE:
        case GC_PENDING:
            if (!o->type) return gc_corrupt(gc, o, "allocated object without a type");
            if (!o->data != !o->size) return gc_corrupt(gc, o, "data pointer and size disagree");
            if (o->state == GC_LIVE && o->rc == 0) return gc_corrupt(gc, o, "live object with count zero");
            if (o->state == GC_PENDING && (o->rc != 0 || o->buffered))
                return gc_corrupt(gc, o, "backlog object with count %u or candidacy %u", o->rc, o->buffered);
            if (o->color != GC_BLACK && !(o->buffered && o->color == GC_PURPLE))
                return gc_corrupt(gc, o, "colour %u outside a cycle pass (candidate %u)", o->color,
                                  o->buffered);
            if (o->state == GC_LIVE)
                nlive++;
            else
                npend++;
            if (o->buffered) nbuf++;
            bytes += o->size;
            break;
        default: return gc_corrupt(gc, o, "state %u is not valid here", o->state);
        }
    }
    if (npend != gc->backlog.n || nbuf != gc->candidates.n || nlive + npend != gc->objects ||
        gc->objects != hk__ht_nlive(&gc->ht) || bytes != gc->data_bytes)
        return hk__report(&gc->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, NULL, 0, NULL,
                          "counts disagree: backlog %zu/%zu, candidates %zu/%zu, objects %zu/%zu (table %u), "
                          "bytes %zu/%zu",
                          npend, gc->backlog.n, nbuf, gc->candidates.n, nlive + npend, gc->objects,
                          hk__ht_nlive(&gc->ht), bytes, gc->data_bytes);
    return HK_OK;
}

static hk_result gc_check_impl(hk_gc *gc) {
    if (hk__ht_check(&gc->ht, &gc->core.rep, "reference") != HK_OK) return HK_ERR_CORRUPT;
    hk_result r = gc_check_slots(gc);
    if (r != HK_OK) return r;
    size_t total = gc->ht.cap;
    if (!gc_check_list(gc, &gc->backlog, "backlog", GC_PENDING, total) ||
        !gc_check_list(gc, &gc->candidates, "candidate", -1, total))
        return HK_ERR_CORRUPT;
    /* References: every one names an allocated object; counts cover them. */
    for (uint32_t i = 0; i < gc->ht.cap; i++) {
        gc_hdr *o = gc_hdr_at(gc, i);
        if (o->state == GC_FREE) continue;
        gc_check_ctx v = {gc, 0, NULL};
        gc_trace(gc, o, gc_check_visit, &v);
        if (v.bad)
            return hk__report(&gc->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, gc_ref_of(o), o->size,
                              gc_tname(o), "object %p (%s) references %p, which is %s", (void *)gc_ref_of(o),
                              gc_tname(o), v.bad_ref, hk__gc_ref_what(gc, (const hk_gc_obj *)v.bad_ref));
    }
    for (uint32_t i = 0; i < gc->ht.cap; i++) {
        gc_hdr *o = gc_hdr_at(gc, i);
        if (o->state != GC_FREE && o->aux > o->rc)
            return gc_corrupt(gc, o, "count %u is lower than the %u references to it", o->rc, o->aux);
    }
    return HK_OK;
}

hk_result hk__gc_check(void *self) {
    hk_gc *gc = (hk_gc *)self;
    return gc->in_cb ? HK_OK : gc_check_impl(gc);
}

hk_result hk_gc_check(hk_gc *gc) {
    if (!gc) return HK_ERR_INVALID;
    hk__core_lock(&gc->core);
    hk_result r;
    if (gc_refuse_in_cb(gc, "check"))
        r = HK_ERR_STATE;
    else
        r = gc_check_impl(gc);
    hk__core_unlock(&gc->core);
    return r;
}

/* ---- walk / where / stats -------------------------------------------------------- */

static void gc_fill_info(const gc_hdr *o, hk_block_info *info) {
    memset(info, 0, sizeof *info);
    info->owner = (void *)gc_ref_of(o);
    info->id = o->ref;
    info->overhead = sizeof(gc_hdr);
    if (o->state == GC_FREE) return;
    info->address = o->data;
    info->size = o->size;
    info->requested = o->size;
    info->flags = HK_BLOCK_USED | (o->state == GC_PENDING ? (uint32_t)HK_BLOCK_PURGEABLE : 0u);
    info->lock_count = o->rc;
    info->name = gc_tname(o);
}

int hk_gc_walk(hk_gc *gc, hk_walk_fn fn, void *user) {
    if (!gc || !fn) return 0;
    hk__core_lock(&gc->core);
    int r = 0;
    for (uint32_t i = 0; i < gc->ht.cap && !r; i++) {
        const gc_hdr *o = gc_hdr_at(gc, i);
        if (o->state == GC_FREE) continue;
        hk_block_info info;
        gc_fill_info(o, &info);
        gc->in_cb++;
        r = fn(&info, user);
        gc->in_cb--;
    }
    hk__core_unlock(&gc->core);
    return r;
}

hk_result hk_gc_where(hk_gc *gc, const void *addr, hk_block_info *info) {
    if (!gc || !info) return HK_ERR_INVALID;
    hk__core_lock(&gc->core);
    hk_result r = HK_ERR_FOREIGN;
    uintptr_t a = (uintptr_t)addr;
    if (addr && a <= UINT32_MAX && ((uint32_t)a & gc->ht.index_mask) < gc->ht.cap &&
        hk__ht_last_handle(&gc->ht, (uint32_t)a & gc->ht.index_mask) == (uint32_t)a) {
        /* a reference: the object's, or the last one its free slot issued */
        gc_fill_info(gc_hdr_at(gc, (uint32_t)a & gc->ht.index_mask), info);
        r = HK_OK;
    } else if (addr) {
        for (uint32_t i = 0; i < gc->ht.cap; i++) {
            const gc_hdr *o = gc_hdr_at(gc, i);
            if (o->state == GC_FREE || !o->data) continue;
            if (a >= (uintptr_t)o->data && a - (uintptr_t)o->data < o->size) {
                gc_fill_info(o, info);
                r = HK_OK;
                break;
            }
        }
    }
    hk__core_unlock(&gc->core);
    return r;
}

hk_result hk_gc_stats(const hk_gc *gc, hk_stats *out) {
    if (!gc || !out) return HK_ERR_INVALID;
    hk__core_lock(&gc->core);
    memset(out, 0, sizeof *out);
    out->size = (uint32_t)sizeof *out;
    out->version = HK_STATS_VERSION;
    out->allocator = "gc";
    size_t hdr = gc->nchunks * GC_CHUNK_BYTES;
    uint32_t nfree = hk__ht_nfree(&gc->ht);
    out->overhead = hdr + gc->chunk_cap * sizeof(gc_hdr *) + gc->ht.block_size + sizeof(hk_gc);
    out->capacity = gc->data_bytes + hdr;
    out->used = gc->data_bytes;
    out->used_blocks_bytes = gc->data_bytes + gc->objects * sizeof(gc_hdr);
    out->free = (size_t)nfree * sizeof(gc_hdr);
    out->largest_free = 0;
    out->peak_used = gc->peak_data;
    out->live_blocks = gc->objects;
    out->free_blocks = nfree;
    out->alloc_count = gc->alloc_count;
    out->free_count = gc->freed;
    out->fail_count = gc->fail_count;
    out->error_count = gc->core.rep.error_count;
    hk__core_unlock(&gc->core);
    return HK_OK;
}
