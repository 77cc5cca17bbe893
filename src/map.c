/*
 * src/map.c - heap maps (heapkit/map.h): an SVG picture of a heap drawn from
 * its public stats, walk and check calls only.
 *
 * Invariants: the three walks see the same blocks (the caller keeps the heap
 * still), so the layout of walk 1 (segments and their bytes) and walk 2 (rows)
 * holds for walk 3, which draws; a segment is a run of blocks in increasing
 * address order with gaps of at most MAP_GAP bytes, and starts a new row; a
 * cell is drawn inside its segment's rows and never past its end; nothing
 * here allocates (text is formatted into stack buffers).
 */
#include "heapkit/map.h"
#include "internal.h" /* Windows: snprintf prints %p as on POSIX */

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAP_GAP       ((uintptr_t)64 * 1024) /* a larger jump starts a new segment */
#define MAP_TOP       96u                    /* pixels above the first row */
#define MAP_SEG_SPACE 8u                     /* extra pixels between segments */
#define MAP_MIN_PX    3.0                    /* narrower blocks are drawn together */

/* Colour classes, in legend order. */
enum {
    MC_FREE,
    MC_USED,
    MC_TAG0, /* + tag % MC_NTAGS */
    MC_LOCKED = MC_TAG0 + 6,
    MC_PURGEABLE,
    MC_TEMP,
    MC_HIGH,
    MC_RUN,
    MC_QUARANTINED,
    MC_GUARDED,
    MC_OVERFLOW,
    MC_COUNT
};
#define MC_NTAGS 6

static const char *const k_color[MC_COUNT] = {
    "#cfd8dc", "#4c78a8", "#72b7b2", "#54a24b", "#eeca3b", "#ff9da6", "#9d755d", "#bab0ac",
    "#e45756", "#f58518", "#b279a2", "#2f4b7c", "#8cd17d", "#6b6b6b", "#1b9e77", "#d37295",
};
static const char *const k_class_name[MC_COUNT] = {
    "free",
    "used",
    "tag",
    "tag",
    "tag",
    "tag",
    "tag",
    "tag",
    "locked",
    "purgeable",
    "temp",
    "high end",
    "small-block run",
    "quarantined",
    "guarded",
    "overflow",
};

typedef struct map_cell {
    uintptr_t first, end; /* addresses covered */
    uintptr_t off0, off1; /* byte offsets inside the segment */
    size_t count;
    size_t bytes[MC_COUNT];
    char title[480]; /* the block's own text when count == 1 */
} map_cell;

typedef struct map_state {
    int pass;
    const hk_map_options *opt;
    hk_print_fn out;
    void *user;
    uint32_t width, row_height;
    uintptr_t row_bytes;
    /* segmentation */
    int have_prev;
    uintptr_t prev_end, seg_start, seg_len;
    /* totals (walk 1) */
    uintptr_t total;
    size_t nseg, purged, blocks;
    size_t class_blocks[MC_COUNT];
    int tags_seen[MC_NTAGS];
    /* rows (walk 2, then the current row in walk 3) */
    size_t rows, seg_row;
    map_cell cell;
} map_state;

/* ---- output --------------------------------------------------------------------- */

static void emit(map_state *m, const char *fmt, ...) {
    char buf[1200];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) m->out(buf, m->user);
}

/* XML-escapes s into buf (always terminated). */
static const char *xml(const char *s, char *buf, size_t n) {
    size_t k = 0;
    for (; s && *s && k + 7 < n; s++) {
        const char *r = NULL;
        switch (*s) {
        case '&': r = "&amp;"; break;
        case '<': r = "&lt;"; break;
        case '>': r = "&gt;"; break;
        case '"': r = "&quot;"; break;
        case '\'': r = "&apos;"; break;
        default: break;
        }
        if (r) {
            size_t l = strlen(r);
            memcpy(buf + k, r, l);
            k += l;
        } else if ((unsigned char)*s >= 0x20) {
            buf[k++] = *s;
        }
    }
    buf[k] = 0;
    return buf;
}

static const char *human(size_t n, char *buf, size_t bufn) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, bufn, "%zu B", n);
    else
        snprintf(buf, bufn, "%.1f %s", v, unit[u]);
    return buf;
}

/* ---- classification ---------------------------------------------------------------- */

