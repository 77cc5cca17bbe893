/*
 * bench/lib_gc_papyrus.h - the Papyrus VM collector of seed
 * 001_621fea22bf69eb89, reproduced as a baseline for heapkit's gc module
 * (used by bench/suite_gc.c and tests/test_gc_seed.c). Header-only, static
 * inline, no heapkit dependency.
 *
 * Model: every object sits in its type's registry array, which holds one
 * reference (`rc` includes it: rc == 1 means only the collector holds the
 * object, the seed's QRefCount() == 1). Destroying an object (RemoveFast
 * from the registry) releases the objects it references, which may then
 * reach rc == 1 and be found by a later scan.
 *
 * pgc_process_buggy is the seed's original ProcessEntries (cursor bug
 * included, translated line by line); pgc_process_fixed is the seed's
 * rewritten ProcessEntries; pgc_full_pass_buggy is FullGarbageCollectionPass
 * (loop until a whole round over every list frees nothing). A budget of 0
 * means "no time limit" (the seed's TimeBudget <= 0).
 */
#ifndef HEAPKIT_BENCH_LIB_GC_PAPYRUS_H
#define HEAPKIT_BENCH_LIB_GC_PAPYRUS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct pgc_obj {
    uint32_t rc; /* registry reference included */
    uint32_t nchild;
    struct pgc_obj *child[2]; /* references this object holds (counted) */
    void *payload;            /* the object's data, from malloc */
    size_t size;
} pgc_obj;

typedef struct pgc_list {
    pgc_obj **v;
    uint32_t n, cap;
    uint32_t next_index; /* the seed's NextIndexToClean */
} pgc_list;

typedef struct pgc_vm {
    pgc_list objects, arrays, structs; /* the seed's three registries */
    uint64_t (*clock)(void *user);
    void *clock_user;
    uint64_t destroyed;
    uint64_t rounds; /* full-pass rounds run */
    int oom;
} pgc_vm;

