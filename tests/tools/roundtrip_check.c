/*
 * tests/tools/roundtrip_check.c - checks a trace of tests/tools/record_prog
 * against what that program did, then replays it.
 *
 *   roundtrip_check calls TRACE MODE    the recorded calls, the live bytes
 *                                        over time and the leak set; replays
 *   roundtrip_check child TRACE         TRACE.<pid> of the fork child exists
 *                                        and holds its 70001-byte block only
 *   roundtrip_check badinput TRACE      truncated, corrupt and foreign copies
 *                                        of TRACE: one-line errors naming the
 *                                        offset, never a crash
 *   roundtrip_check addresses -         the reader turns addresses into
 *                                        objects: realloc's two records,
 *                                        failed and freeing reallocs,
 *                                        unseen frees, addresses reused
 *   roundtrip_check idle -              the live-bytes curve of a made-up
 *                                        trace with an idle stretch after a
 *                                        freed peak
 * Prints "roundtrip ok" when every check passed; exit status 1 otherwise.
 */
#include "analysis.h"
#include "replay.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failed;
#define EXPECT(c, ...)                                                                                       \
    do {                                                                                                     \
        if (!(c)) {                                                                                          \
            g_failed = 1;                                                                                    \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #c);                                              \
            printf(__VA_ARGS__);                                                                             \
            printf("\n");                                                                                    \
        }                                                                                                    \
    } while (0)

static int marker(uint64_t s) {
    return (s >= 40000 && s < 40100) || s == 7777 || s == 50001 || s == 50002 || s == 30001 || s == 30016 ||
           (s >= 20000 && s < 20040) || (s >= 21000 && s < 21004) || s == 60001 || s == 70001;
}

