/*
 * tools/report_html.c - writes the report page (tools/report.h).
 *
 * Invariants: every text that comes from the trace (function names, paths,
 * the command line) is HTML-escaped; the page references nothing outside
 * itself; its script only reads data embedded in the page, and marks the
 * body data-ready="1" when it has run (the browser test waits for that).
 */
#include "report.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOP_ROWS 15
static const char *const k_site_colors[HKA_TOP_CURVES] = {"#e45756", "#f58518", "#54a24b", "#b279a2", "#72b7b2"};

static void esc(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20) fputc(*s, f);
        }
    }
}

static const char *dur(uint64_t ns, char *b, size_t n) {
    if (ns >= 1000000000ull)
        snprintf(b, n, "%.2f s", (double)ns / 1e9);
    else if (ns >= 1000000)
        snprintf(b, n, "%.2f ms", (double)ns / 1e6);
    else if (ns >= 1000)
        snprintf(b, n, "%.1f us", (double)ns / 1e3);
    else
        snprintf(b, n, "%llu ns", (unsigned long long)ns);
    return b;
}

static void site_name(FILE *f, const hkt_trace *t, const hks *s, uint32_t stack) {
    const hks_entry *e = hks_site(s, t, stack);
    if (!e) {
        fputs("<i>(no stack)</i>", f);
        return;
    }
    fputs("<b>", f);
    esc(f, e->func);
    fputs("</b> <span class=\"w\">", f);
    esc(f, e->where);
    fputs("</span>", f);
}

static void stack_details(FILE *f, const hkt_trace *t, const hks *s, uint32_t stack) {
    if (stack == 0 || stack >= t->nstacks) return;
    const hkt_stack *st = &t->stacks[stack];
    fputs("<details><summary>stack</summary><ol>", f);
    for (uint32_t i = 0; i < st->n; i++) {
        const hks_entry *e = hks_find(s, st->frames[i]);
        fputs("<li>", f);
        if (e) {
            esc(f, e->func);
            fputs(" <span class=\"w\">", f);
            esc(f, e->where);
            fputs("</span>", f);
        } else {
            fprintf(f, "0x%llx", (unsigned long long)st->frames[i]);
        }
        fputs("</li>", f);
    }
    fputs("</ol></details>", f);
}

static void site_table(FILE *f, const char *id, const char *heading, const char *note, const hkt_trace *t,
                       const hka *a, const hks *s, hka_order by) {
    uint32_t top[TOP_ROWS];
    size_t n = hka_top_sites(a, by, top, TOP_ROWS);
    fprintf(f, "<h2 id=\"%s\">%s</h2><p class=\"note\">%s</p>\n", id, heading, note);
    if (!n) {
        fputs("<p><i>none</i></p>\n", f);
        return;
    }
    fputs("<table class=\"sortable\"><thead><tr><th>site</th><th class=\"n\">peak live</th><th class=\"n\">allocations</th>"
          "<th class=\"n\">bytes allocated</th><th class=\"n\">temporary</th><th class=\"n\">leaked</th></tr></thead><tbody>\n",
          f);
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++) {
        const hka_site *x = &a->sites[top[i]];
        uint64_t v = by == HKA_BY_PEAK ? x->peak : by == HKA_BY_COUNT ? x->allocs : by == HKA_BY_TEMPORARY ? x->temporary : x->leaked;
        if (v > max) max = v;
    }
    for (size_t i = 0; i < n; i++) {
        const hka_site *x = &a->sites[top[i]];
        uint64_t v = by == HKA_BY_PEAK ? x->peak : by == HKA_BY_COUNT ? x->allocs : by == HKA_BY_TEMPORARY ? x->temporary : x->leaked;
        char b1[32], b2[32], b3[32];
        fputs("<tr><td>", f);
        site_name(f, t, s, x->stack);
        stack_details(f, t, s, x->stack);
        fprintf(f,
                "<div class=\"bar\" style=\"width:%.1f%%\"></div></td><td class=\"n\" data-v=\"%llu\">%s</td><td class=\"n\" "
                "data-v=\"%llu\">%llu</td><td class=\"n\" data-v=\"%llu\">%s</td><td class=\"n\" data-v=\"%llu\">%llu</td>"
                "<td class=\"n\" data-v=\"%llu\">%s</td></tr>\n",
                max ? 100.0 * (double)v / (double)max : 0, (unsigned long long)x->peak, hka_bytes(x->peak, b1, sizeof b1),
                (unsigned long long)x->allocs, (unsigned long long)x->allocs, (unsigned long long)x->bytes,
                hka_bytes(x->bytes, b2, sizeof b2), (unsigned long long)x->temporary, (unsigned long long)x->temporary,
                (unsigned long long)x->leaked, hka_bytes(x->leaked, b3, sizeof b3));
    }
    fputs("</tbody></table>\n", f);
}

