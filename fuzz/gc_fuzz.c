/*
 * fuzz/gc_fuzz.c - random operation sequences on a collector, decoded from
 * the input bytes: allocations, retains and releases of references the
 * harness holds, field assignments, steps, full passes, mode switches, and
 * detectable misuse (NULL, another collector's reference, a real pointer,
 * a forged reference, release below zero of backlog objects).
 * hk_gc_check must pass after every operation.
 */
#include "heapkit/gc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct fz_node {
    hk_gc_obj *ref[2];
} fz_node;

static void fz_trace(void *data, size_t size, hk_gc_visit_fn visit, void *ctx, void *user) {
    (void)size;
    (void)user;
    fz_node *n = (fz_node *)data;
    visit(n->ref[0], ctx);
    visit(n->ref[1], ctx);
}
static const hk_gc_type k_fz = {"fz", sizeof(fz_node), fz_trace, NULL, NULL};

static void fz_quiet(const hk_error *e, void *u) {
    (void)e;
    (void)u;
}

static uint64_t fz_ticks;
static uint64_t fz_clock(void *u) {
    (void)u;
    return fz_ticks += 7;
}

#define FZ_HELD 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hk_gc_desc d = {0};
    d.on_error = fz_quiet;
    d.clock = fz_clock;
    d.step_max_objects = 3;
    d.pace_bytes = size & 1 ? 1024 : 0;
    hk_gc *gc = hk_gc_create(&d);
    hk_gc *other = hk_gc_create(&d);
    if (!gc || !other) abort();
    hk_gc_obj *foreign = hk_gc_alloc(other, &k_fz);
    hk_gc_obj *held[FZ_HELD]; /* one counted reference each */
    int nheld = 0;
    if (size > 300) size = 300; /* 150 operations per input keep the smoke run short */
    for (size_t i = 0; i + 1 < size; i += 2) {
        unsigned op = data[i] % 12, arg = data[i + 1];
        switch (op) {
        case 0:
        case 1:
            if (nheld < FZ_HELD) {
                hk_gc_obj *o = hk_gc_alloc(gc, &k_fz);
                if (o) held[nheld++] = o;
            }
            break;
        case 2: /* drop a reference we hold */
            if (nheld) {
                int k = (int)(arg % (unsigned)nheld);
                if (hk_gc_release(gc, held[k]) != HK_OK) abort();
                held[k] = held[--nheld];
            }
            break;
        case 3: /* duplicate a reference */
            if (nheld && nheld < FZ_HELD) {
                hk_gc_obj *o = held[arg % (unsigned)nheld];
                if (hk_gc_retain(gc, o) != HK_OK) abort();
                held[nheld++] = o;
            }
            break;
        case 4: /* field of a held object := another held object or NULL */
            if (nheld) {
                fz_node *n = (fz_node *)hk_gc_data(gc, held[arg % (unsigned)nheld]);
                hk_gc_obj *v = (arg & 0x80) || nheld < 2 ? NULL : held[(arg >> 1) % (unsigned)nheld];
                if (hk_gc_assign(gc, &n->ref[arg & 1], v) != HK_OK) abort();
            }
            break;
        case 5: /* take a child as our own */
            if (nheld && nheld < FZ_HELD) {
                fz_node *n = (fz_node *)hk_gc_data(gc, held[arg % (unsigned)nheld]);
                hk_gc_obj *c = n->ref[arg & 1];
                if (c) {
                    if (hk_gc_retain(gc, c) != HK_OK) abort();
                    held[nheld++] = c;
                }
            }
            break;
        case 6: hk_gc_step(gc, arg); break;
        case 7: hk_gc_collect(gc); break;
        case 8: hk_gc_set_incremental(gc, !hk_gc_incremental(gc)); break;
        case 9: { /* misuse: another collector's, a pointer, forged (generation 0), NULL */
            int local = 0;
            if (hk_gc_release(gc, foreign) != HK_ERR_FOREIGN) abort();
            if (hk_gc_retain(gc, NULL) != HK_ERR_INVALID) abort();
            if (hk_gc_retain(gc, (hk_gc_obj *)(void *)&local) != HK_ERR_FOREIGN) abort();
            if (hk_gc_retain(gc, (hk_gc_obj *)(uintptr_t)(1u + arg % 4000u)) != HK_ERR_FOREIGN) abort();
        } break;
        case 10: /* misuse: release below zero of an object in the backlog */
            if (nheld) {
                int k = (int)(arg % (unsigned)nheld);
                hk_gc_obj *o = held[k];
                if (hk_gc_refcount(gc, o) == 1 && hk_gc_incremental(gc)) {
                    fz_node *n = (fz_node *)hk_gc_data(gc, o);
                    if (!n->ref[0] && !n->ref[1]) {
                        if (hk_gc_release(gc, o) != HK_OK) abort();
                        held[k] = held[--nheld];
                        if (hk_gc_release(gc, o) != HK_ERR_DOUBLE_FREE) abort();
                        if (hk_gc_retain(gc, o) != HK_ERR_STALE) abort();
                    }
                }
            }
            break;
        default: {
            hk_stats s;
            hk_gc_stats(gc, &s);
            hk_gc_info in;
            hk_gc_get_info(gc, &in);
            if (in.objects != s.live_blocks) abort();
        } break;
        }
        if (hk_gc_check(gc) != HK_OK) abort();
    }
    while (nheld) hk_gc_release(gc, held[--nheld]);
    hk_gc_collect(gc);
    hk_gc_info in;
    hk_gc_get_info(gc, &in);
    if (in.objects != 0 || hk_gc_check(gc) != HK_OK) abort();
    hk_gc_destroy(gc);
    hk_gc_destroy(other);
    return 0;
}
