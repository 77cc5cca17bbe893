/*
 * src/gc_objects.c - the gc's objects: create and destroy, allocation (with
 * allocation-debt pacing), the queries, retain / release / assign, recycle.
 *
 * Invariants kept here (the full list is in gc_internal.h):
 *  - a fresh object is LIVE with count 1, BLACK, not a candidate, its data
 *    zeroed; objects and data_bytes count it at once.
 *  - retain and release change a count only after the reference resolved to
 *    an allocated object and the call was not made from a callback; a
 *    refused call changes nothing.
 *  - every call that may change the collector ends with hk__core_after (the
 *    paranoid check) inside the lock.
 */
#include "gc_internal.h"

static uint64_t gc_default_clock(void *u) {
    (void)u;
    return hk_os_now_ns();
}

/* ---- create / destroy -------------------------------------------------------- */

hk_gc *hk_gc_create(const hk_gc_desc *desc) {
    if (!desc) return NULL;
    hk__core core;
    if (hk__core_init(&core, "gc", desc->name, desc->flags, desc->on_error, desc->error_user, &desc->lock,
                      &desc->backing, hk__gc_check, NULL) != HK_OK)
        return NULL;
    uint32_t ib = desc->index_bits ? desc->index_bits : HK_GC_DEFAULT_INDEX_BITS;
    if (ib < HK_GC_MIN_INDEX_BITS || ib > HK_GC_MAX_INDEX_BITS) {
        hk__report(&core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL,
                   "create: index_bits %u is outside %u..%u", ib, HK_GC_MIN_INDEX_BITS, HK_GC_MAX_INDEX_BITS);
        return NULL;
    }
    hk_gc *gc = (hk_gc *)hk__core_backing_alloc(&core, sizeof(hk_gc));
    if (!gc) {
        hk__report(&core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, sizeof(hk_gc), NULL,
                   "create: no memory for the control block (%zu bytes)", sizeof(hk_gc));
        return NULL;
    }
    memset(gc, 0, sizeof *gc);
    gc->core = core;
    gc->core.self = gc;
    /* The data blocks come from the backing hooks: the C library's (or a
     * heapkit allocator's) are memcheck's and heaptrack's already; Tracy
     * hears of them here, under the gc's name (src/track.h). */
    gc->core.track &= HK__TRACK_TRACY;
    hk__ht_config hc;
    memset(&hc, 0, sizeof hc);
    hc.index_bits = ib;
    hc.flags = (desc->flags & HK_GC_RETIRE) ? 0u : HK__HT_WRAP;
    hc.hooks = &gc->core.backing;
    hc.reserve = 1; /* address space for every slot, or chunks: growth never copies (src/handles.h) */
    if (hk__ht_init(&gc->ht, &hc) != HK_OK || !hk__gc_slots_init(gc, desc->reserve_objects)) {
        hk__report(&gc->core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, 0, NULL,
                   "create: no memory for the reference table and %u reserved objects",
                   desc->reserve_objects);
        hk__gc_slots_destroy(gc);
        hk__core_backing_free(&core, gc, sizeof *gc);
        return NULL;
    }
    gc->clock_fn = desc->clock ? desc->clock : gc_default_clock;
    gc->clock_user = desc->clock_user;
    gc->step_max = desc->step_max_objects ? desc->step_max_objects : HK_GC_DEFAULT_STEP_OBJECTS;
    gc->pace_bytes = desc->pace_bytes;
    gc->pace_percent = desc->pace_percent ? desc->pace_percent : HK_GC_DEFAULT_PACE_PERCENT;
    gc->incremental = (desc->flags & HK_GC_IMMEDIATE) ? 0 : 1;
    return gc;
}

void hk_gc_destroy(hk_gc *gc) {
    if (!gc) return;
    hk__core_lock(&gc->core);
    if (gc_refuse_in_cb(gc, "destroy")) {
        hk__core_unlock(&gc->core);
        return;
    }
    for (uint32_t i = 0; i < gc->ht.cap; i++) {
        gc_hdr *o = gc_hdr_at(gc, i);
        if (o->state == GC_FREE) continue;
        gc_finalize(gc, o);
        if (HK__TRACKED(&gc->core) && o->data) hk__track_free(&gc->core, o->data);
        hk__core_backing_free(&gc->core, o->data, o->size);
    }
    hk__gc_slots_destroy(gc);
    hk__core core = gc->core;
    hk__core_backing_free(&core, gc, sizeof *gc);
    hk__core_unlock(&core);
}