/* The live-bytes chart: total and the top sites, with axes. */
static void live_chart(FILE *f, const hkt_trace *t, const hka *a, const hks *s) {
    const double W = 900, H = 280, L = 70, R = 10, T = 10, B = 30;
    uint64_t ymax = a->peak_live ? a->peak_live : 1;
    double xs = (W - L - R) / (double)(HKA_CURVE_POINTS - 1), ys = (H - T - B) / (double)ymax;
    char b[32];
    fprintf(f, "<svg id=\"live\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n", W, H, W, H);
    for (int k = 0; k <= 4; k++) {
        double y = H - B - (H - T - B) * k / 4.0;
        fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%.0f\" y=\"%.1f\" "
                   "text-anchor=\"end\" class=\"ax\">%s</text>\n",
                L, W - R, y, y, L - 6, y + 4, hka_bytes((uint64_t)((double)ymax * k / 4.0), b, sizeof b));
        double x = L + (W - L - R) * k / 4.0;
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"%s\" class=\"ax\">%s</text>\n", x, H - 10,
                k == 0 ? "start" : k == 4 ? "end" : "middle",
                dur((uint64_t)((double)t->end_ns * k / 4.0), b, sizeof b));
    }
    for (int k = a->ncurve_sites - 1; k >= -1; k--) {
        const uint64_t *c = k < 0 ? a->curve : a->site_curve[k];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" points=\"", k < 0 ? "#1f3b73" : k_site_colors[k],
                k < 0 ? "2" : "1.3");
        for (int i = 0; i < HKA_CURVE_POINTS; i++) fprintf(f, "%.1f,%.1f ", L + xs * i, H - B - ys * (double)c[i]);
        fputs("\"/>\n", f);
    }
    fprintf(f, "<line id=\"cross\" x1=\"0\" x2=\"0\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"#888\" visibility=\"hidden\"/>\n", T, H - B);
    fputs("</svg><div id=\"tip\" class=\"note\">&#160;</div>\n<ul class=\"legend\"><li><span style=\"background:#1f3b73\"></span>all blocks</li>", f);
    for (int k = 0; k < a->ncurve_sites; k++) {
        fprintf(f, "<li><span style=\"background:%s\"></span>", k_site_colors[k]);
        site_name(f, t, s, a->sites[a->curve_sites[k]].stack);
        fputs("</li>", f);
    }
    fputs("</ul>\n<script>var HK_CURVE=[", f);
    for (int i = 0; i < HKA_CURVE_POINTS; i++)
        fprintf(f, "%s[%llu,%llu]", i ? "," : "", (unsigned long long)a->curve_t[i], (unsigned long long)a->curve[i]);
    fprintf(f, "];var HK_CHART={L:%.0f,W:%.0f,R:%.0f};</script>\n", L, W, R);
}

static void histogram(FILE *f, const char *id, const uint64_t *v, int n, const char *const *labels) {
    int lo = 0, hi = n - 1;
    while (lo < hi && !v[lo]) lo++;
    while (hi > lo && !v[hi]) hi--;
    uint64_t max = 1;
    for (int i = lo; i <= hi; i++)
        if (v[i] > max) max = v[i];
    int bars = hi - lo + 1;
    double W = 440, H = 200, B = 46, bw = (W - 20) / (bars > 0 ? bars : 1);
    fprintf(f, "<svg id=\"%s\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n", id, W, H, W, H);
    for (int i = lo; i <= hi; i++) {
        double h = (H - B - 14) * (double)v[i] / (double)max, x = 10 + bw * (i - lo);
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#4c78a8\"><title>%s: %llu</title></rect>\n",
                x + 1, H - B - h, bw - 2 > 1 ? bw - 2 : 1, h, labels[i], (unsigned long long)v[i]);
        fprintf(f, "<text class=\"ax\" transform=\"translate(%.1f %.0f) rotate(-50)\" text-anchor=\"end\">%s</text>\n",
                x + bw / 2 + 3, H - B + 10, labels[i]);
    }
    fputs("</svg>\n", f);
}

