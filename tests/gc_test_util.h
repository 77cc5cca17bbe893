/* tests/gc_test_util.h - the gc tests' common object type: a node with two
 * reference fields (traced) and a payload, whose finalizer counts in
 * g_finalized. One copy for test_gc.c, test_gc_handles.c,
 * test_gc_collect_step.c and test_gc_model.c. */
#ifndef GC_TEST_UTIL_H
#define GC_TEST_UTIL_H

#include "heapkit/gc.h"

typedef struct node {
    hk_gc_obj *ref[2];
    int value;
} node;

static int g_finalized;
static void node_trace(void *data, size_t size, hk_gc_visit_fn visit, void *ctx, void *user) {
    (void)size;
    (void)user;
    node *n = (node *)data;
    visit(n->ref[0], ctx);
    visit(n->ref[1], ctx);
}
static void node_finalize(void *data, size_t size, void *user) {
    (void)data;
    (void)size;
    (void)user;
    g_finalized++;
}
static const hk_gc_type k_node = {"node", sizeof(node), node_trace, node_finalize, NULL};

#endif /* GC_TEST_UTIL_H */
