/*
 * fuzz/trace_fuzz.c - the trace reader (tools/trace.c) and the analysis
 * (tools/analysis.c) on arbitrary bytes: they must refuse bad input with a
 * one-line error naming an offset, never crash, and what they accept must
 * be consistent (objects, stacks and threads in range; frees of live
 * blocks; the live bytes never below zero).
 *
 * Input: raw trace bytes; or, when the first byte is 'C', a record stream:
 * byte 1 is a thread number and the rest the records of one chunk, wrapped
 * here in a valid header and chunk header (so mutations reach the record
 * decoder instead of dying on the 4 KiB header page).
 */
#include "../tools/analysis.c"
#include "../tools/trace.c"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void tf_fail(const char *what) {
    fprintf(stderr, "trace_fuzz: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = NULL;
    const uint8_t *in = data;
    size_t n = size;
    if (size >= 2 && data[0] == 'C') {
        buf = hkt_wrap_records(data + 2, size - 2, data[1] ? data[1] : 1, &n);
        if (!buf) return 0;
        in = buf;
    }
    hkt_trace t;
    char err[512];
    if (hkt_read_mem(in, n, &t, err, sizeof err) != 0) {
        if (!strstr(err, "offset") && !strstr(err, "out of memory") && !strstr(err, "too large"))
            tf_fail("an error without an offset");
        if (strchr(err, '\n')) tf_fail("a multi-line error");
        free(buf);
        return 0;
    }
    uint8_t *live = calloc((size_t)t.nobjects + 1, 1);
    if (!live) tf_fail("out of memory");
    for (size_t i = 0; i < t.nevents; i++) {
        const hkt_event *e = &t.events[i];
        if (e->thread == 0 || e->thread > t.nthreads || e->stack >= t.nstacks) tf_fail("event out of range");
        if (i && e->ts < t.events[i - 1].ts) tf_fail("events out of order");
        if (e->kind != HKT_EV_ALLOC) {
            uint32_t id = e->kind == HKT_EV_FREE ? e->obj : e->old;
            if (!id || id > t.nobjects || !live[id]) tf_fail("free of a block that is not live");
            live[id] = 0;
        }
        if (e->kind != HKT_EV_FREE) {
            if (!e->obj || e->obj > t.nobjects || live[e->obj]) tf_fail("bad new object");
            live[e->obj] = 1;
        }
    }
    free(live);
    hka a;
    if (hka_analyze(&t, &a) == 0) {
        if (a.end_live > a.peak_live && a.allocs + a.reallocs) tf_fail("the end above the peak");
        hka_free(&a);
    }
    hkt_free(&t);
    free(buf);
    return 0;
}
