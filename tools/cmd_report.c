/*
 * tools/cmd_report.c - `heapkit report FILE [-o report.html]`: reads the
 * trace, analyses it, names the frames it will show, draws the zone at the
 * peak, and writes the page (tools/report_html.c).
 */
#include "commands.h"
#include "report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void hk_cmd_report_help(FILE *out) {
    fprintf(out,
            "usage: heapkit report FILE [-o report.html]\n"
            "\n"
            "Writes one self-contained HTML page about a trace from `heapkit record`\n"
            "(inline SVG and a little script; nothing is fetched from a network):\n"
            "live bytes over time (all blocks and the top sites), the top allocation sites\n"
            "by peak bytes, by number of calls and by short-lived allocations, size and\n"
            "lifetime histograms, the leaks at exit grouped by stack, and the heap map of\n"
            "a heapkit zone at the trace's peak. Frames are named with addr2line when the\n"
            "modules are still on disk.\n"
            "\n"
            "options:\n"
            "  -o FILE      the page [FILE.html]\n"
            "  -h, --help   this text\n");
}

int hk_cmd_report(int argc, char **argv) {
    const char *file = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            hk_cmd_report_help(stdout);
            return 0;
        } else if (!strcmp(a, "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if (a[0] == '-' || file) {
            fprintf(stderr, "heapkit report: unexpected '%s' (heapkit report --help)\n", a);
            return 2;
        } else {
            file = a;
        }
    }
    if (!file) {
        fprintf(stderr, "heapkit report: no trace given\n");
        return 2;
    }
    hkt_trace t;
    char err[512];
    if (hkt_read_file(file, &t, err, sizeof err) != 0) {
        fprintf(stderr, "heapkit report: %s\n", err);
        return 1;
    }
    hka a;
    if (hka_analyze(&t, &a) != 0) {
        fprintf(stderr, "heapkit report: out of memory\n");
        hkt_free(&t);
        return 1;
    }
    uint64_t *addrs = NULL;
    size_t n = hk_report_addresses(&t, &a, &addrs);
    hks syms;
    hks_resolve(&syms, &t, addrs, n);
    free(addrs);
    char title[256];
    snprintf(title, sizeof title, "zone replay at the peak (%.3f ms)", (double)a.peak_ts / 1e6);
    char *map = hk_report_zone_map(&t, t.nevents ? a.peak_event + 1 : 0, title, 940);
    char def[4096];
    if (!out) {
        snprintf(def, sizeof def, "%s.html", file);
        out = def;
    }
    const char *base = strrchr(file, '/');
    FILE *f = fopen(out, "w");
    int rc = 0;
    if (!f || hk_report_write(f, base ? base + 1 : file, &t, &a, &syms, map) != 0 || fclose(f) != 0) {
        fprintf(stderr, "heapkit report: cannot write %s: %s\n", out, strerror(errno));
        rc = 1;
    } else {
        printf("heapkit report: %s\n", out);
    }
    free(map);
    hks_free(&syms);
    hka_free(&a);
    hkt_free(&t);
    return rc;
}