/* ---- allocation -------------------------------------------------------------- */

static hk_gc_obj *gc_alloc_impl(hk_gc *gc, const hk_gc_type *type, size_t size) {
    if (!type) {
        gc->fail_count++;
        hk__report(&gc->core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, size, NULL,
                   "allocation with a NULL type");
        return NULL;
    }
    if (gc_refuse_in_cb(gc, "alloc")) {
        gc->fail_count++;
        return NULL;
    }
    size_t cost;
    if (!hk_size_add(size, sizeof(gc_hdr), &cost) || cost > (size_t)PTRDIFF_MAX) {
        gc->fail_count++;
        hk__report(&gc->core.rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, size, type->name,
                   "asked %zu data bytes for a %s: with the object header it passes PTRDIFF_MAX", size,
                   type->name ? type->name : "object");
        return NULL;
    }
    if (gc->pace_bytes && gc->incremental) {
        if (!hk_size_add(gc->debt, cost, &gc->debt)) gc->debt = SIZE_MAX;
        if (gc->debt >= gc->pace_bytes) hk__gc_pace(gc);
    }
    if (!hk__gc_slots_reserve(gc)) {
        gc->fail_count++;
        int full = gc->ht.cap >= gc->ht.index_mask;
        hk__report(&gc->core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, GC_CHUNK_BYTES, type->name,
                   full ? "all %u object slots are allocated or retired (%zu objects allocated, %u retired; "
                          "raise desc.index_bits, or hk_gc_recycle)"
                        : "no memory for a chunk of %u object headers (%zu objects allocated, %u retired)",
                   full ? gc->ht.cap : HK_GC_CHUNK_OBJECTS, gc->objects, gc->ht.nretired);
        return NULL;
    }
    void *data = NULL;
    if (size) {
        data = hk__core_backing_alloc(&gc->core, size);
        if (!data) {
            gc->fail_count++;
            hk__report(&gc->core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, size, type->name,
                       "no memory for %zu data bytes of a %s", size, type->name ? type->name : "object");
            return NULL;
        }
        memset(data, 0, size);
        if (HK__TRACKED(&gc->core)) hk__track_alloc(&gc->core, data, size, 1);
    }
    gc_hdr *o = hk__gc_slot_take(gc);
    o->type = type;
    o->data = data;
    o->size = size;
    o->rc = 1;
    o->state = GC_LIVE;
    o->color = GC_BLACK;
    o->buffered = 0;
    o->queued = 0;
    gc->objects++;
    gc->data_bytes += size;
    if (gc->data_bytes > gc->peak_data) gc->peak_data = gc->data_bytes;
    gc->alloc_count++;
    return gc_ref_of(o);
}

hk_gc_obj *hk_gc_alloc_size(hk_gc *gc, const hk_gc_type *type, size_t size) {
    if (!gc) return NULL;
    hk__core_lock(&gc->core);
    hk_gc_obj *o = gc_alloc_impl(gc, type, size);
    hk__core_after(&gc->core);
    hk__core_unlock(&gc->core);
    return o;
}

hk_gc_obj *hk_gc_alloc(hk_gc *gc, const hk_gc_type *type) {
    return hk_gc_alloc_size(gc, type, type ? type->size : 0);
}

hk_gc_obj *hk_gc_alloc_array(hk_gc *gc, const hk_gc_type *type, size_t count, size_t elem_size) {
    size_t n;
    if (!gc) return NULL;
    if (!hk_size_mul(count, elem_size, &n)) {
        hk__core_lock(&gc->core);
        gc->fail_count++;
        hk__report(&gc->core.rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, count, type ? type->name : NULL,
                   "array of %zu elements of %zu bytes overflows", count, elem_size);
        hk__core_unlock(&gc->core);
        return NULL;
    }
    return hk_gc_alloc_size(gc, type, n);
}

/* ---- queries ------------------------------------------------------------------ */

void *hk_gc_data(hk_gc *gc, const hk_gc_obj *obj) {
    if (!gc) return NULL;
    hk__core_lock(&gc->core);
    hk_result r;
    gc_hdr *o = hk__gc_checked(gc, obj, "data access", 0, &r);
    void *d = o ? o->data : NULL;
    hk__core_unlock(&gc->core);
    return d;
}

size_t hk_gc_size(hk_gc *gc, const hk_gc_obj *obj) {
    if (!gc) return 0;
    hk__core_lock(&gc->core);
    hk_result r;
    gc_hdr *o = hk__gc_checked(gc, obj, "size query", 0, &r);
    size_t s = o ? o->size : 0;
    hk__core_unlock(&gc->core);
    return s;
}

