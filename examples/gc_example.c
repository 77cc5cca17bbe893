/*
 * examples/gc_example.c - a script VM's objects under heapkit's collector.
 *
 * Each frame the "script" builds short-lived structs and arrays (the
 * Papyrus pattern of seed 001) and keeps a small scene graph alive; the
 * frame gives the collector 10 microseconds. Allocation-debt pacing keeps
 * the backlog bounded even when 10 us is not enough. On "save", a full pass
 * also reclaims a reference cycle the script left behind.
 */
#include <heapkit/gc.h>

#include <stdio.h>

typedef struct entity {
    hk_gc_obj *parent; /* counted references, listed by entity_trace */
    hk_gc_obj *items;  /* an array of references */
    int hp;
} entity;

static void entity_trace(void *data, size_t size, hk_gc_visit_fn visit, void *ctx, void *user) {
    (void)size;
    (void)user;
    entity *e = (entity *)data;
    visit(e->parent, ctx);
    visit(e->items, ctx);
}

static void array_trace(void *data, size_t size, hk_gc_visit_fn visit, void *ctx, void *user) {
    (void)user;
    hk_gc_obj **v = (hk_gc_obj **)data;
    for (size_t i = 0; i < size / sizeof *v; i++) visit(v[i], ctx);
}

static const hk_gc_type k_entity = {"entity", sizeof(entity), entity_trace, NULL, NULL};
static const hk_gc_type k_array = {"array", 0, array_trace, NULL, NULL};
static const hk_gc_type k_vec3 = {"vec3", 3 * sizeof(float), NULL, NULL, NULL};

int main(void) {
    hk_gc *gc = hk_gc_create(&(hk_gc_desc){.name = "script", .pace_bytes = 64 * 1024});
    if (!gc) return 1;

    /* A scene that stays alive: a root entity holding an array of 8 items. */
    hk_gc_obj *root = hk_gc_alloc(gc, &k_entity);
    hk_gc_obj *items = hk_gc_alloc_array(gc, &k_array, 8, sizeof(hk_gc_obj *));
    entity *r = (entity *)hk_gc_data(gc, root);
    hk_gc_assign(gc, &r->items, items); /* root now holds items */
    hk_gc_release(gc, items);           /* ... and we do not */
    hk_gc_obj **slots = (hk_gc_obj **)hk_gc_data(gc, items);
    for (int i = 0; i < 8; i++) {
        hk_gc_obj *v = hk_gc_alloc(gc, &k_vec3);
        hk_gc_assign(gc, &slots[i], v);
        hk_gc_release(gc, v);
    }

    for (int frame = 0; frame < 300; frame++) {
        /* The script: temporaries dropped as soon as they are made. */
        for (int i = 0; i < 1000; i++) hk_gc_release(gc, hk_gc_alloc(gc, &k_vec3));
        for (int i = 0; i < 1000; i++)
            hk_gc_release(gc, hk_gc_alloc_array(gc, &k_array, 0, sizeof(hk_gc_obj *)));
        /* Replace one scene item: the old one becomes garbage. */
        hk_gc_obj *v = hk_gc_alloc(gc, &k_vec3);
        hk_gc_assign(gc, &slots[frame % 8], v);
        hk_gc_release(gc, v);
        hk_gc_step(gc, 10 * 1000); /* 10 us of collection per frame */
    }

    /* Two entities pointing at each other, then dropped: a cycle. */
    hk_gc_obj *a = hk_gc_alloc(gc, &k_entity), *b = hk_gc_alloc(gc, &k_entity);
    hk_gc_assign(gc, &((entity *)hk_gc_data(gc, a))->parent, b);
    hk_gc_assign(gc, &((entity *)hk_gc_data(gc, b))->parent, a);
    hk_gc_release(gc, a);
    hk_gc_release(gc, b);

    hk_gc_info in;
    hk_gc_get_info(gc, &in);
    printf("after 300 frames: %zu live, backlog %zu, %llu freed, step p99 %llu ns, %llu paced steps\n",
           in.live, in.backlog, (unsigned long long)in.freed, (unsigned long long)in.step_p99_ns,
           (unsigned long long)in.paced_steps);

    size_t n = hk_gc_collect(gc); /* "save": everything unreachable, cycles included */
    hk_gc_get_info(gc, &in);
    printf("full pass: %zu reclaimed (%llu from cycles) in %llu ns; %zu objects left (the scene)\n", n,
           (unsigned long long)in.freed_cycles, (unsigned long long)in.collect_last_ns, in.objects);

    int ok = hk_gc_check(gc) == HK_OK && in.objects == 10 && in.backlog == 0;
    hk_gc_release(gc, root);
    hk_gc_collect(gc);
    hk_gc_destroy(gc);
    return ok ? 0 : 1;
}