static void check_calls(const hkt_trace *t, const char *mode) {
    int full = strcmp(mode, "kill") != 0;
    uint64_t *size = calloc(t->nobjects + 1u, sizeof *size);
    uint16_t *thread = calloc(t->nobjects + 1u, sizeof *thread);
    uint8_t *live = calloc(t->nobjects + 1u, 1);
    int phase_a = 0, phase_a_freed = 0, callocs = 0, reallocs = 0, aligned256 = 0, aligned64 = 0, workers = 0;
    int cross = 0;
    uint64_t marker_live = 0, marker_peak_a = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        const hkt_event *e = &t->events[i];
        EXPECT(i == 0 || e->ts >= t->events[i - 1].ts, "events in time order");
        if (e->kind != HKT_EV_ALLOC) {
            uint32_t id = e->kind == HKT_EV_FREE ? e->obj : e->old;
            EXPECT(id && id <= t->nobjects && live[id], "event %zu frees a live object", i);
            live[id] = 0;
            if (marker(size[id])) marker_live -= size[id];
            if (size[id] >= 40000 && size[id] < 40100) phase_a_freed++;
            if (size[id] == 60001 && e->thread != thread[id]) cross = 1;
            if (e->kind == HKT_EV_REALLOC && size[id] == 50001 && e->size == 50002) reallocs++;
        }
        if (e->kind != HKT_EV_FREE) {
            size[e->obj] = e->size;
            thread[e->obj] = e->thread;
            live[e->obj] = 1;
            if (marker(e->size)) marker_live += e->size;
            if (e->size >= 40000 && e->size < 40100 && e->fn == HKT_FN_MALLOC) phase_a++;
            if (e->fn == HKT_FN_CALLOC && e->size == 7777) callocs++;
            if (e->fn == HKT_FN_MEMALIGN && e->size == 30001 && e->align == 256) aligned256++;
            if (e->fn == HKT_FN_MEMALIGN && e->size == 30016 && e->align == 64) aligned64++;
            if (e->size >= 20000 && e->size < 20040) workers++;
            if (phase_a == 100 && phase_a_freed == 50 && !marker_peak_a) marker_peak_a = marker_live;
        }
        if (phase_a == 100 && phase_a_freed == 50 && !marker_peak_a) marker_peak_a = marker_live;
        /* every allocation of the program has a stack */
        if (e->kind == HKT_EV_ALLOC && marker(e->size))
            EXPECT(e->stack && t->stacks[e->stack].n > 1, "stack");
    }
    EXPECT(phase_a == 100, "%d", phase_a);
    EXPECT(phase_a_freed == 50, "%d", phase_a_freed);
    /* the live-bytes curve after phase A: the 50 odd blocks */
    uint64_t odd = 0;
    for (int i = 1; i < 100; i += 2) odd += 40000 + (uint64_t)i;
    EXPECT(marker_peak_a == odd, "%llu vs %llu", (unsigned long long)marker_peak_a, (unsigned long long)odd);
    if (full) {
        EXPECT(callocs == 1, "%d", callocs);
        EXPECT(reallocs == 1, "%d", reallocs);
        EXPECT(aligned256 == 1 && aligned64 == 1, "%d %d", aligned256, aligned64);
        EXPECT(workers == 800, "%d", workers);
        EXPECT(cross, "the 60001-byte block is freed on another thread");
        EXPECT(t->nthreads >= 5, "%u threads", t->nthreads);
        /* the leak set: exactly these marker blocks are live at the end */
        uint64_t expect_leak = odd + 7777 + 30016 + 21000 + 21001 + 21002 + 21003;
        EXPECT(marker_live == expect_leak, "%llu vs %llu", (unsigned long long)marker_live,
               (unsigned long long)expect_leak);
        int leaks = 0;
        for (uint32_t id = 1; id <= t->nobjects; id++)
            if (live[id] && marker(size[id])) leaks++;
        EXPECT(leaks == 50 + 1 + 1 + 4, "%d leaked marker blocks", leaks);
    }
    EXPECT(t->complete == (strcmp(mode, "exit") == 0 || strcmp(mode, "fork") == 0), "complete=%d",
           t->complete);
    EXPECT(strstr(t->cmdline, "record_prog") != NULL, "cmdline '%s'", t->cmdline);
    EXPECT(t->nmodules > 0, "modules recorded");

    /* the analysis agrees with this scan */
    hka a;
    EXPECT(hka_analyze(t, &a) == 0, "analyze");
    uint64_t end_live = 0, end_blocks = 0;
    for (uint32_t id = 1; id <= t->nobjects; id++)
        if (live[id]) end_live += size[id], end_blocks++;
    EXPECT(a.end_live == end_live && a.end_blocks == end_blocks, "%llu %llu", (unsigned long long)a.end_live,
           (unsigned long long)end_live);
    EXPECT(a.peak_live >= odd, "peak");
    uint64_t curve_max = 0;
    for (int i = 0; i < HKA_CURVE_POINTS; i++)
        if (a.curve[i] > curve_max) curve_max = a.curve[i];
    EXPECT(curve_max == a.peak_live, "the curve reaches the peak");

    /* replay: every call made, none failed; on a zone, the blocks live at the end are the leak set */
    const char *names[] = {"glibc", "zone"};
    for (int k = 0; k < 2; k++) {
        hkb_allocator al;
        char why[256];
        EXPECT(hkr_allocator(names[k], &al, why, sizeof why) == 0, "%s", why);
        hkr_result res;
        EXPECT(hkr_replay(t, &al, 0, &res) == 0, "replay on %s", names[k]);
        EXPECT(res.ops == t->nevents && res.failed == 0, "%s: %llu ops, %llu failed", names[k],
               (unsigned long long)res.ops, (unsigned long long)res.failed);
    }
    hk_zone_desc d;
    memset(&d, 0, sizeof d);
    d.grow_size = 1 << 20;
    hk_zone *z = hk_zone_create(&d);
    hkr_zone_until(t, t->nevents, z);
    hk_stats st;
    hk_zone_stats(z, &st);
    /* a small block counts its slot (its class: at most 12.5% or 8 bytes over the request) */
    EXPECT(st.live_blocks == end_blocks && st.used >= end_live &&
               st.used <= end_live + end_live / 8 + 8 * end_blocks,
           "zone: %zu blocks %zu bytes, trace %llu %llu", st.live_blocks, st.used,
           (unsigned long long)end_blocks, (unsigned long long)end_live);
    EXPECT(hk_zone_check(z) == HK_OK, "check");
    hk_zone_destroy(z);
    hka_free(&a);
    free(size);
    free(thread);
    free(live);
}