static int classify(const hk_block_info *b) {
    if (!(b->flags & HK_BLOCK_USED)) return (b->flags & HK_BLOCK_QUARANTINED) ? MC_QUARANTINED : MC_FREE;
    if (b->flags & HK_BLOCK_LOCKED) return MC_LOCKED;
    if (b->flags & HK_BLOCK_PURGEABLE) return MC_PURGEABLE;
    if (b->flags & HK_BLOCK_TEMP) return MC_TEMP;
    if (b->flags & HK_BLOCK_GUARDED) return MC_GUARDED;
    if (b->flags & HK_BLOCK_OVERFLOW) return MC_OVERFLOW;
    if (b->name && strcmp(b->name, "(small-block run)") == 0) return MC_RUN;
    if (b->flags & HK_BLOCK_HIGH) return MC_HIGH;
    if (b->tag > 1) return MC_TAG0 + b->tag % MC_NTAGS;
    return MC_USED;
}

static void block_title(const hk_block_info *b, int cls, char *t, size_t n) {
    char name[200], file[200], sz[32];
    int k = snprintf(t, n, "%p: %s, %s", b->address, human(b->size, sz, sizeof sz),
                     cls >= MC_TAG0 && cls < MC_TAG0 + MC_NTAGS ? "used" : k_class_name[cls]);
    if (k < 0 || (size_t)k >= n) return;
    size_t at = (size_t)k;
#define MAP_ADD(...)                                                                                         \
    do {                                                                                                     \
        int w_ = snprintf(t + at, n - at, __VA_ARGS__);                                                      \
        if (w_ > 0 && (size_t)w_ < n - at) at += (size_t)w_;                                                 \
    } while (0)
    if (b->requested && b->requested != b->size) MAP_ADD(" (asked %zu)", b->requested);
    if (b->overhead) MAP_ADD(", %zu bytes overhead", b->overhead);
    if (b->tag) MAP_ADD(", tag %d", (int)b->tag);
    if (b->id) MAP_ADD(", id 0x%x", (unsigned)b->id);
    if (b->lock_count) MAP_ADD(", locked %u", (unsigned)b->lock_count);
    if (b->name) MAP_ADD(", '%s'", xml(b->name, name, sizeof name));
    if (b->site_file) MAP_ADD(", at %s:%d", xml(b->site_file, file, sizeof file), b->site_line);
#undef MAP_ADD
}

/* ---- drawing ---------------------------------------------------------------------------- */

static void draw_cell(map_state *m) {
    map_cell *c = &m->cell;
    if (!c->count) return;
    int cls = 0;
    for (int i = 1; i < MC_COUNT; i++)
        if (c->bytes[i] > c->bytes[cls]) cls = i;
    if (c->count > 1) {
        char a[32], b[32];
        size_t used = 0;
        for (int i = 0; i < MC_COUNT; i++)
            if (i != MC_FREE && i != MC_QUARANTINED) used += c->bytes[i];
        snprintf(c->title, sizeof c->title, "%zu blocks at %p-%p: %s used, %s free", c->count,
                 (void *)c->first, (void *)c->end, human(used, a, sizeof a),
                 human(c->bytes[MC_FREE], b, sizeof b));
    }
    emit(m, "<g fill=\"%s\"><title>%s</title>", k_color[cls], c->title);
    double w = (double)m->width;
    uintptr_t off = c->off0;
    while (off < c->off1 || off == c->off0) {
        size_t row = (size_t)(off / m->row_bytes);
        uintptr_t row_end = (uintptr_t)(row + 1) * m->row_bytes;
        uintptr_t piece_end = c->off1 < row_end ? c->off1 : row_end;
        double x0 = (double)(off - row * m->row_bytes) / (double)m->row_bytes * w;
        double x1 = (double)(piece_end - row * m->row_bytes) / (double)m->row_bytes * w;
        if (x1 - x0 < 0.6) x1 = x0 + 0.6;
        double y =
            MAP_TOP + (double)(m->seg_row + row) * (m->row_height + 2) + (double)m->nseg * MAP_SEG_SPACE;
        emit(m, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%u\"/>", 8 + x0, y, x1 - x0,
             m->row_height);
        if (piece_end >= c->off1) break;
        off = piece_end;
    }
    emit(m, "</g>\n");
    memset(c, 0, offsetof(map_cell, title));
    c->title[0] = 0;
}

static size_t seg_rows(const map_state *m, uintptr_t len) {
    size_t r = (size_t)(len / m->row_bytes);
    return r + (len % m->row_bytes != 0 || r == 0);
}

