/*
 * fuzz/pool_fuzz.c - random operation sequences on a pool with few fast
 * slots (so the overflow path works too), decoded from the input (3 bytes an
 * operation), against a model: every object with its ID, address, fill
 * byte and parent; the members of 4 lists in order (2 link slots); the
 * objects freed inside an open defer scope (dead at once, memory kept until
 * the scope closes, on_destroy then).
 * After every operation: every live object is found at its address with
 * its bytes, parent and child count; every dead one is not found; the
 * lists hold exactly the model's members in the model's order; the info
 * counts agree; on_destroy ran once per released object; hk_pool_check
 * passes.
 * Two frame lists (pool.h) against a model of the IDs pushed since their
 * last clear: every iteration visits exactly the entries whose objects are
 * alive, in push order; iterations that free some of what they visit
 * (deferred to their end).
 * Misuse fed on purpose: freed IDs (double free, stale use, pushed on a
 * frame list), another pool's IDs, the none ID, invalid children modes,
 * parent cycles, objects pushed on destroyed lists, unbalanced defer_end.
 * The input's first byte also picks HK_POOL_HOT_REUSE.
 */
#include "heapkit/pool.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PF_MAX_OPS 250
#define PF_OBJS    48
#define PF_LISTS   4
#define PF_ELEM    24
#define PF_FLISTS  2
#define PF_FL_MAX  96

typedef struct pf_obj {
    uint32_t id; /* 0: unused model slot */
    unsigned char *p;
    unsigned char fill;
    int parent;  /* model index, -1 none */
    int pending; /* freed inside the open defer scope */
} pf_obj;

typedef struct pf_list {
    hk_pool_list l;
    uint32_t link;
    int live;
    int n;
    int member[PF_OBJS]; /* model indexes, front to back */
} pf_list;

typedef struct pf_flist {
    hk_pool_flist f;
    int n;
    uint32_t ids[PF_FL_MAX]; /* pushed since the last clear, in order */
} pf_flist;

static pf_obj o[PF_OBJS];
static pf_list L[PF_LISTS];
static pf_flist F[PF_FLISTS];
static uint32_t freed[16];
static int nfreed;
static long destroyed, released_expected;
static int pf_reports;

static void pf_on_error(const hk_error *e, void *user) {
    (void)e;
    (void)user;
    pf_reports++;
}
static void pf_on_destroy(hk_pool *p, hk_pool_id id, void *obj, void *user) {
    (void)p;
    (void)id;
    (void)obj;
    (void)user;
    destroyed++;
}

static void pf_fail(const char *what, int op) {
    fprintf(stderr, "pool_fuzz: %s (operation %d)\n", what, op);
    abort();
}

static void pf_paint(pf_obj *x) {
    for (int i = 0; i < PF_ELEM; i++) x->p[i] = (unsigned char)(x->fill + i);
}
static int pf_intact(const pf_obj *x) {
    for (int i = 0; i < PF_ELEM; i++)
        if (x->p[i] != (unsigned char)(x->fill + i)) return 0;
    return 1;
}

static int pf_live(int k) { return o[k].id && !o[k].pending; }

static void pf_list_drop(int k) { /* k leaves every list */
    for (int l = 0; l < PF_LISTS; l++) {
        int w = 0;
        for (int i = 0; i < L[l].n; i++)
            if (L[l].member[i] != k) L[l].member[w++] = L[l].member[i];
        L[l].n = w;
    }
}

/* The object dies (its subtree too, or its children detach). */
static void pf_kill(int k, int subtree, int deferred) {
    for (int c = 0; c < PF_OBJS; c++)
        if (pf_live(c) && o[c].parent == k) {
            if (subtree)
                pf_kill(c, 1, deferred);
            else
                o[c].parent = -1;
        }
    pf_list_drop(k);
    freed[nfreed++ % 16] = o[k].id;
    released_expected++;
    o[k].parent = -1;
    if (deferred)
        o[k].pending = 1;
    else
        o[k].id = 0;
}

