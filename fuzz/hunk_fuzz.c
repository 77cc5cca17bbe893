/*
 * fuzz/hunk_fuzz.c - random operation sequences on a hunk, decoded from the
 * input (3 bytes an operation), against a model: the blocks of each end
 * (a stack, each block with its size and fill byte), the temp block, and
 * up to 8 marks with, for each, the block that was on top of its end when
 * it was taken (a mark is valid while that block is still there).
 * After every operation: every block holds its bytes, the stats agree with
 * the model (live blocks, requested bytes), hk_hunk_check passes.
 * Misuse fed on purpose: stale marks, marks of another hunk, zeroed marks,
 * marks of the other end, alignments that are no powers of two, sizes near
 * SIZE_MAX, tenant claims outside the free middle, where() of wild
 * addresses. Any disagreement aborts.
 */
#include "heapkit/hunk.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HF_MAX_OPS   250
#define HF_MAX_BLK   64
#define HF_MAX_MARKS 8

typedef struct hf_blk {
    unsigned char *p;
    size_t n;
    unsigned char fill;
    uint32_t uid; /* unique in the input: marks name the block on top */
    int blank;    /* never written: what it holds is the hunk's business (stale headers, say) */
} hf_blk;

typedef struct hf_mark {
    hk_hunk_mark m;
    int used;
    int end;      /* 0 low, 1 high */
    size_t depth; /* blocks on that end when taken */
    uint32_t top; /* uid of the block on top then (0: none) */
} hf_mark;

typedef struct hf_model {
    hf_blk end[2][HF_MAX_BLK];
    size_t count[2];
    hf_blk temp;
    int temp_live;
    hf_mark marks[HF_MAX_MARKS];
    uint32_t next_uid;
} hf_model;

static int hf_reports;
static void hf_on_error(const hk_error *e, void *user) {
    (void)e;
    (void)user;
    hf_reports++;
}

static void hf_fail(const char *what, int op) {
    fprintf(stderr, "hunk_fuzz: %s (operation %d)\n", what, op);
    abort();
}

/* A size the compiler cannot see (absurd sizes on purpose). */
static size_t hf_opaque(size_t n) {
    __asm__ volatile("" : "+r"(n));
    return n;
}

static void hf_paint(hf_blk *b) {
    for (size_t i = 0; i < b->n; i++) b->p[i] = (unsigned char)(b->fill + i);
}
static int hf_intact(const hf_blk *b) {
    for (size_t i = 0; i < b->n; i++)
        if (b->p[i] != (unsigned char)(b->fill + i)) return 0;
    return 1;
}

static int hf_mark_valid(const hf_model *m, const hf_mark *k) {
    if (k->depth > m->count[k->end]) return 0;
    return k->depth == 0 || m->end[k->end][k->depth - 1].uid == k->top;
}

static void hf_verify(hk_hunk *h, const hf_model *m, int op) {
    size_t live = 0, req = 0;
    for (int e = 0; e < 2; e++)
        for (size_t i = 0; i < m->count[e]; i++) {
            if (!m->end[e][i].blank && !hf_intact(&m->end[e][i])) hf_fail("block contents changed", op);
            live++;
            req += m->end[e][i].n;
        }
    if (m->temp_live) {
        if (!hf_intact(&m->temp)) hf_fail("temp block contents changed", op);
        live++;
        req += m->temp.n;
    }
    hk_stats st;
    if (hk_hunk_stats(h, &st) != HK_OK) hf_fail("stats failed", op);
    if (st.live_blocks != live) hf_fail("stats: live blocks differ from the model", op);
    if (st.used != req) hf_fail("stats: requested bytes differ from the model", op);
    hk_hunk_info in;
    if (hk_hunk_get_info(h, &in) != HK_OK) hf_fail("get_info failed", op);
    if (in.low_blocks != m->count[0]) hf_fail("info: low blocks differ", op);
    if (in.high_blocks != m->count[1] + (size_t)m->temp_live) hf_fail("info: high blocks differ", op);
    if ((in.temp_bytes != 0) != (m->temp_live != 0)) hf_fail("info: temp block differs", op);
    if (hk_hunk_check(h) != HK_OK) hf_fail("check failed", op);
}

/* The hunk dropped the temp block (a high allocation, a high mark query,
 * or a low allocation that needed its room). */
static void hf_sync_temp(hk_hunk *h, hf_model *m) {
    hk_hunk_info in;
    hk_hunk_get_info(h, &in);
    if (!in.temp_bytes) m->temp_live = 0;
}