static const char *k_script =
    "<script>\n"
    "window.onerror=function(m){document.title='heapkit report: script error: '+m;};\n"
    "(function(){\n"
    " var svg=document.getElementById('live'),cross=document.getElementById('cross'),tip=document.getElementById('tip');\n"
    " function hb(n){var u=['B','KiB','MiB','GiB'],i=0;while(n>=1024&&i<3){n/=1024;i++;}return (i?n.toFixed(1):n)+' '+u[i];}\n"
    " if(svg&&HK_CURVE.length){svg.addEventListener('mousemove',function(ev){\n"
    "  var r=svg.getBoundingClientRect(),x=ev.clientX-r.left,c=HK_CHART;\n"
    "  var i=Math.round((x-c.L)/(c.W-c.L-c.R)*(HK_CURVE.length-1));\n"
    "  if(i<0||i>=HK_CURVE.length)return;\n"
    "  cross.setAttribute('x1',x);cross.setAttribute('x2',x);cross.setAttribute('visibility','visible');\n"
    "  tip.textContent='at '+(HK_CURVE[i][0]/1e6).toFixed(3)+' ms: '+hb(HK_CURVE[i][1])+' live';});}\n"
    " document.querySelectorAll('table.sortable th').forEach(function(th,col){th.addEventListener('click',function(){\n"
    "  var tb=th.closest('table').tBodies[0],rows=Array.prototype.slice.call(tb.rows);\n"
    "  rows.sort(function(a,b){var x=a.cells[col],y=b.cells[col];\n"
    "   if(x.dataset.v!==undefined)return Number(y.dataset.v)-Number(x.dataset.v);return x.textContent.localeCompare(y.textContent);});\n"
    "  rows.forEach(function(r){tb.appendChild(r);});});});\n"
    " document.body.setAttribute('data-ready','1');\n"
    "})();\n"
    "</script>\n";

size_t hk_report_addresses(const hkt_trace *t, const hka *a, uint64_t **out) {
    uint32_t ids[4 * TOP_ROWS + 2 * TOP_ROWS];
    size_t n = 0;
    for (int by = HKA_BY_PEAK; by <= HKA_BY_LEAKED; by++)
        n += hka_top_sites(a, (hka_order)by, ids + n, by == HKA_BY_LEAKED ? 2 * TOP_ROWS : TOP_ROWS);
    size_t frames = 0;
    for (size_t i = 0; i < n; i++) frames += t->stacks[a->sites[ids[i]].stack].n;
    *out = malloc((frames ? frames : 1) * sizeof **out);
    if (!*out) return 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const hkt_stack *s = &t->stacks[a->sites[ids[i]].stack];
        for (uint32_t j = 0; j < s->n; j++) (*out)[k++] = s->frames[j];
    }
    return k;
}

