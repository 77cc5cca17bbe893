/*
 * tools/report.h - the HTML report of a trace (tools/report_html.c): one
 * self-contained page, inline SVG and a little script, nothing fetched.
 */
#ifndef HEAPKIT_TOOLS_REPORT_H
#define HEAPKIT_TOOLS_REPORT_H

#include "analysis.h"
#include "symbols.h"

#include <stdio.h>

/* Writes the page. map_svg: the zone's heap map at the peak (or NULL);
 * title: the trace's name. Returns 0, or -1 on a write error. */
int hk_report_write(FILE *f, const char *title, const hkt_trace *t, const hka *a, const hks *syms,
                    const char *map_svg);

/* The addresses a report names (the stacks of the sites and leaks it lists),
 * for hks_resolve: fills *out (malloc'ed) and returns the count. */
size_t hk_report_addresses(const hkt_trace *t, const hka *a, uint64_t **out);



/* The trace replayed on a fresh heapkit zone up to event `upto` (exclusive),
 * drawn as an SVG heap map (hk_map_zone). Returns a malloc'ed string, or
 * NULL when out of memory. (tools/cmd_map.c) */
char *hk_report_zone_map(const hkt_trace *t, size_t upto, const char *title, unsigned width);
#endif /* HEAPKIT_TOOLS_REPORT_H */
