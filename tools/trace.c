/*
 * tools/trace.c - reads a heapkit allocation trace (format: tools/trace.h).
 *
 * Invariants of what it returns: events sorted by (time, file order), so
 * each thread's events keep their order; records name block addresses, and
 * objects are given to them here in that order (an address is live from its
 * ALLOC to its FREE; a realloc's two records are joined per thread); every
 * FREE and every REALLOC's `old` names an object allocated earlier in the
 * array and not yet freed (frees of blocks the trace never saw are dropped
 * and counted in unknown_frees; an address handed out again while still
 * live gets a FREE of its old object first, counted in implied_frees);
 * objects are numbered 1..nobjects in allocation order;
 * every event's stack is < nstacks. Bad input never crashes the reader: every
 * read is bounds-checked against the file and every count against a limit,
 * and the first problem ends the read with one line naming its offset.
 */
#include "trace.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers --------------------------------------------------------- */

static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static void set_err(char *err, size_t n, const char *fmt, ...) {
    if (!err || !n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

/* Reads one varint from [*p, end); 0 on overrun or more than 64 bits. */
static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (*p >= end) return 0;
        uint8_t b = *(*p)++;
        if (shift == 63 && b > 1) return 0;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* Open-addressing map uint64 -> uint32 (key 0 unused; deleted: value 0). */
typedef struct u64map {
    uint64_t *keys;
    uint32_t *vals;
    size_t cap, used;
} u64map;

static size_t u64map_slot(const u64map *m, uint64_t k) {
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 17) & (m->cap - 1);
    while (m->keys[i] && m->keys[i] != k) i = (i + 1) & (m->cap - 1);
    return i;
}

static int u64map_put(u64map *m, uint64_t k, uint32_t v) {
    if ((m->used + 1) * 2 > m->cap) {
        u64map n = {0};
        n.cap = m->cap ? m->cap * 2 : 1024;
        n.keys = calloc(n.cap, sizeof *n.keys);
        n.vals = calloc(n.cap, sizeof *n.vals);
        if (!n.keys || !n.vals) {
            free(n.keys);
            free(n.vals);
            return 0;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) {
                size_t s = u64map_slot(&n, m->keys[i]);
                n.keys[s] = m->keys[i];
                n.vals[s] = m->vals[i];
                n.used++;
            }
        free(m->keys);
        free(m->vals);
        *m = n;
    }
    size_t s = u64map_slot(m, k);
    if (!m->keys[s]) m->used++;
    m->keys[s] = k;
    m->vals[s] = v;
    return 1;
}

static uint32_t u64map_get(const u64map *m, uint64_t k) {
    if (!m->cap || !k) return 0;
    return m->vals[u64map_slot(m, k)];
}

static void u64map_free(u64map *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* ---- decoding ---------------------------------------------------------------- */

/* A raw event's obj is a block address; RAW_REALLOC_FROM is the first half
 * of a realloc (HKT_EV_REALLOC's fn then holds the HKT_RA_* detail). */
#define RAW_REALLOC_FROM 4

typedef struct raw_event {
    uint64_t ts, size, obj, stack;
    uint64_t seq;
    uint32_t align;
    uint16_t thread;
    uint8_t kind, fn;
} raw_event;

/* Storage the returned trace points into, freed by hkt_free. */
typedef struct arena {
    uint64_t *frames;
    size_t nframes, capframes;
    char *strings;
    size_t nstr, capstr;
} arena;

typedef struct reader {
    const uint8_t *base;
    size_t size;
    char *err;
    size_t errn;
    raw_event *ev;
    size_t nev, capev;
    u64map stack_ids; /* raw stack id -> index into stk */
    struct {
        size_t first, n; /* into arena frames */
    } *stk;
    uint32_t nstk, capstk;
    uint32_t *tids;
    uint32_t ntids;
    struct rmod {
        uint64_t start, end, offset;
        size_t path; /* offset into arena strings */
    } *mods;
    uint32_t nmods, capmods;
    size_t cmdline; /* offset into strings, or SIZE_MAX */
    arena ar;
} reader;

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return 0;
    *p = q;
    *cap = n;
    return 1;
}

static size_t add_string(reader *r, const uint8_t *s, size_t n) {
    if (!grow((void **)&r->ar.strings, &r->ar.capstr, r->ar.nstr + n + 1, 1)) return SIZE_MAX;
    size_t at = r->ar.nstr;
    memcpy(r->ar.strings + at, s, n);
    r->ar.strings[at + n] = 0;
    r->ar.nstr += n + 1;
    return at;
}

static int oom(reader *r) {
    set_err(r->err, r->errn, "out of memory reading the trace");
    return -1;
}

static int corrupt(reader *r, const uint8_t *at, const char *what) {
    set_err(r->err, r->errn, "corrupt trace: %s at offset %zu", what, (size_t)(at - r->base));
    return -1;
}

/* Decodes the records of one chunk. */
static int read_chunk(reader *r, const uint8_t *p, const uint8_t *end, uint16_t thread) {
    uint64_t ts = 0, addr = 0;
    while (p < end) {
        const uint8_t *rec = p;
        uint8_t type = *p++;
        unsigned kind = type & 15u, detail = type >> 4;
        uint64_t a, b, c, d, e;
        switch (kind) {
        case HKT_R_ALLOC:
        case HKT_R_FREE:
        case HKT_R_REALLOC_FROM:
        case HKT_R_REALLOC: {
            raw_event ev;
            memset(&ev, 0, sizeof ev);
            if (!get_varint(&p, end, &a)) return corrupt(r, rec, "short record");
            if (a > UINT64_MAX - ts) return corrupt(r, rec, "time overflow");
            ts += a;
            ev.ts = ts;
            ev.thread = thread;
            ev.seq = (uint64_t)(rec - r->base); /* file order */
            int has_addr = kind != HKT_R_REALLOC || detail <= HKT_RA_MOVED;
            if (has_addr) {
                if (!get_varint(&p, end, &b)) return corrupt(r, rec, "short record");
                addr += (uint64_t)hkt_unzigzag(b);
                if (addr == 0) return corrupt(r, rec, "address 0");
                ev.obj = addr;
            }
            if (kind == HKT_R_ALLOC) {
                if (detail >= HKT_FN_COUNT) return corrupt(r, rec, "unknown allocation function");
                if (!get_varint(&p, end, &ev.size) || !get_varint(&p, end, &ev.stack))
                    return corrupt(r, rec, "short record");
                if (hkt_fn_has_align(detail)) {
                    if (!get_varint(&p, end, &b)) return corrupt(r, rec, "short record");
                    if (b == 0 || b > (1u << 30) || (b & (b - 1))) return corrupt(r, rec, "bad alignment");
                    ev.align = (uint32_t)b;
                }
                ev.kind = HKT_EV_ALLOC;
                ev.fn = (uint8_t)detail;
            } else if (kind == HKT_R_FREE || kind == HKT_R_REALLOC_FROM) {
                if (detail) return corrupt(r, rec, "bad record detail");
                ev.kind = kind == HKT_R_FREE ? HKT_EV_FREE : RAW_REALLOC_FROM;
            } else {
                if (detail > HKT_RA_FREED) return corrupt(r, rec, "bad record detail");
                if (!get_varint(&p, end, &ev.size) || !get_varint(&p, end, &ev.stack))
                    return corrupt(r, rec, "short record");
                ev.kind = HKT_EV_REALLOC;
                ev.fn = (uint8_t)detail;
            }
            if (!grow((void **)&r->ev, &r->capev, r->nev + 1, sizeof *r->ev)) return oom(r);
            r->ev[r->nev++] = ev;
            break;
        }
        case HKT_R_STACK: {
            if (!get_varint(&p, end, &a) || !get_varint(&p, end, &b)) return corrupt(r, rec, "short record");
            if (a == 0 || b > HKT_MAX_FRAMES) return corrupt(r, rec, "bad stack");
            if (!grow((void **)&r->ar.frames, &r->ar.capframes, r->ar.nframes + b, sizeof(uint64_t)))
                return oom(r);
            uint64_t prev = 0;
            for (uint64_t i = 0; i < b; i++) {
                if (!get_varint(&p, end, &c)) return corrupt(r, rec, "short record");
                prev = i == 0 ? c : prev + (uint64_t)hkt_unzigzag(c);
                r->ar.frames[r->ar.nframes + i] = prev;
            }
            if (u64map_get(&r->stack_ids, a)) break; /* defined twice: keep the first */
            size_t cap = r->capstk;
            if (!grow((void **)&r->stk, &cap, (size_t)r->nstk + 1, sizeof *r->stk)) return oom(r);
            r->capstk = (uint32_t)cap;
            r->stk[r->nstk].first = r->ar.nframes;
            r->stk[r->nstk].n = (size_t)b;
            r->ar.nframes += (size_t)b;
            r->nstk++;
            if (!u64map_put(&r->stack_ids, a, r->nstk)) return oom(r); /* index + 1 */
            break;
        }
        case HKT_R_THREAD:
            if (!get_varint(&p, end, &a) || !get_varint(&p, end, &b)) return corrupt(r, rec, "short record");
            if (a > UINT64_MAX - ts) return corrupt(r, rec, "time overflow");
            ts += a;
            r->tids[thread] = (uint32_t)b;
            break;
        case HKT_R_MAPS:
            if (!get_varint(&p, end, &a)) return corrupt(r, rec, "short record");
            for (uint64_t i = 0; i < a; i++) {
                if (!get_varint(&p, end, &b) || !get_varint(&p, end, &c) || !get_varint(&p, end, &d) ||
                    !get_varint(&p, end, &e))
                    return corrupt(r, rec, "short record");
                if (e > HKT_MAX_PATH || e > (uint64_t)(end - p)) return corrupt(r, rec, "bad module path");
                if (c <= b) return corrupt(r, rec, "bad module range");
                size_t cap = r->capmods;
                if (!grow((void **)&r->mods, &cap, (size_t)r->nmods + 1, sizeof *r->mods)) return oom(r);
                r->capmods = (uint32_t)cap;
                size_t s = add_string(r, p, (size_t)e);
                if (s == SIZE_MAX) return oom(r);
                p += e;
                r->mods[r->nmods++] = (struct rmod){b, c, d, s};
            }
            break;
        case HKT_R_CMDLINE:
            if (!get_varint(&p, end, &a)) return corrupt(r, rec, "short record");
            if (a > (uint64_t)(end - p) || a > 65536) return corrupt(r, rec, "bad command line");
            if (r->cmdline == SIZE_MAX) {
                size_t s = add_string(r, p, (size_t)a);
                if (s == SIZE_MAX) return oom(r);
                for (size_t i = 0; i < a; i++)
                    if (r->ar.strings[s + i] == 0) r->ar.strings[s + i] = ' ';
                r->cmdline = s;
            }
            p += a;
            break;
        default:
            return corrupt(r, rec, "unknown record type");
        }
    }
    return 0;
}

static int cmp_raw(const void *a, const void *b) {
    const raw_event *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static int cmp_mod(const void *a, const void *b) {
    const hkt_module *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

#define HKT_MAX_THREADS 65535u

/* A realloc between its two records, per thread. */
typedef struct pending_realloc {
    uint64_t addr; /* the block passed in */
    uint32_t id;   /* its object (0: a block the trace never saw) */
    uint8_t open;
} pending_realloc;

/* The block at addr is gone from the live set, as object id. */
static int live_drop(u64map *live, uint64_t addr) { return u64map_put(live, addr, 0); }

/* Turns the raw events into the trace's dense, checked form: addresses
 * become objects in time order. */
static int finish(reader *r, hkt_trace *t) {
    qsort(r->ev, r->nev, sizeof *r->ev, cmp_raw);
    /* at most one FREE implied per event, so twice the events is enough */
    t->events = malloc((r->nev ? 2 * r->nev : 1) * sizeof *t->events);
    pending_realloc *pend = calloc(HKT_MAX_THREADS + 1u, sizeof *pend);
    if (!t->events || !pend) {
        free(pend);
        return oom(r);
    }
    u64map live = {0};
    size_t n = 0;
    uint32_t next = 0;
    int ok = 1;
    for (size_t i = 0; i < r->nev && ok; i++) {
        raw_event *e = &r->ev[i];
        pending_realloc *pr = &pend[e->thread];
        hkt_event o;
        memset(&o, 0, sizeof o);
        o.ts = e->ts;
        o.size = e->size;
        o.thread = e->thread;
        o.kind = e->kind;
        o.fn = e->fn;
        o.align = e->align;
        o.stack = e->stack ? u64map_get(&r->stack_ids, e->stack) : 0;
        if (e->kind == RAW_REALLOC_FROM) {
            if (pr->open && pr->id && !u64map_get(&live, pr->addr)) /* no result seen: untouched */
                ok = u64map_put(&live, pr->addr, pr->id);
            pr->addr = e->obj;
            pr->id = u64map_get(&live, e->obj);
            pr->open = 1;
            if (pr->id) ok = ok && live_drop(&live, e->obj);
            continue;
        }
        if (e->kind == HKT_EV_FREE) {
            uint32_t id = u64map_get(&live, e->obj);
            if (!id) {
                t->unknown_frees++;
                continue;
            }
            ok = live_drop(&live, e->obj);
            o.obj = id;
            t->events[n++] = o;
            continue;
        }
        if (e->kind == HKT_EV_REALLOC) {
            uint32_t old = pr->open ? pr->id : 0;
            unsigned how = e->fn;
            pr->open = 0;
            if (how == HKT_RA_FAILED) { /* the block is still the program's */
                if (old && !u64map_get(&live, pr->addr)) ok = u64map_put(&live, pr->addr, old);
                continue;
            }
            if (how == HKT_RA_FREED) {
                if (!old) {
                    t->unknown_frees++;
                    continue;
                }
                o.kind = HKT_EV_FREE;
                o.fn = 0;
                o.size = 0;
                o.stack = 0;
                o.obj = old;
                t->events[n++] = o;
                continue;
            }
            o.fn = how == HKT_RA_MOVED;
            if (old)
                o.old = old;
            else { /* realloc of a block the trace never saw: an allocation */
                o.kind = HKT_EV_ALLOC;
                o.fn = HKT_FN_REALLOC;
            }
        }
        /* an allocation (or a realloc's result) at e->obj */
        uint32_t stale = u64map_get(&live, e->obj);
        if (stale) { /* its free was not recorded (made inside the recorder): implied here */
            hkt_event f;
            memset(&f, 0, sizeof f);
            f.ts = e->ts;
            f.thread = e->thread;
            f.kind = HKT_EV_FREE;
            f.obj = stale;
            t->events[n++] = f;
            t->implied_frees++;
        }
        if (next == UINT32_MAX - 1) {
            u64map_free(&live);
            free(pend);
            set_err(r->err, r->errn, "trace too large: more than 4 billion blocks");
            return -1;
        }
        o.obj = ++next;
        ok = u64map_put(&live, e->obj, o.obj);
        t->events[n++] = o;
    }
    free(pend);
    if (!ok) {
        u64map_free(&live);
        return oom(r);
    }
    for (size_t i = 0; i < n; i++)
        if (t->events[i].ts > t->end_ns) t->end_ns = t->events[i].ts;
    hkt_event *fit = realloc(t->events, (n ? n : 1) * sizeof *t->events); /* room for implied frees unused */
    if (fit) t->events = fit;
    u64map_free(&live);
    t->nevents = n;
    t->nobjects = next;

    t->nstacks = r->nstk + 1;
    t->stacks = calloc(t->nstacks, sizeof *t->stacks);
    t->nmodules = r->nmods;
    t->modules = calloc(r->nmods + 1u, sizeof *t->modules);
    if (!t->stacks || !t->modules) return oom(r);
    for (uint32_t i = 0; i < r->nstk; i++) {
        t->stacks[i + 1].n = (uint32_t)r->stk[i].n;
        t->stacks[i + 1].frames = r->ar.frames + r->stk[i].first;
    }
    for (uint32_t i = 0; i < r->nmods; i++) {
        t->modules[i].start = r->mods[i].start;
        t->modules[i].end = r->mods[i].end;
        t->modules[i].offset = r->mods[i].offset;
        t->modules[i].path = r->ar.strings + r->mods[i].path;
    }
    qsort(t->modules, t->nmodules, sizeof *t->modules, cmp_mod);
    t->cmdline = r->cmdline == SIZE_MAX ? "" : r->ar.strings + r->cmdline;
    t->thread_tids = r->tids;
    r->tids = NULL;
    arena *a = malloc(sizeof *a);
    if (!a) return oom(r);
    *a = r->ar;
    memset(&r->ar, 0, sizeof r->ar);
    t->arena_ = a;
    return 0;
}

int hkt_read_mem(const uint8_t *data, size_t n, hkt_trace *t, char *err, size_t errn) {
    memset(t, 0, sizeof *t);
    if (n < HKT_HEADER_SIZE) {
        if (n >= 8 && memcmp(data, HKT_MAGIC, 8) != 0)
            set_err(err, errn, "not a heapkit trace (bad magic at offset 0)");
        else
            set_err(err, errn, "truncated trace: header ends at offset %zu (needs %u bytes)", n,
                    HKT_HEADER_SIZE);
        return -1;
    }
    if (memcmp(data, HKT_MAGIC, 8) != 0) {
        set_err(err, errn, "not a heapkit trace (bad magic at offset 0)");
        return -1;
    }
    uint32_t version = rd32(data + 8);
    if (version != HKT_VERSION) {
        set_err(err, errn, "unsupported trace version %u at offset 8 (this heapkit reads version %u)",
                version, HKT_VERSION);
        return -1;
    }
    if (rd32(data + 12) != HKT_HEADER_SIZE) {
        set_err(err, errn, "corrupt trace: header size %u at offset 12", rd32(data + 12));
        return -1;
    }
    t->pid = rd32(data + 16);
    t->ppid = rd32(data + 20);
    t->start_ns = rd64(data + 24);
    t->start_unix_ns = rd64(data + 32);
    t->flags = rd32(data + 40);
    t->complete = (t->flags & HKT_F_CLOSED) != 0;

    reader r;
    memset(&r, 0, sizeof r);
    r.base = data;
    r.size = n;
    r.err = err;
    r.errn = errn;
    r.cmdline = SIZE_MAX;
    r.tids = calloc(HKT_MAX_THREADS + 1, sizeof *r.tids);
    int rc = r.tids ? 0 : oom(&r);
    size_t off = HKT_DATA_START;
    if (rc == 0 && n < HKT_DATA_START && n > HKT_HEADER_SIZE) {
        /* only the header page: zeros after the header are a trace with no events */
        for (size_t i = HKT_HEADER_SIZE; i < n && rc == 0; i++)
            if (data[i]) rc = corrupt(&r, data + i, "data in the header page");
        off = n;
    }
    while (rc == 0 && off < n) {
        if (n - off < HKT_CHUNK_HEADER) {
            set_err(err, errn, "truncated trace: chunk header at offset %zu cut at offset %zu", off, n);
            rc = -1;
            break;
        }
        const uint8_t *h = data + off;
        uint32_t magic = rd32(h), thread = rd32(h + 4), cap = rd32(h + 8), used = rd32(h + 12);
        if (magic == 0) break; /* reserved, never used (the magic is written last) */
        if (magic != HKT_CHUNK_MAGIC) {
            rc = corrupt(&r, h, "bad chunk magic");
            break;
        }
        if (thread == 0 || thread > HKT_MAX_THREADS) {
            rc = corrupt(&r, h + 4, "bad thread number");
            break;
        }
        if (used > cap) {
            rc = corrupt(&r, h + 12, "chunk use larger than its capacity");
            break;
        }
        if (cap > n - off - HKT_CHUNK_HEADER) {
            set_err(err, errn, "truncated trace: chunk at offset %zu needs %u bytes, the file ends at offset %zu",
                    off, cap + HKT_CHUNK_HEADER, n);
            rc = -1;
            break;
        }
        if (thread > t->nthreads) t->nthreads = thread;
        rc = read_chunk(&r, h + HKT_CHUNK_HEADER, h + HKT_CHUNK_HEADER + used, (uint16_t)thread);
        off += HKT_CHUNK_HEADER + (size_t)cap;
    }
    t->file_bytes = off < n ? off : n;
    if (rc == 0) rc = finish(&r, t);
    free(r.ev);
    free(r.stk);
    free(r.mods);
    free(r.tids);
    u64map_free(&r.stack_ids);
    free(r.ar.frames);
    free(r.ar.strings);
    if (rc != 0) hkt_free(t);
    return rc;
}

int hkt_read_file(const char *path, hkt_trace *t, char *err, size_t errn) {
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_err(err, errn, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (!grow((void **)&buf, &cap, n + 65536, 1)) {
            fclose(f);
            free(buf);
            set_err(err, errn, "out of memory reading %s", path);
            return -1;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        set_err(err, errn, "cannot read %s", path);
        return -1;
    }
    char e2[400];
    int rc = hkt_read_mem(buf, n, t, e2, sizeof e2);
    free(buf);
    if (rc != 0) set_err(err, errn, "%s: %s", path, e2);
    return rc;
}

void hkt_free(hkt_trace *t) {
    if (!t) return;
    free(t->events);
    free(t->stacks);
    free(t->modules);
    free(t->thread_tids);
    arena *a = t->arena_;
    if (a) {
        free(a->frames);
        free(a->strings);
        free(a);
    }
    memset(t, 0, sizeof *t);
}

const hkt_module *hkt_find_module(const hkt_trace *t, uint64_t addr) {
    const hkt_module *best = NULL;
    size_t lo = 0, hi = t->nmodules;
    while (lo < hi) { /* last module with start <= addr */
        size_t mid = (lo + hi) / 2;
        if (t->modules[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i-- > 0;) {
        if (addr < t->modules[i].end) {
            best = &t->modules[i];
            break;
        }
        if (lo - i > 8) break;
    }
    return best;
}

uint8_t *hkt_wrap_records(const uint8_t *rec, size_t len, uint32_t thread, size_t *size) {
    if (len > UINT32_MAX) return NULL;
    size_t n = HKT_DATA_START + HKT_CHUNK_HEADER + len;
    uint8_t *buf = calloc(1, n);
    if (!buf) return NULL;
    memcpy(buf, HKT_MAGIC, 8);
    wr32(buf + 8, HKT_VERSION);
    wr32(buf + 12, HKT_HEADER_SIZE);
    wr32(buf + 40, HKT_F_CLOSED);
    uint8_t *c = buf + HKT_DATA_START;
    wr32(c, HKT_CHUNK_MAGIC);
    wr32(c + 4, thread);
    wr32(c + 8, (uint32_t)len);
    wr32(c + 12, (uint32_t)len);
    if (len) memcpy(c + HKT_CHUNK_HEADER, rec, len);
    *size = n;
    return buf;
}