/* Ends the current segment (walks 2 and 3). */
static void end_segment(map_state *m) {
    if (!m->have_prev) return;
    if (m->pass == 3) {
        draw_cell(m);
        double y = MAP_TOP + (double)m->seg_row * (m->row_height + 2) + (double)m->nseg * MAP_SEG_SPACE;
        size_t r = seg_rows(m, m->seg_len);
        /* the segment's outline, and where it is */
        emit(m,
             "<rect x=\"7.5\" y=\"%.1f\" width=\"%u\" height=\"%.1f\" fill=\"none\" stroke=\"#999\" "
             "stroke-width=\"0.5\"/>\n",
             y - 0.5, m->width + 1, (double)r * (m->row_height + 2) - 1);
        emit(m, "<text x=\"%u\" y=\"%.1f\" font-size=\"9\" fill=\"#555\">%p</text>\n", m->width + 14, y + 9,
             (void *)m->seg_start);
    }
    m->seg_row += seg_rows(m, m->seg_len);
    m->nseg++;
}

static int map_visit(const hk_block_info *b, void *user) {
    map_state *m = user;
    if (!b->address) {
        if (m->pass == 1) m->purged++;
        return 0;
    }
    uintptr_t a = (uintptr_t)b->address, end = a + b->size;
    int cls = classify(b);
    if (!m->have_prev || a < m->prev_end || a - m->prev_end > MAP_GAP) {
        if (m->pass == 1) {
            if (m->have_prev) m->total += m->seg_len;
        } else {
            end_segment(m);
        }
        if (m->pass == 1) m->nseg++;
        m->seg_start = a;
        m->seg_len = 0;
        m->have_prev = 1;
    }
    if (end - m->seg_start > m->seg_len) m->seg_len = end - m->seg_start;
    m->prev_end = end;
    if (m->pass == 1) {
        m->blocks++;
        m->class_blocks[cls]++;
        if (cls >= MC_TAG0 && cls < MC_TAG0 + MC_NTAGS && !m->tags_seen[cls - MC_TAG0])
            m->tags_seen[cls - MC_TAG0] = (int)b->tag;
        return 0;
    }
    if (m->pass != 3) return 0;
    double px = (double)b->size / (double)m->row_bytes * m->width;
    map_cell *c = &m->cell;
    if (c->count && px >= MAP_MIN_PX) draw_cell(m);
    if (!c->count) {
        c->first = a;
        c->off0 = a - m->seg_start;
        block_title(b, cls, c->title, sizeof c->title);
    }
    c->count++;
    c->end = end;
    c->off1 = end - m->seg_start;
    c->bytes[cls] += b->size ? b->size : 1;
    if ((double)(c->off1 - c->off0) / (double)m->row_bytes * m->width >= MAP_MIN_PX) draw_cell(m);
    return 0;
}

static void draw_header(map_state *m, const hk_stats *st, hk_result check, int walk_ok, uint32_t height) {
    char t[300], a[32], b[32], c[32], d[32], e[32];
    emit(m,
         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" height=\"%u\" viewBox=\"0 0 %u %u\" "
         "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
         "fill=\"#fff\"/>\n",
         m->width + 120, height, m->width + 120, height);
    if (!(m->opt->flags & HK_MAP_NO_HEADER)) {
        char deft[64];
        snprintf(deft, sizeof deft, "%s heap map", st->allocator ? st->allocator : "heap");
        emit(m, "<text x=\"8\" y=\"18\" font-size=\"15\" font-weight=\"bold\">%s</text>\n",
             xml(m->opt->title ? m->opt->title : deft, t, sizeof t));
        emit(m,
             "<text x=\"8\" y=\"37\">capacity %s; used %s in %zu blocks (%s with overhead); free %s in %zu "
             "fragments, largest %s</text>\n",
             human(st->capacity, a, sizeof a), human(st->used, b, sizeof b), st->live_blocks,
             human(st->used_blocks_bytes, c, sizeof c), human(st->free, d, sizeof d), st->free_blocks,
             human(st->largest_free, e, sizeof e));
        const char *verdict = (m->opt->flags & HK_MAP_NO_CHECK) ? "not run"
                              : check == HK_OK                  ? "ok"
                                                                : hk_result_str(check);
        emit(m, "<text x=\"8\" y=\"55\">check: <tspan fill=\"%s\">%s</tspan>; %zu blocks drawn, %s per row",
             check == HK_OK ? "#1b7f3b" : "#c0392b", verdict, m->blocks, human(m->row_bytes, a, sizeof a));
        if (m->purged) emit(m, "; %zu purged handles (no memory, not drawn)", m->purged);
        emit(m, "</text>\n");
        if (!walk_ok)
            emit(m, "<text x=\"400\" y=\"55\" fill=\"#c0392b\">walk stopped early (damage)</text>\n");
    }
    /* legend: the classes present */
    double x = 8;
    for (int i = 0; i < MC_COUNT; i++) {
        if (!m->class_blocks[i]) continue;
        char label[48];
        if (i >= MC_TAG0 && i < MC_TAG0 + MC_NTAGS)
            snprintf(label, sizeof label, "tag %d%s", m->tags_seen[i - MC_TAG0], "");
        else
            snprintf(label, sizeof label, "%s", k_class_name[i]);
        emit(m,
             "<rect x=\"%.0f\" y=\"66\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%.0f\" "
             "y=\"77\">%s</text>\n",
             x, k_color[i], x + 16, label);
        x += 24 + 7.0 * (double)strlen(label);
    }
}