static void check_child(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    const char *base = slash ? slash + 1 : path;
    DIR *d = opendir(dir);
    int found = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t n = strlen(base);
        if (strncmp(de->d_name, base, n) != 0 || de->d_name[n] != '.') continue;
        char p[8192];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        hkt_trace t;
        char err[512];
        EXPECT(hkt_read_file(p, &t, err, sizeof err) == 0, "%s", err);
        int has = 0, other = 0;
        for (size_t i = 0; i < t.nevents; i++) {
            if (t.events[i].kind != HKT_EV_FREE && t.events[i].size == 70001) has++;
            if (t.events[i].kind != HKT_EV_FREE && t.events[i].size >= 40000 && t.events[i].size < 40100)
                other++;
        }
        EXPECT(has == 1 && other == 0, "child trace: %d 70001-byte blocks, %d of the parent's", has, other);
        EXPECT(t.complete, "the child's trace is closed at its exit");
        hkt_free(&t);
        found++;
    }
    if (d) closedir(d);
    EXPECT(found == 1, "%d child traces", found);
    hkt_trace t;
    char err[512];
    EXPECT(hkt_read_file(path, &t, err, sizeof err) == 0, "%s", err);
    for (size_t i = 0; i < t.nevents; i++)
        EXPECT(t.events[i].size != 70001, "the parent's trace has no child block");
    hkt_free(&t);
}

static void expect_error(const uint8_t *data, size_t n, const char *must, const char *what) {
    hkt_trace t;
    char err[512] = "";
    int rc = hkt_read_mem(data, n, &t, err, sizeof err);
    EXPECT(rc != 0, "%s is refused", what);
    EXPECT(strstr(err, must) != NULL, "%s: '%s' lacks '%s'", what, err, must);
    EXPECT(strchr(err, '\n') == NULL, "one line");
    if (rc == 0) hkt_free(&t);
}