static inline int pgc_list_push(pgc_vm *vm, pgc_list *l, pgc_obj *o) {
    if (l->n == l->cap) {
        uint32_t nc = l->cap ? l->cap * 2 : 1024;
        pgc_obj **nv = (pgc_obj **)realloc(l->v, (size_t)nc * sizeof *nv);
        if (!nv) {
            vm->oom = 1;
            return 0;
        }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = o;
    return 1;
}

/* `new T` in a script: the registry's reference plus the creator's (rc 2). */
static inline pgc_obj *pgc_new(pgc_vm *vm, pgc_list *l, size_t size) {
    pgc_obj *o = (pgc_obj *)calloc(1, sizeof *o);
    if (!o) {
        vm->oom = 1;
        return NULL;
    }
    o->rc = 2;
    o->size = size;
    if (size) {
        o->payload = calloc(1, size);
        if (!o->payload) {
            free(o);
            vm->oom = 1;
            return NULL;
        }
    }
    if (!pgc_list_push(vm, l, o)) {
        free(o->payload);
        free(o);
        return NULL;
    }
    return o;
}

/* The script drops its reference (the smart pointer goes out of scope). */
static inline void pgc_release(pgc_obj *o) { o->rc--; }

/* parent.field[i] = child (the child's count goes up). */
static inline void pgc_set_child(pgc_obj *parent, pgc_obj *child) {
    if (parent->nchild < 2) {
        parent->child[parent->nchild++] = child;
        child->rc++;
    }
}

/* The last reference went away: release what the object references. */
static inline void pgc_destroy(pgc_vm *vm, pgc_obj *o) {
    for (uint32_t i = 0; i < o->nchild; i++) o->child[i]->rc--;
    free(o->payload);
    free(o);
    vm->destroyed++;
}

/* BSTArray::RemoveFast: the last element moves into the hole. */
static inline void pgc_remove_fast(pgc_vm *vm, pgc_list *l, uint32_t index) {
    pgc_obj *o = l->v[index];
    l->v[index] = l->v[l->n - 1];
    l->n--;
    pgc_destroy(vm, o);
}

static inline uint64_t pgc_now(const pgc_vm *vm) { return vm->clock(vm->clock_user); }

/* The seed's original ProcessEntries, bug included. */
static inline int pgc_process_buggy(pgc_vm *vm, pgc_list *e, uint64_t budget_ns) {
    int did_gc = 0;
    const uint64_t start = pgc_now(vm);
    if (e->next_index >= e->n) e->next_index = e->n - 1; /* wraps to UINT32_MAX when empty, as in the seed */
    uint32_t index = e->next_index;
    if (e->n) {
        do {
            if (e->v[index]->rc == 1) {
                did_gc = 1;
                pgc_remove_fast(vm, e, index);
                if (e->n && e->next_index >= e->n) e->next_index = e->n - 1;
                /* Note 1: index is not advanced after a removal; it may equal next_index. */
            } else {
                index++;
            }
            if (index >= e->n) index = 0;  /* Note 2: wrap around like a ring buffer */
        } while (index != e->next_index && /* BUG: exits after one object when the first is removed */
                 (budget_ns == 0 || pgc_now(vm) - start <= budget_ns) && e->n);
    }
    e->next_index = index;
    return did_gc;
}

/* The seed's rewritten ProcessEntries (cursor fixed, at most one wrap). */
static inline int pgc_process_fixed(pgc_vm *vm, pgc_list *e, uint64_t budget_ns) {
    int did_gc = 0;
    const uint64_t start = pgc_now(vm);
    const uint64_t max_end = start + budget_ns;
    uint32_t max_checked = e->n;
    uint32_t index = e->next_index < e->n ? e->next_index : e->n - 1;
    while (e->n) {
        if (e->v[index]->rc == 1) {
            did_gc = 1;
            pgc_remove_fast(vm, e, index);
        }
        if (index-- == 0) index = e->n - 1;
        if (budget_ns > 0 && pgc_now(vm) >= max_end) break;
        if (max_checked-- == 1) break;
    }
    e->next_index = index;
    return did_gc;
}

/* The seed's FullGarbageCollectionPass: rounds over every registry until a
 * whole round frees nothing. Gives up (returns 0) when the clock passes
 * `deadline_ns` (0: never) between rounds; returns 1 when done. */
static inline int pgc_full_pass_buggy(pgc_vm *vm, uint64_t deadline_ns) {
    for (int did_gc = 1; did_gc;) {
        if (deadline_ns && pgc_now(vm) > deadline_ns) return 0;
        vm->rounds++;
        did_gc = pgc_process_buggy(vm, &vm->objects, 0);
        did_gc = pgc_process_buggy(vm, &vm->arrays, 0) || did_gc;
        did_gc = pgc_process_buggy(vm, &vm->structs, 0) || did_gc;
    }
    return 1;
}

/* Garbage the collector has not destroyed yet (rc == 1 in a registry). */
static inline size_t pgc_backlog(const pgc_vm *vm) {
    const pgc_list *ls[3] = {&vm->objects, &vm->arrays, &vm->structs};
    size_t n = 0;
    for (int k = 0; k < 3; k++)
        for (uint32_t i = 0; i < ls[k]->n; i++) n += ls[k]->v[i]->rc == 1;
    return n;
}

static inline size_t pgc_count(const pgc_vm *vm) {
    return (size_t)vm->objects.n + vm->arrays.n + vm->structs.n;
}

/* Frees everything (shutdown; no counting). */
static inline void pgc_vm_free(pgc_vm *vm) {
    pgc_list *ls[3] = {&vm->objects, &vm->arrays, &vm->structs};
    for (int k = 0; k < 3; k++) {
        for (uint32_t i = 0; i < ls[k]->n; i++) {
            free(ls[k]->v[i]->payload);
            free(ls[k]->v[i]);
        }
        free(ls[k]->v);
        memset(ls[k], 0, sizeof *ls[k]);
    }
}

#endif /* HEAPKIT_BENCH_LIB_GC_PAPYRUS_H */
