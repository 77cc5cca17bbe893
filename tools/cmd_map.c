/*
 * tools/cmd_map.c - `heapkit map FILE [--at peak|end|MS] [-o map.svg]`: the
 * trace replayed on a fresh zone up to a moment, drawn as a heap map; and
 * the same picture as a string for the report.
 *
 * Invariant: the zone drawn is created here and destroyed here; the map
 * text is collected by a print function that only appends to a buffer.
 */
#include "commands.h"
#include "replay.h"
#include "report.h"

#include <heapkit/map.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct strbuf {
    char *s;
    size_t n, cap;
    int oom;
} strbuf;

static void strbuf_print(const char *text, void *user) {
    strbuf *b = user;
    size_t l = strlen(text);
    if (b->oom) return;
    if (b->n + l + 1 > b->cap) {
        size_t cap = (b->n + l + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->n, text, l + 1);
    b->n += l;
}

char *hk_report_zone_map(const hkt_trace *t, size_t upto, const char *title, unsigned width) {
    hk_zone_desc d;
    memset(&d, 0, sizeof d);
    d.size = (size_t)1 << 20;
    d.grow_size = (size_t)1 << 20;
    d.name = "replay";
    d.flags = HK_FLAG_QUIET;
    hk_zone *z = hk_zone_create(&d);
    if (!z) return NULL;
    hkr_zone_until(t, upto, z);
    strbuf b = {0};
    hk_map_options o;
    memset(&o, 0, sizeof o);
    o.title = title;
    o.width = width;
    hk_map_zone(z, &o, strbuf_print, &b);
    hk_zone_destroy(z);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

void hk_cmd_map_help(FILE *out) {
    fprintf(out,
            "usage: heapkit map FILE [options]\n"
            "\n"
            "Replays a trace from `heapkit record` on a fresh heapkit zone (one thread, in\n"
            "the trace's order) up to a moment, and writes the zone's heap map: an SVG with\n"
            "the blocks as cells in address order, coloured by state, each named on hover\n"
            "(hk_map_zone, heapkit/map.h: every heapkit allocator can draw one).\n"
            "\n"
            "options:\n"
            "  --at WHEN     peak (the most bytes live), end, or a time in ms [peak]\n"
            "  -o FILE       the SVG [FILE.map.svg]\n"
            "  --width N     picture width in pixels [960]\n"
            "  -h, --help    this text\n");
}

int hk_cmd_map(int argc, char **argv) {
    const char *file = NULL, *out = NULL, *at = "peak";
    unsigned width = 960;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            hk_cmd_map_help(stdout);
            return 0;
        } else if (!strcmp(a, "--at") && i + 1 < argc) {
            at = argv[++i];
        } else if (!strcmp(a, "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(a, "--width") && i + 1 < argc) {
            width = (unsigned)atoi(argv[++i]);
        } else if (a[0] == '-' || file) {
            fprintf(stderr, "heapkit map: unexpected '%s' (heapkit map --help)\n", a);
            return 2;
        } else {
            file = a;
        }
    }
    if (!file) {
        fprintf(stderr, "heapkit map: no trace given\n");
        return 2;
    }
    hkt_trace t;
    char err[512];
    if (hkt_read_file(file, &t, err, sizeof err) != 0) {
        fprintf(stderr, "heapkit map: %s\n", err);
        return 1;
    }
    hka a;
    if (hka_analyze(&t, &a) != 0) {
        hkt_free(&t);
        fprintf(stderr, "heapkit map: out of memory\n");
        return 1;
    }
    size_t upto;
    char title[256];
    if (!strcmp(at, "peak")) {
        upto = t.nevents ? a.peak_event + 1 : 0;
        snprintf(title, sizeof title, "zone replay of %s at its peak (%.3f ms)", file, (double)a.peak_ts / 1e6);
    } else if (!strcmp(at, "end")) {
        upto = t.nevents;
        snprintf(title, sizeof title, "zone replay of %s at its end", file);
    } else {
        char *end;
        double ms = strtod(at, &end);
        if (*end || ms < 0) {
            fprintf(stderr, "heapkit map: --at wants peak, end or a time in ms, not '%s'\n", at);
            hka_free(&a);
            hkt_free(&t);
            return 2;
        }
        uint64_t ns = (uint64_t)(ms * 1e6);
        for (upto = 0; upto < t.nevents && t.events[upto].ts <= ns; upto++) {
        }
        snprintf(title, sizeof title, "zone replay of %s at %.3f ms", file, ms);
    }
    char *svg = hk_report_zone_map(&t, upto, title, width);
    char def[4096];
    if (!out) {
        snprintf(def, sizeof def, "%s.map.svg", file);
        out = def;
    }
    int rc = 0;
    FILE *f = svg ? fopen(out, "w") : NULL;
    if (!svg) {
        fprintf(stderr, "heapkit map: out of memory\n");
        rc = 1;
    } else if (!f || fputs(svg, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "heapkit map: cannot write %s: %s\n", out, strerror(errno));
        rc = 1;
    } else {
        printf("heapkit map: %s (%zu of %zu calls replayed)\n", out, upto, t.nevents);
    }
    free(svg);
    hka_free(&a);
    hkt_free(&t);
    return rc;
}