int hk_report_write(FILE *f, const char *title, const hkt_trace *t, const hka *a, const hks *s, const char *map_svg) {
    char b1[32], b2[32], b3[32], d1[32];
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>heapkit report: ", f);
    esc(f, title);
    fputs("</title>\n<style>\n"
          "body{font:14px/1.4 sans-serif;margin:20px auto;max-width:1000px;color:#222}\n"
          "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}\n"
          "table{border-collapse:collapse;width:100%}td,th{padding:3px 6px;border-bottom:1px solid #eee;vertical-align:top;text-align:left}\n"
          "th{cursor:pointer;background:#f4f4f4}.n{text-align:right;white-space:nowrap}.w{color:#777;font-size:12px}\n"
          ".bar{height:4px;background:#4c78a8;margin-top:2px}.note{color:#555;font-size:13px}.ax{font-size:11px;fill:#555}\n"
          ".legend{list-style:none;padding:0}.legend li{margin:2px 0;white-space:nowrap}.legend span{display:inline-block;width:12px;height:12px;margin-right:4px}\n"
          "details{font-size:12px}ol{margin:2px 0;padding-left:22px}.hist{display:inline-block;vertical-align:top;margin-right:20px}\n"
          ".figs td{border:none;padding:1px 12px 1px 0}.map{overflow-x:auto}\n"
          "</style></head>\n<body>\n<h1>heapkit report: ",
          f);
    esc(f, title);
    fputs("</h1>\n<table class=\"figs\">", f);
    fputs("<tr><td>program</td><td><code>", f);
    esc(f, t->cmdline[0] ? t->cmdline : "(not recorded)");
    fprintf(f, "</code> (pid %u)</td></tr>\n", t->pid);
    time_t when = (time_t)(t->start_unix_ns / 1000000000ull);
    struct tm tmv;
    char date[64] = "?";
    if (gmtime_r(&when, &tmv)) strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", &tmv);
    fprintf(f, "<tr><td>recorded</td><td>%s, %s, %u thread%s%s</td></tr>\n", date, dur(t->end_ns, d1, sizeof d1), t->nthreads,
            t->nthreads == 1 ? "" : "s", t->complete ? "" : " (ended without closing the trace: _exit or a signal)");
    fprintf(f, "<tr><td>calls</td><td>%llu allocations, %llu frees, %llu reallocs (%s requested)</td></tr>\n",
            (unsigned long long)a->allocs, (unsigned long long)a->frees, (unsigned long long)a->reallocs,
            hka_bytes(a->bytes_allocated, b1, sizeof b1));
    fprintf(f, "<tr><td>peak</td><td>%s live in %llu blocks, at %s</td></tr>\n", hka_bytes(a->peak_live, b2, sizeof b2),
            (unsigned long long)a->peak_blocks, dur(a->peak_ts, d1, sizeof d1));
    fprintf(f, "<tr><td>temporary</td><td>%llu blocks freed before their thread's next allocation</td></tr>\n",
            (unsigned long long)a->temporary);
    fprintf(f, "<tr><td>at the end</td><td>%s still live in %llu blocks</td></tr></table>\n",
            hka_bytes(a->end_live, b3, sizeof b3), (unsigned long long)a->end_blocks);

    fputs("<h2 id=\"over-time\">Live bytes over time</h2><p class=\"note\">All blocks, and the five sites with the highest "
          "peak. Hover for the figures.</p>\n",
          f);
    live_chart(f, t, a, s);
    site_table(f, "by-peak", "Top sites by peak live bytes", "The most memory a site held at once.", t, a, s, HKA_BY_PEAK);
    site_table(f, "by-count", "Top sites by number of allocations", "Calls, whatever their size.", t, a, s, HKA_BY_COUNT);
    site_table(f, "by-temporary", "Top sites by short-lived allocations",
               "Blocks freed before their thread allocated again: candidates for the stack or a scratch buffer.", t, a, s,
               HKA_BY_TEMPORARY);

    fputs("<h2 id=\"histograms\">Sizes and lifetimes</h2>\n<div class=\"hist\"><p class=\"note\">allocations by size</p>", f);
    static char sl[HKA_SIZE_BUCKETS][40];
    const char *slabels[HKA_SIZE_BUCKETS];
    for (int i = 0; i < HKA_SIZE_BUCKETS; i++) {
        if (i == 0)
            snprintf(sl[i], sizeof sl[i], "0");
        else
            snprintf(sl[i], sizeof sl[i], "&lt;%s", hka_bytes(1ull << i, b1, sizeof b1));
        slabels[i] = sl[i];
    }
    histogram(f, "sizes", a->size_hist, HKA_SIZE_BUCKETS, slabels);
    fputs("</div><div class=\"hist\"><p class=\"note\">blocks by lifetime</p>", f);
    static const char *const ll[HKA_LIFE_BUCKETS] = {"&lt;10 ns", "&lt;100 ns", "&lt;1 us", "&lt;10 us", "&lt;100 us",
                                                     "&lt;1 ms",  "&lt;10 ms",  "&lt;100 ms", "&lt;1 s",   "&lt;10 s",
                                                     "longer",    "never freed"};
    histogram(f, "lifetimes", a->life_hist, HKA_LIFE_BUCKETS, ll);
    fputs("</div>\n", f);

    site_table(f, "leaks", "Leaks at exit, by stack", "Blocks never freed, grouped by the stack that allocated them.", t, a, s,
               HKA_BY_LEAKED);

    fputs("<h2 id=\"heap-map\">The zone at the peak</h2><p class=\"note\">The trace replayed on a heapkit zone up to its "
          "peak, drawn by hk_map_zone. Hover a cell to name its block.</p>\n<div class=\"map\">",
          f);
    if (map_svg)
        fputs(map_svg, f);
    else
        fputs("<p><i>(not drawn)</i></p>", f);
    fputs("</div>\n", f);
    fputs(k_script, f);
    fputs("</body></html>\n", f);
    return ferror(f) ? -1 : 0;
}