const hk_gc_type *hk_gc_type_of(hk_gc *gc, const hk_gc_obj *obj) {
    if (!gc) return NULL;
    hk__core_lock(&gc->core);
    hk_result r;
    gc_hdr *o = hk__gc_checked(gc, obj, "type query", 0, &r);
    const hk_gc_type *t = o ? o->type : NULL;
    hk__core_unlock(&gc->core);
    return t;
}

uint32_t hk_gc_refcount(hk_gc *gc, const hk_gc_obj *obj) {
    if (!gc) return 0;
    hk__core_lock(&gc->core);
    hk_result r;
    gc_hdr *o = hk__gc_checked(gc, obj, "count query", 0, &r);
    uint32_t n = o ? o->rc : 0;
    hk__core_unlock(&gc->core);
    return n;
}

/* ---- retain / release --------------------------------------------------------- */

static hk_result gc_retain_impl(hk_gc *gc, hk_gc_obj *obj) {
    if (gc_refuse_in_cb(gc, "retain")) return HK_ERR_STATE;
    hk_result bad = HK_OK;
    gc_hdr *o = hk__gc_checked(gc, obj, "retain", 0, &bad);
    if (!o) return bad;
    if (o->state != GC_LIVE)
        return hk__report(&gc->core.rep, HK_ERR_STALE, HK_EK_STALE, obj, o->size, gc_tname(o),
                          "retain of object %p (%s) whose count is zero: it is garbage awaiting reclamation",
                          (void *)obj, gc_tname(o));
    if (o->rc == UINT32_MAX)
        return hk__report(&gc->core.rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, obj, o->size, gc_tname(o),
                          "retain of object %p (%s) whose count is already %u", (void *)obj, gc_tname(o),
                          o->rc);
    o->rc++;
    if (o->color == GC_PURPLE) o->color = GC_BLACK;
    return HK_OK;
}

static hk_result gc_release_impl(hk_gc *gc, hk_gc_obj *obj) {
    if (gc_refuse_in_cb(gc, "release")) return HK_ERR_STATE;
    hk_result bad = HK_OK;
    gc_hdr *o = hk__gc_checked(gc, obj, "release", 1, &bad);
    if (!o) return bad;
    if (o->state != GC_LIVE)
        return hk__report(&gc->core.rep, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, obj, o->size, gc_tname(o),
                          "release below zero of object %p (%s): its count is already zero", (void *)obj,
                          gc_tname(o));
    hk__gc_decref(gc, o);
    if (o->state == GC_PENDING && !gc->incremental && !gc->draining) hk__gc_drain(gc);
    return HK_OK;
}

hk_result hk_gc_retain(hk_gc *gc, hk_gc_obj *obj) {
    if (!gc) return HK_ERR_INVALID;
    hk__core_lock(&gc->core);
    hk_result r = gc_retain_impl(gc, obj);
    hk__core_after(&gc->core);
    hk__core_unlock(&gc->core);
    return r;
}

hk_result hk_gc_release(hk_gc *gc, hk_gc_obj *obj) {
    if (!gc) return HK_ERR_INVALID;
    hk__core_lock(&gc->core);
    hk_result r = gc_release_impl(gc, obj);
    hk__core_after(&gc->core);
    hk__core_unlock(&gc->core);
    return r;
}

hk_result hk_gc_assign(hk_gc *gc, hk_gc_obj **field, hk_gc_obj *value) {
    if (!gc) return HK_ERR_INVALID;
    hk__core_lock(&gc->core);
    hk_result r = HK_OK;
    if (!field) {
        r = hk__report(&gc->core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL,
                       "assign to a NULL field");
    } else if (value != *field) {
        hk_gc_obj *old = *field;
        if (value) r = gc_retain_impl(gc, value);
        if (r == HK_OK) {
            *field = value;
            if (old) {
                hk_result r2 = gc_release_impl(gc, old);
                if (r2 != HK_OK) r = r2;
            }
        }
    }
    hk__core_after(&gc->core);
    hk__core_unlock(&gc->core);
    return r;
}

long hk_gc_recycle(hk_gc *gc) {
    if (!gc) return HK_ERR_INVALID;
    hk__core_lock(&gc->core);
    long n = gc_refuse_in_cb(gc, "recycle") ? (long)HK_ERR_STATE : (long)hk__ht_recycle(&gc->ht);
    hk__core_after(&gc->core);
    hk__core_unlock(&gc->core);
    return n;
}