static void check_badinput(const char *path) {
    FILE *f = fopen(path, "rb");
    EXPECT(f != NULL, "open");
    if (!f) return;
    static uint8_t buf[64 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    EXPECT(n > 4096 + 64, "trace size %zu", n);
    hkt_trace t;
    char err[512];
    EXPECT(hkt_read_mem(buf, n, &t, err, sizeof err) == 0, "%s", err);
    size_t full = t.nevents;
    hkt_free(&t);
    expect_error(buf, 20, "offset", "a 20-byte file");
    expect_error(buf, n - 100, "truncated trace", "a trace cut 100 bytes short");
    expect_error(buf, 4096 + 8, "offset 4096", "a trace cut in its first chunk header");
    expect_error((const uint8_t *)"hello, world, this is not a heapkit trace at all, no", 52,
                 "not a heapkit trace (bad magic at offset 0)", "a text file");
    static uint8_t copy[64 << 20];
    memcpy(copy, buf, n);
    copy[8] = 9;
    expect_error(copy, n, "version 9 at offset 8", "a future version");
    memcpy(copy, buf, n);
    copy[4096] ^= 0xff;
    expect_error(copy, n, "bad chunk magic at offset 4096", "a damaged chunk");
    memcpy(copy, buf, n);
    copy[4096 + 16] = 0x0f; /* the first record's type */
    expect_error(copy, n, "unknown record type at offset 4112", "a damaged record");
    /* random damage: any result, no crash, and a read that succeeds is consistent */
    uint64_t s = 88172645463325252ull;
    for (int k = 0; k < 300; k++) {
        memcpy(copy, buf, n);
        for (int j = 0; j < 1 + k % 8; j++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            copy[4096 + s % (n - 4096)] = (uint8_t)(s >> 32);
        }
        if (hkt_read_mem(copy, n, &t, err, sizeof err) == 0) {
            for (size_t i = 0; i < t.nevents; i++) {
                const hkt_event *e = &t.events[i];
                if (e->obj == 0 || e->obj > t.nobjects || e->stack >= t.nstacks || e->thread == 0 ||
                    e->thread > t.nthreads) {
                    EXPECT(0, "inconsistent event after damage %d", k);
                    break;
                }
            }
            hkt_free(&t);
        } else {
            EXPECT(strstr(err, "offset") != NULL, "damage %d: '%s'", k, err);
        }
    }
    printf("badinput: %zu events in the good trace\n", full);
}

/* A peak allocated and freed at once, then nothing for most of the run, then
 * a small block: the curve across the idle buckets is the level left after
 * the free (0), not the peak (regression: the idle buckets copied the
 * previous bucket's maximum). */
static void check_idle(void) {
    hkt_event ev[4];
    memset(ev, 0, sizeof ev);
    ev[0] = (hkt_event){.ts = 0, .size = 1000000, .obj = 1, .thread = 1, .kind = HKT_EV_ALLOC};
    ev[1] = (hkt_event){.ts = 10, .obj = 1, .thread = 1, .kind = HKT_EV_FREE};
    ev[2] = (hkt_event){.ts = 20, .size = 100, .obj = 2, .thread = 1, .kind = HKT_EV_ALLOC};
    ev[3] = (hkt_event){.ts = 1000000000, .size = 10, .obj = 3, .thread = 1, .kind = HKT_EV_ALLOC};
    hkt_stack stack0 = {0, NULL};
    hkt_trace t;
    memset(&t, 0, sizeof t);
    t.cmdline = "";
    t.events = ev;
    t.nevents = 4;
    t.nobjects = 3;
    t.stacks = &stack0;
    t.nstacks = 1;
    t.nthreads = 1;
    t.end_ns = 1000000000;
    hka a;
    EXPECT(hka_analyze(&t, &a) == 0, "analyze");
    EXPECT(a.peak_live == 1000000, "%llu", (unsigned long long)a.peak_live);
    EXPECT(a.curve[0] == 1000000, "the first bucket holds the peak: %llu", (unsigned long long)a.curve[0]);
    for (int i = 1; i < HKA_CURVE_POINTS - 1; i++)
        EXPECT(a.curve[i] == 100, "idle bucket %d: %llu, not the 100 bytes left live", i,
               (unsigned long long)a.curve[i]);
    EXPECT(a.curve[HKA_CURVE_POINTS - 1] == 110, "%llu", (unsigned long long)a.curve[HKA_CURVE_POINTS - 1]);
    EXPECT(a.end_live == 110 && a.end_blocks == 2, "end");
    hka_free(&a);
}

/* One thread's chunk of hand-written records, read back. */
static void check_addresses(void) {
    uint8_t rec[256], *w = rec;
    uint64_t prev = 0;
#define ADDR(a) (w = hkt_put_varint(w, hkt_zigzag((int64_t)((uint64_t)(a)-prev))), prev = (a))
#define ALLOC(a, n)                                                                                          \
    do {                                                                                                     \
        *w++ = HKT_R_ALLOC;                                                                                  \
        w = hkt_put_varint(w, 1);                                                                            \
        ADDR(a);                                                                                             \
        w = hkt_put_varint(w, n);                                                                            \
        w = hkt_put_varint(w, 0);                                                                            \
    } while (0)
#define REL(kind, a)                                                                                         \
    do {                                                                                                     \
        *w++ = (kind);                                                                                       \
        w = hkt_put_varint(w, 1);                                                                            \
        ADDR(a);                                                                                             \
    } while (0)
    ALLOC(0x1000, 10);               /* obj 1 */
    REL(HKT_R_REALLOC_FROM, 0x1000); /* fails: obj 1 stays */
    *w++ = (uint8_t)(HKT_R_REALLOC | HKT_RA_FAILED << 4);
    w = hkt_put_varint(w, 1);
    w = hkt_put_varint(w, 1u << 30);
    w = hkt_put_varint(w, 0);
    REL(HKT_R_REALLOC_FROM, 0x1000); /* moves obj 1 to obj 2 at 0x2000 */
    *w++ = (uint8_t)(HKT_R_REALLOC | HKT_RA_MOVED << 4);
    w = hkt_put_varint(w, 1);
    ADDR(0x2000);
    w = hkt_put_varint(w, 20);
    w = hkt_put_varint(w, 0);
    ALLOC(0x1000, 30);               /* obj 3: 0x1000 is free again */
    ALLOC(0x1000, 40);               /* obj 4: obj 3's free was never seen */
    REL(HKT_R_FREE, 0x9000);         /* never allocated: dropped */
    REL(HKT_R_REALLOC_FROM, 0x2000); /* realloc(p, 0): obj 2 freed */
    *w++ = (uint8_t)(HKT_R_REALLOC | HKT_RA_FREED << 4);
    w = hkt_put_varint(w, 1);
    w = hkt_put_varint(w, 0);
    w = hkt_put_varint(w, 0);
    REL(HKT_R_FREE, 0x1000); /* obj 4 */
#undef ALLOC
#undef REL
#undef ADDR
    size_t n = 0;
    uint8_t *buf = hkt_wrap_records(rec, (size_t)(w - rec), 1, &n);
    if (!buf) {
        EXPECT(0, "out of memory");
        return;
    }
    hkt_trace t;
    char err[256];
    EXPECT(hkt_read_mem(buf, n, &t, err, sizeof err) == 0, "%s", err);
    /* ALLOC 1, REALLOC 1->2, ALLOC 3, FREE 3 (implied), ALLOC 4, FREE 2, FREE 4 */
    static const struct {
        uint8_t kind;
        uint32_t obj, old;
        uint64_t size;
    } want[] = {{HKT_EV_ALLOC, 1, 0, 10}, {HKT_EV_REALLOC, 2, 1, 20}, {HKT_EV_ALLOC, 3, 0, 30},
                {HKT_EV_FREE, 3, 0, 0},   {HKT_EV_ALLOC, 4, 0, 40},   {HKT_EV_FREE, 2, 0, 0},
                {HKT_EV_FREE, 4, 0, 0}};
    size_t nw = sizeof want / sizeof want[0];
    EXPECT(t.nevents == nw, "%zu events", t.nevents);
    for (size_t i = 0; i < nw && i < t.nevents; i++) {
        const hkt_event *e = &t.events[i];
        EXPECT(e->kind == want[i].kind && e->obj == want[i].obj && e->old == want[i].old &&
                   e->size == want[i].size,
               "event %zu: kind %u obj %u old %u size %llu", i, e->kind, e->obj, e->old,
               (unsigned long long)e->size);
    }
    EXPECT(t.nevents < 2 || t.events[1].fn == 1, "the realloc moved");
    EXPECT(t.nobjects == 4, "%u objects", t.nobjects);
    EXPECT(t.unknown_frees == 1 && t.implied_frees == 1, "unknown %llu implied %llu",
           (unsigned long long)t.unknown_frees, (unsigned long long)t.implied_frees);
    hkt_free(&t);
    free(buf);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: roundtrip_check calls|child|badinput|addresses|idle TRACE [MODE]\n");
        return 2;
    }
    if (!strcmp(argv[1], "calls")) {
        hkt_trace t;
        char err[512];
        if (hkt_read_file(argv[2], &t, err, sizeof err) != 0) {
            printf("FAIL: %s\n", err);
            return 1;
        }
        check_calls(&t, argc > 3 ? argv[3] : "exit");
        hkt_free(&t);
    } else if (!strcmp(argv[1], "child")) {
        check_child(argv[2]);
    } else if (!strcmp(argv[1], "badinput")) {
        check_badinput(argv[2]);
    } else if (!strcmp(argv[1], "addresses")) {
        check_addresses();
    } else if (!strcmp(argv[1], "idle")) {
        check_idle();
    } else {
        return 2;
    }
    printf(g_failed ? "roundtrip FAILED\n" : "roundtrip ok\n");
    return g_failed;
}
