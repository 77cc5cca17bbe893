/* examples/pool_example.c - the pool in a tiny game loop: enemies with
 * sparks on a tick list and a draw layer, a mid-tick death, a stale ID. */
#include <heapkit/pool.h>

#include <stdio.h>

typedef struct vm {
    int frames_left;
    float x, y;
} vm;

static int tick(hk_pool *p, hk_pool_id id, void *obj, void *user) {
    vm *v = (vm *)obj;
    (void)user;
    v->y += 1.0f;
    if (--v->frames_left == 0)
        hk_pool_free(p, id, HK_POOL_FREE_SUBTREE); /* deferred to the end of the tick */
    return 0;
}

static int draw(hk_pool *p, hk_pool_id id, void *obj, void *user) {
    (void)p;
    (void)id;
    (void)obj;
    ++*(int *)user;
    return 0;
}

int main(void) {
    hk_pool_desc desc = {0};
    desc.elem_size = sizeof(vm);
    desc.name = "anm";
    hk_pool *vms = hk_pool_create(&desc);
    if (!vms) return 1;
    hk_pool_list tick_list = hk_pool_list_create(vms, 0, "tick");
    hk_pool_list layer = hk_pool_list_create(vms, 1, "layer 3");
    vm *v;
    hk_pool_id enemy = hk_pool_alloc(vms, (void **)&v);
    v->frames_left = 2;
    hk_pool_list_push_back(vms, tick_list, enemy);
    hk_pool_id spark = {0};
    for (int i = 0; i < 4; i++) {
        spark = hk_pool_alloc_child(vms, enemy, (void **)&v);
        v->frames_left = 100;
        hk_pool_list_push_back(vms, tick_list, spark);
        hk_pool_list_push_back(vms, layer, spark);
    }
    for (int frame = 0; frame < 3; frame++) {
        int drawn = 0;
        hk_pool_list_each(vms, tick_list, tick, NULL);
        hk_pool_list_each(vms, layer, draw, &drawn);
        printf("frame %d: %zu ticking, %d drawn, spark %s\n", frame, hk_pool_list_count(vms, tick_list),
               drawn, hk_pool_get(vms, spark) ? "alive" : "gone (stale ID -> NULL)");
    }
    hk_pool_destroy(vms);
    return 0;
}