/* A tenant that gives back whatever is asked (the claim shrinks). */
static size_t hf_reclaim(void *user, int high, size_t bytes) {
    (void)user;
    (void)high;
    return (bytes + 15) & ~(size_t)15;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static unsigned char mem[80 << 10] __attribute__((aligned(64)));
    static unsigned char other_mem[8 << 10] __attribute__((aligned(64)));
    static hf_model m;
    if (size < 1) return 0;
    static const uint32_t flagsets[4] = {0, HK_FLAG_FILL, HK_FLAG_ZERO, HK_FLAG_FILL | HK_FLAG_PARANOID};
    hk_hunk_desc d;
    memset(&d, 0, sizeof d);
    d.memory = mem;
    d.size = (size_t)(8 << 10) + (size_t)(data[0] >> 2) * 256;
    d.flags = flagsets[data[0] & 3];
    d.on_error = hf_on_error;
    hk_hunk *h = hk_hunk_create(&d);
    d.memory = other_mem;
    d.size = sizeof other_mem;
    d.flags = 0;
    hk_hunk *other = hk_hunk_create(&d);
    if (!h || !other) hf_fail("create failed", -1);
    hk_hunk_alloc(other, 16, "o"); /* marks of another hunk with the same shapes */
    hk_hunk_alloc(other, 16, "o");
    hk_hunk_mark foreign[2] = {hk_hunk_low_mark(other), hk_hunk_high_mark(other)};
    memset(&m, 0, sizeof m);
    if (size > 1 + 3 * HF_MAX_OPS) size = 1 + 3 * HF_MAX_OPS;
    int op = 0;
    for (size_t i = 1; i + 3 <= size; i += 3, op++) {
        unsigned kind = data[i] % 20;
        unsigned a = data[i + 1], b = data[i + 2];
        int high = b & 1;
        size_t n = (size_t)a * ((b & 0x80) ? 16u : 1u) + (b & 0x0e);
        int before = hf_reports;
        switch (kind) {
        case 0:
        case 1:
        case 2:
        case 3:
        case 4: { /* allocate on one end, maybe aligned */
            if (m.count[high] == HF_MAX_BLK) break;
            size_t align = 0;
            void *p;
            if (kind >= 3) {
                static const size_t aligns[8] = {0, 16, 32, 64, 256, 4096, 3, 48};
                align = aligns[(a >> 5) & 7];
                p = high ? hk_hunk_alloc_high_aligned(h, align, n, "fz")
                         : hk_hunk_alloc_aligned(h, align, n, "fz");
                if (align == 3 || align == 48) {
                    if (p || hf_reports == before) hf_fail("bad alignment accepted or not reported", op);
                    break;
                }
            } else {
                p = high ? hk_hunk_alloc_high(h, n, "fz") : hk_hunk_alloc(h, n, kind == 1 ? NULL : "fz");
            }
            if (high)
                m.temp_live = 0; /* a high allocation releases the temp block */
            else
                hf_sync_temp(h, &m);
            if (!p) {
                if (hf_reports == before) hf_fail("failed allocation not reported", op);
                break;
            }
            if (align > 16 && ((uintptr_t)p & (align - 1))) hf_fail("misaligned", op);
            if ((uintptr_t)p & 15) hf_fail("not 16-aligned", op);
            if (d.flags & HK_FLAG_ZERO)
                for (size_t k = 0; k < n; k++)
                    if (((unsigned char *)p)[k]) hf_fail("HK_FLAG_ZERO block not zero", op);
            hf_blk *blk = &m.end[high][m.count[high]++];
            blk->p = (unsigned char *)p;
            blk->n = n;
            blk->fill = (unsigned char)(a ^ b);
            blk->uid = ++m.next_uid;
            blk->blank = kind == 2; /* left as the hunk gave it: old headers inside stay */
            if (!blk->blank) hf_paint(blk);
            break;
        }
        case 5: { /* temp block */
            void *p = hk_hunk_alloc_temp(h, n);
            m.temp_live = 0;
            if (!p) {
                if (hf_reports == before) hf_fail("failed temp allocation not reported", op);
                break;
            }
            m.temp_live = 1;
            m.temp.p = (unsigned char *)p;
            m.temp.n = n;
            m.temp.fill = (unsigned char)b;
            hf_paint(&m.temp);
            break;
        }
        case 6:
            hk_hunk_free_temp(h);
            m.temp_live = 0;
            break;
        case 7:
        case 8: { /* take a mark */
            hf_mark *k = &m.marks[a % HF_MAX_MARKS];
            k->m = high ? hk_hunk_high_mark(h) : hk_hunk_low_mark(h);
            if (high) m.temp_live = 0;
            k->used = 1;
            k->end = high;
            k->depth = m.count[high];
            k->top = k->depth ? m.end[high][k->depth - 1].uid : 0;
            break;
        }
        case 9:
        case 10:
        case 11: { /* free to a mark: valid, stale or of the other end */
            hf_mark *k = &m.marks[a % HF_MAX_MARKS];
            if (!k->used) break;
            int to_high = kind == 11 ? !k->end : k->end;
            hk_result r = to_high ? hk_hunk_free_to_high_mark(h, k->m) : hk_hunk_free_to_low_mark(h, k->m);
            int valid = to_high == k->end && hf_mark_valid(&m, k);
            if (to_high && valid)
                m.temp_live = 0; /* freeing to a high mark releases the temp block */
            else
                hf_sync_temp(h, &m); /* a refused mark may or may not have */
            if (valid) {
                if (r != HK_OK) hf_fail("valid mark refused", op);
                m.count[k->end] = k->depth;
            } else {
                if (r == HK_OK) hf_fail("stale or wrong-end mark accepted", op);
                if (hf_reports == before) hf_fail("refused mark not reported", op);
            }
            break;
        }
        case 12: { /* a mark of another hunk, or a zeroed one */
            hk_hunk_mark f = foreign[high];
            if (b & 2) memset(&f, 0, sizeof f);
            hk_result r = high ? hk_hunk_free_to_high_mark(h, f) : hk_hunk_free_to_low_mark(h, f);
            hf_sync_temp(h, &m);
            if (r == HK_OK) hf_fail("foreign or zeroed mark accepted", op);
            if (hf_reports == before) hf_fail("foreign mark not reported", op);
            break;
        }
        case 13: { /* where: a live block, and wild addresses */
            for (int e = 0; e < 2; e++)
                if (m.count[e]) {
                    hf_blk *blk = &m.end[e][(size_t)a % m.count[e]];
                    hk_block_info info;
                    if (hk_hunk_where(h, blk->p + (blk->n ? (size_t)b % blk->n : 0), &info) != HK_OK)
                        hf_fail("where() misses a live block", op);
                    if (info.address != blk->p) hf_fail("where() names another block", op);
                }
            hk_block_info info;
            static const uintptr_t wild[4] = {1, 4096, UINTPTR_MAX - 15, 0x10000};
            if (hk_hunk_where(h, (const void *)wild[a & 3], &info) == HK_OK)
                hf_fail("where() of a wild address", op);
            break;
        }
        case 14: { /* sizes near SIZE_MAX */
            size_t huge = hf_opaque(SIZE_MAX - a);
            void *p = high ? hk_hunk_alloc_high(h, huge, "huge") : hk_hunk_alloc(h, huge, "huge");
            if (high)
                m.temp_live = 0;
            else
                hf_sync_temp(h, &m);
            if (p || hf_reports == before) hf_fail("absurd size accepted or not reported", op);
            break;
        }
        case 15: { /* tenant claims, inside and outside the free middle */
            void *ms;
            size_t mn;
            hk_hunk_free_range(h, &ms, &mn);
            uintptr_t lo = (uintptr_t)ms, hi = lo + mn;
            uintptr_t s = lo + (uintptr_t)a * 16 - (b & 2 ? 2048 : 0) + (b & 4 ? mn : 0);
            size_t len = (size_t)(b & 0xf0) * 4;
            int inside = len == 0 || (s >= lo && s <= hi && len <= hi - s); /* size 0: no claim */
            hk_hunk_set_tenant(h, NULL, NULL, NULL, 0);                     /* remove any */
            hk_result r = hk_hunk_set_tenant(h, hf_reclaim, NULL, (void *)s, len);
            if (inside && r != HK_OK) hf_fail("claim inside the free middle refused", op);
            if (!inside && (r == HK_OK || hf_reports == before))
                hf_fail("claim outside the middle accepted", op);
            break;
        }
        case 16:
            hk_hunk_reset(h);
            m.count[0] = m.count[1] = 0;
            m.temp_live = 0;
            break;
        default: /* a zero-size block, a NULL name */
            if (m.count[high] < HF_MAX_BLK) {
                void *p = high ? hk_hunk_alloc_high(h, 0, NULL) : hk_hunk_alloc(h, 0, NULL);
                if (high)
                    m.temp_live = 0;
                else
                    hf_sync_temp(h, &m);
                if (p) {
                    hf_blk *blk = &m.end[high][m.count[high]++];
                    blk->p = (unsigned char *)p;
                    blk->n = 0;
                    blk->blank = 0;
                    blk->uid = ++m.next_uid;
                } else if (hf_reports == before) {
                    hf_fail("failed allocation not reported", op);
                }
            }
            break;
        }
        hf_verify(h, &m, op);
    }
    hk_hunk_set_tenant(h, NULL, NULL, NULL, 0);
    hk_hunk_destroy(h);
    hk_hunk_destroy(other);
    return 0;
}