hk_result hk_map_heap(void *heap, const hk_stats *stats, hk_map_walk_fn walk, hk_result check,
                      const hk_map_options *opt, hk_print_fn out, void *user) {
    if (!stats || !walk || !out) return HK_ERR_INVALID;
    hk_map_options defaults;
    memset(&defaults, 0, sizeof defaults);
    if (!opt) opt = &defaults;
    map_state m;
    memset(&m, 0, sizeof m);
    m.opt = opt;
    m.out = out;
    m.user = user;
    m.width = opt->width ? (opt->width < 200 ? 200 : opt->width) : 960;
    m.row_height = opt->row_height ? opt->row_height : 16;

    m.pass = 1;
    int w1 = walk(heap, map_visit, &m);
    if (m.have_prev) m.total += m.seg_len;
    if (opt->row_bytes)
        m.row_bytes = opt->row_bytes;
    else {
        uintptr_t rb = m.total / 40 + 1;
        m.row_bytes = rb < 64 ? 64 : (rb + 63) & ~(uintptr_t)63;
    }
    m.pass = 2;
    m.have_prev = 0;
    m.nseg = 0;
    m.seg_row = 0;
    (void)walk(heap, map_visit, &m);
    end_segment(&m);
    size_t rows = m.seg_row;
    uint32_t height = MAP_TOP + (uint32_t)rows * (m.row_height + 2) + (uint32_t)m.nseg * MAP_SEG_SPACE + 12;

    draw_header(&m, stats, check, w1 == 0, height);
    m.pass = 3;
    m.have_prev = 0;
    m.nseg = 0;
    m.seg_row = 0;
    int w3 = walk(heap, map_visit, &m);
    end_segment(&m);
    if (m.blocks == 0) emit(&m, "<text x=\"8\" y=\"%u\" fill=\"#555\">(no blocks)</text>\n", MAP_TOP + 12);
    emit(&m, "</svg>\n");
    return w1 == 0 && w3 == 0 ? HK_OK : HK_ERR_CORRUPT;
}

/* ---- each allocator ------------------------------------------------------------------------- */

#define HK_MAP_ADAPTER(kind, type)                                                                           \
    static int map_walk_##kind(void *h, hk_walk_fn fn, void *user) {                                         \
        return hk_##kind##_walk((type *)h, fn, user);                                                        \
    }                                                                                                        \
    hk_result hk_map_##kind(type *x, const hk_map_options *opt, hk_print_fn out, void *user) {               \
        if (!x) return HK_ERR_INVALID;                                                                       \
        hk_stats st;                                                                                         \
        memset(&st, 0, sizeof st);                                                                           \
        hk_##kind##_stats(x, &st);                                                                           \
        hk_result chk = (opt && (opt->flags & HK_MAP_NO_CHECK)) ? HK_OK : hk_##kind##_check(x);              \
        return hk_map_heap(x, &st, map_walk_##kind, chk, opt, out, user);                                    \
    }

HK_MAP_ADAPTER(zone, hk_zone)
HK_MAP_ADAPTER(hunk, hk_hunk)
HK_MAP_ADAPTER(cache, hk_cache)
HK_MAP_ADAPTER(pool, hk_pool)
HK_MAP_ADAPTER(gc, hk_gc)
HK_MAP_ADAPTER(guard, hk_guard)