static int pf_is_ancestor(int anc, int k) { /* anc is k or above it */
    for (int x = k; x >= 0; x = o[x].parent)
        if (x == anc) return 1;
    return 0;
}

/* The model object alive with ID v, or -1. */
static int pf_find_live(uint32_t v) {
    for (int k = 0; k < PF_OBJS; k++)
        if (v && o[k].id == v && !o[k].pending) return k;
    return -1;
}

static void pf_verify(hk_pool *p, int depth, int op) {
    size_t live = 0;
    for (int k = 0; k < PF_OBJS; k++) {
        if (!o[k].id) continue;
        hk_pool_id id = {o[k].id};
        if (o[k].pending) {
            if (hk_pool_get(p, id)) pf_fail("a pending object is still found", op);
            if (!pf_intact(&o[k])) pf_fail("a pending object's memory changed inside the scope", op);
            continue;
        }
        live++;
        if (hk_pool_get(p, id) != o[k].p) pf_fail("get() does not give the object's address", op);
        if (!pf_intact(&o[k])) pf_fail("object contents changed", op);
        if (hk_pool_id_of(p, o[k].p).value != o[k].id) pf_fail("id_of() disagrees", op);
        uint32_t par = o[k].parent >= 0 ? o[o[k].parent].id : 0;
        if (hk_pool_parent(p, id).value != par) pf_fail("parent differs from the model", op);
        uint32_t kids = 0;
        for (int c = 0; c < PF_OBJS; c++) kids += pf_live(c) && o[c].parent == k;
        if (hk_pool_child_count(p, id) != kids) pf_fail("child count differs", op);
    }
    for (int l = 0; l < PF_LISTS; l++) {
        if (!L[l].live) continue;
        if (hk_pool_list_count(p, L[l].l) != (size_t)L[l].n) pf_fail("list count differs", op);
        hk_pool_id it = hk_pool_list_first(p, L[l].l);
        for (int i = 0; i < L[l].n; i++) {
            if (it.value != o[L[l].member[i]].id) pf_fail("list order differs", op);
            it = hk_pool_list_next(p, L[l].l, it);
        }
        if (it.value) pf_fail("list longer than the model", op);
    }
    for (int f = 0; f < PF_FLISTS; f++) {
        if (hk_pool_flist_count(p, F[f].f) != (size_t)F[f].n) pf_fail("frame list count differs", op);
        int e = 0;
        void *obj;
        for (hk_pool_fiter it = hk_pool_fiter_begin(p, F[f].f); (obj = hk_pool_fiter_next(&it)) != NULL;) {
            while (e < F[f].n && pf_find_live(F[f].ids[e]) < 0) e++;
            if (e == F[f].n) pf_fail("frame list visits more than the model", op);
            if (it.id.value != F[f].ids[e] || obj != o[pf_find_live(F[f].ids[e])].p)
                pf_fail("frame list visit differs from the model", op);
            e++;
        }
        while (e < F[f].n)
            if (pf_find_live(F[f].ids[e++]) >= 0) pf_fail("frame list skipped a live entry", op);
    }
    hk_pool_info in;
    hk_pool_get_info(p, &in);
    if (in.live != live) pf_fail("info: live objects differ", op);
    if (depth == 0 && destroyed != released_expected) pf_fail("on_destroy count differs", op);
    if (hk_pool_check(p) != HK_OK) pf_fail("check failed", op);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static unsigned char mem[64 << 10] __attribute__((aligned(64)));
    static const uint32_t flagsets[4] = {0, HK_FLAG_FILL, HK_POOL_WRAP, HK_FLAG_PARANOID};
    hk_pool_desc d;
    memset(&d, 0, sizeof d);
    d.elem_size = PF_ELEM;
    d.capacity = 4 + (data[0] & 15);
    d.index_bits = 6;
    d.links = 2;
    d.max_lists = 8;
    d.flags = flagsets[(data[0] >> 4) & 3] | ((data[0] & 0x80) ? HK_POOL_HOT_REUSE : 0u);
    d.on_error = pf_on_error;
    d.on_destroy = pf_on_destroy;
    if (data[0] & 0x40) { /* caller memory for the fast slots */
        d.memory = mem;
        d.size = hk_pool_memory_size(&d);
        if (d.size > sizeof mem) pf_fail("memory size", -1);
    }
    hk_pool *p = hk_pool_create(&d);
    hk_pool_desc od;
    memset(&od, 0, sizeof od);
    od.elem_size = 8;
    od.capacity = 4;
    od.on_error = pf_on_error;
    hk_pool *other = hk_pool_create(&od);
    if (!p || !other) pf_fail("create failed", -1);
    hk_pool_id foreign = hk_pool_alloc(other, NULL);
    memset(o, 0, sizeof o);
    memset(L, 0, sizeof L);
    memset(freed, 0, sizeof freed);
    nfreed = 0;
    destroyed = released_expected = 0;
    for (int l = 0; l < PF_LISTS; l++) {
        L[l].link = (uint32_t)(l & 1);
        L[l].l = hk_pool_list_create(p, L[l].link, "fz");
        L[l].live = L[l].l.value != 0;
        if (!L[l].live) pf_fail("list create failed", -1);
    }
    memset(F, 0, sizeof F);
    for (int f = 0; f < PF_FLISTS; f++) {
        F[f].f = hk_pool_flist_create(p, (uint32_t)f * 8u, "fz");
        if (!F[f].f.value) pf_fail("frame list create failed", -1);
    }
    int depth = 0;
    if (size > 1 + 3 * PF_MAX_OPS) size = 1 + 3 * PF_MAX_OPS;
    int op = 0;
    for (size_t i = 1; i + 3 <= size; i += 3, op++) {
        unsigned kind = data[i] % 24, a = data[i + 1], b = data[i + 2];
        int k = (int)(a % PF_OBJS), j = (int)(b % PF_OBJS);
        pf_obj *x = &o[k];
        hk_pool_id id = {x->id};
        int before = pf_reports;
        hk_result r;
        if (!x->id && kind < 16) { /* an unused model slot: allocate, maybe as a child */
            void *obj = NULL;
            hk_pool_id nid;
            int parent = (kind & 1) && pf_live(j) ? j : -1;
            nid = parent >= 0 ? hk_pool_alloc_child(p, (hk_pool_id){o[parent].id}, &obj)
                              : hk_pool_alloc(p, &obj);
            if (!nid.value) {
                if (pf_reports == before) pf_fail("failed allocation not reported", op);
            } else {
                if (!obj || ((uintptr_t)obj & 15)) pf_fail("bad object address", op);
                x->id = nid.value;
                x->p = (unsigned char *)obj;
                x->fill = (unsigned char)(a + b);
                x->parent = parent;
                x->pending = 0;
                if ((d.flags & HK_FLAG_ZERO))
                    for (int q = 0; q < PF_ELEM; q++)
                        if (x->p[q]) pf_fail("not zero", op);
                pf_paint(x);
            }
        } else if (x->pending && kind < 16) {
            /* a freed-in-scope object: any use is stale or a double free */
            r = hk_pool_free(p, id, HK_POOL_FREE_SUBTREE);
            if (r == HK_OK || pf_reports == before) pf_fail("free of a pending object accepted", op);
        } else if (kind < 16) {
            switch (kind % 8) {
            case 0: /* free, subtree or detach */
            case 1: {
                int subtree = kind % 8 == 0;
                r = hk_pool_free(p, id, subtree ? HK_POOL_FREE_SUBTREE : HK_POOL_DETACH);
                if (r != HK_OK) pf_fail("free failed", op);
                pf_kill(k, subtree, depth > 0);
                break;
            }
            case 2: { /* set parent (cycles refused) */
                int par = pf_live(j) && (b & 1) ? j : -1;
                r = hk_pool_set_parent(p, id, (hk_pool_id){par >= 0 ? o[par].id : 0});
                int cycle = par >= 0 && pf_is_ancestor(k, par);
                if (cycle) {
                    if (r == HK_OK || pf_reports == before) pf_fail("parent cycle accepted", op);
                } else {
                    if (r != HK_OK) pf_fail("set_parent failed", op);
                    x->parent = par;
                }
                break;
            }
            case 3:
            case 4: { /* push back / front on a list (moves it off the other list of that link) */
                pf_list *ls = &L[b % PF_LISTS];
                r = (kind % 8 == 3) ? hk_pool_list_push_back(p, ls->l, id)
                                    : hk_pool_list_push_front(p, ls->l, id);
                if (!ls->live) {
                    if (r == HK_OK || pf_reports == before) pf_fail("push on a destroyed list accepted", op);
                    break;
                }
                if (r != HK_OK) pf_fail("push failed", op);
                for (int l = 0; l < PF_LISTS; l++) /* off its list of this link */
                    if (L[l].link == ls->link) {
                        int w = 0;
                        for (int q = 0; q < L[l].n; q++)
                            if (L[l].member[q] != k) L[l].member[w++] = L[l].member[q];
                        L[l].n = w;
                    }
                if (kind % 8 == 3) {
                    ls->member[ls->n++] = k;
                } else {
                    memmove(&ls->member[1], &ls->member[0], (size_t)ls->n * sizeof(int));
                    ls->member[0] = k;
                    ls->n++;
                }
                break;
            }
            case 5: { /* remove from a list (not on it: refused) */
                pf_list *ls = &L[b % PF_LISTS];
                int on = 0;
                for (int q = 0; q < ls->n; q++) on |= ls->member[q] == k;
                r = hk_pool_list_remove(p, ls->l, id);
                if (ls->live && on) {
                    if (r != HK_OK) pf_fail("remove failed", op);
                    int w = 0;
                    for (int q = 0; q < ls->n; q++)
                        if (ls->member[q] != k) ls->member[w++] = ls->member[q];
                    ls->n = w;
                } else if (r == HK_OK || pf_reports == before) {
                    pf_fail("remove of a non-member accepted", op);
                }
                break;
            }
            case 6: /* invalid children mode */
                r = hk_pool_free(p, id, (hk_pool_children)(2 + (b & 7)));
                if (r == HK_OK || pf_reports == before) pf_fail("invalid children mode accepted", op);
                break;
            default: /* rewrite the object's bytes */
                x->fill = (unsigned char)b;
                pf_paint(x);
                break;
            }
        } else if (kind == 16) { /* defer scopes */
            if ((b & 1) && depth < 3) {
                hk_pool_defer_begin(p);
                depth++;
            } else {
                r = hk_pool_defer_end(p);
                if (depth == 0) {
                    if (r == HK_OK || pf_reports == before) pf_fail("unbalanced defer_end accepted", op);
                } else {
                    if (r != HK_OK) pf_fail("defer_end failed", op);
                    if (--depth == 0)
                        for (int q = 0; q < PF_OBJS; q++)
                            if (o[q].pending) o[q].id = 0, o[q].pending = 0;
                }
            }
        } else if (kind == 17) { /* misuse: freed IDs */
            uint32_t f = freed[a % 16];
            if (!f) continue;
            int still = 0;
            for (int q = 0; q < PF_OBJS; q++) still |= o[q].id == f;
            if (still) continue; /* pending (checked above) or the same value issued again */
            r = hk_pool_free(p, (hk_pool_id){f}, HK_POOL_FREE_SUBTREE);
            if (r == HK_OK || pf_reports == before) pf_fail("free of a freed ID accepted", op);
            if (hk_pool_get(p, (hk_pool_id){f})) pf_fail("get() of a freed ID", op);
            if (hk_pool_list_push_back(p, L[0].l, (hk_pool_id){f}) == HK_OK)
                pf_fail("push of a freed ID", op);
        } else if (kind == 18) { /* misuse: another pool's ID, the none ID */
            hk_pool_id bad = (b & 1) ? foreign : (hk_pool_id){0};
            int here = 0;
            for (int q = 0; q < PF_OBJS; q++) here |= bad.value && o[q].id == bad.value;
            if (here) continue;
            r = hk_pool_free(p, bad, HK_POOL_FREE_SUBTREE);
            if (r == HK_OK || pf_reports == before) pf_fail("foreign or none ID accepted", op);
            if (hk_pool_get(p, bad)) pf_fail("get() of a foreign ID", op);
        } else if (kind == 19) { /* destroy a list, or create it again */
            pf_list *ls = &L[a % PF_LISTS];
            if (ls->live) {
                if (hk_pool_list_destroy(p, ls->l) != HK_OK) pf_fail("list destroy failed", op);
                ls->live = 0;
                ls->n = 0;
            } else if (b & 1) {
                if (hk_pool_list_destroy(p, ls->l) == HK_OK)
                    pf_fail("destroy of a destroyed list accepted", op);
            } else {
                ls->l = hk_pool_list_create(p, ls->link, "again");
                ls->live = ls->l.value != 0;
                if (!ls->live) pf_fail("list create failed", op);
            }
        } else if (kind == 20) { /* clear a list */
            pf_list *ls = &L[a % PF_LISTS];
            r = hk_pool_list_clear(p, ls->l);
            if (ls->live) {
                if (r != HK_OK) pf_fail("clear failed", op);
                ls->n = 0;
            }
        } else if (kind == 22) { /* frame list push: a live object, or a freed ID (refused) */
            pf_flist *fl = &F[b % PF_FLISTS];
            uint32_t v = x->id && !x->pending ? x->id : freed[a % 16];
            if (!v || fl->n == PF_FL_MAX) continue;
            int alive = pf_find_live(v) >= 0, still = 0;
            for (int q = 0; q < PF_OBJS; q++) still |= o[q].id == v;
            if (!alive && still) continue; /* pending: checked below through the iteration */
            r = hk_pool_flist_push(p, fl->f, (hk_pool_id){v});
            if (alive) {
                if (r != HK_OK) pf_fail("frame list push failed", op);
                fl->ids[fl->n++] = v;
            } else if (r == HK_OK || pf_reports == before) {
                pf_fail("push of a freed ID on a frame list accepted", op);
            }
        } else if (kind == 23) { /* frame list: clear, or iterate freeing some visits */
            pf_flist *fl = &F[a % PF_FLISTS];
            if (b & 1) {
                if (hk_pool_flist_clear(p, fl->f) != HK_OK) pf_fail("frame list clear failed", op);
                fl->n = 0;
            } else {
                void *obj;
                for (hk_pool_fiter it = hk_pool_fiter_begin(p, fl->f);
                     (obj = hk_pool_fiter_next(&it)) != NULL;) {
                    int q = pf_find_live(it.id.value);
                    if (q < 0 || obj != o[q].p) pf_fail("frame iteration reached a dead or wrong object", op);
                    if (((o[q].fill ^ b) & 6) != 0) continue;
                    if (hk_pool_free(p, it.id, HK_POOL_FREE_SUBTREE) != HK_OK)
                        pf_fail("free in a frame loop", op);
                    pf_kill(q, 1, 1); /* deferred to the loop's end */
                    if (!pf_intact(&o[q])) pf_fail("memory of an object freed in the loop changed", op);
                }
                if (depth == 0) /* the loop's scope was the outermost: released */
                    for (int q = 0; q < PF_OBJS; q++)
                        if (o[q].pending) o[q].id = 0, o[q].pending = 0;
            }
        } else { /* wild addresses are no objects */
            if (hk_pool_id_of(p, (const void *)(uintptr_t)(a + 1)).value) pf_fail("id_of a wild address", op);
            if (x->id && !x->pending && hk_pool_id_of(p, x->p + 1 + b % (PF_ELEM - 1)).value)
                pf_fail("id_of an interior address", op);
        }
        pf_verify(p, depth, op);
    }
    while (depth > 0) {
        if (hk_pool_defer_end(p) != HK_OK) pf_fail("final defer_end failed", op);
        depth--;
    }
    for (int q = 0; q < PF_OBJS; q++)
        if (o[q].pending) o[q].id = 0, o[q].pending = 0;
    pf_verify(p, 0, op);
    hk_pool_destroy(p);
    hk_pool_destroy(other);
    return 0;
}
