/*
 * src/guard_report.c - the guard heap's reports: the one-line report
 * through the instance core's reporter and, with HK_GUARD_REPORT, the
 * detailed one written to report_fd:
 *
 *   ==pid== heapkit guard: <kind>: <what>
 *       #0 0x... in func at file:line (module+0x...)      current stack
 *     block 0x... (N bytes) allocated at:  ...            allocation stack
 *     freed at:  ...                                      free stack
 *
 * Invariants: formatting never allocates and never overruns (guard_out
 * truncates), so reports can be written from the fault handler and by a
 * heap that is the process's malloc; one report is written at a time (a
 * spin flag guards the process-wide buffer and symbol table); stacks are
 * symbolized only here, at report time, through the host layer.
 */
#include "guard_internal.h"

#include <stdlib.h>

#define GUARD_REPORT_CAP (1u << 16)
#define GUARD_SYM_MAX    (3 * HK_OS_FAULT_FRAMES)

static int guard_report_busy;
static char guard_report_buf[GUARD_REPORT_CAP];
static hk_os_symbol guard_syms[GUARD_SYM_MAX];
static int guard_nsyms;
static unsigned char guard_own_marker; /* its address tells which module we are */
static uintptr_t guard_own_base, guard_main_base;

/* ---- output formatting (async-signal-safe: no stdio, no malloc) ----------------- */

void hk__guard_out_mem(guard_out *o, const char *s, size_t n) {
    if (o->n + n >= o->cap) n = o->cap > o->n + 1 ? o->cap - o->n - 1 : 0;
    memcpy(o->buf + o->n, s, n);
    o->n += n;
    o->buf[o->n] = 0;
}
void hk__guard_out_str(guard_out *o, const char *s) {
    hk__guard_out_mem(o, s ? s : "(null)", strlen(s ? s : "(null)"));
}
void hk__guard_out_dec(guard_out *o, uint64_t v) {
    char t[24];
    int k = 0;
    do {
        t[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    char r[24];
    for (int i = 0; i < k; i++) r[i] = t[k - 1 - i];
    hk__guard_out_mem(o, r, (size_t)k);
}
void hk__guard_out_sdec(guard_out *o, int64_t v) {
    if (v < 0) {
        hk__guard_out_str(o, "-");
        hk__guard_out_dec(o, (uint64_t)0 - (uint64_t)v);
    } else {
        hk__guard_out_str(o, "+");
        hk__guard_out_dec(o, (uint64_t)v);
    }
}
void hk__guard_out_hex(guard_out *o, uint64_t v) {
    char t[20];
    int k = 0;
    do {
        unsigned d = (unsigned)(v & 15u);
        t[k++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
        v >>= 4;
    } while (v);
    char r[20];
    r[0] = '0';
    r[1] = 'x';
    for (int i = 0; i < k; i++) r[2 + i] = t[k - 1 - i];
    hk__guard_out_mem(o, r, (size_t)k + 2);
}
void hk__guard_out_ptr(guard_out *o, const void *p) { hk__guard_out_hex(o, (uint64_t)(uintptr_t)p); }

/* ---- stacks in reports ------------------------------------------------------------ */

void hk__guard_report_init(void) {
    if (__atomic_load_n(&guard_own_base, __ATOMIC_ACQUIRE)) return;
    guard_main_base = hk_os_main_base();
    __atomic_store_n(&guard_own_base, hk_os_module_base(&guard_own_marker), __ATOMIC_RELEASE);
}

/* Adds a stack to the symbol table; leading frames inside this library are
 * dropped when the library is a shared object of its own (the preload).
 * Returns the first index; *count gets the number added. */
static int guard_sym_stack(void *const *frames, int n, int fault_first, int *count) {
    int first = guard_nsyms;
    int i = 0;
    if (guard_own_base && guard_own_base != guard_main_base)
        while (i < n - 1 && hk_os_module_base(frames[i]) == guard_own_base) i++;
    for (; i < n && guard_nsyms < GUARD_SYM_MAX; i++) {
        hk_os_symbol *s = &guard_syms[guard_nsyms++];
        s->pc = (uintptr_t)frames[i];
        s->return_address = !(fault_first && i == 0);
    }
    *count = guard_nsyms - first;
    return first;
}

/* The C runtime's start frames (below main) say nothing to the reader. */
static bool guard_sym_is_crt_start(const hk_os_symbol *s) {
    const char *n = s->func[0] ? s->func : s->name;
    if (!n) return false;
    return strcmp(n, "_start") == 0 || strncmp(n, "__libc_start", 12) == 0;
}

/* One line per frame: "#i 0x... in func at file:line" when the function is
 * known, "#i 0x... (module+0x...)" when it is not. */
static void guard_sym_print(guard_out *o, int first, int count) {
    /* the outermost frames in the C library with no name are its start code */
    uintptr_t libc = hk_os_module_base((const void *)(uintptr_t)&exit);
    for (int i = 0; i < count; i++)
        if (guard_sym_is_crt_start(&guard_syms[first + i])) count = i;
    while (count > 1 && libc && libc != guard_main_base && guard_syms[first + count - 1].base == libc &&
           !guard_syms[first + count - 1].func[0] && !guard_syms[first + count - 1].name)
        count--;
    for (int i = 0; i < count; i++) {
        const hk_os_symbol *s = &guard_syms[first + i];
        hk__guard_out_str(o, "    #");
        hk__guard_out_dec(o, (uint64_t)i);
        hk__guard_out_str(o, " ");
        hk__guard_out_hex(o, s->pc);
        if (s->func[0] || s->name) {
            hk__guard_out_str(o, " in ");
            if (s->func[0]) {
                hk__guard_out_str(o, s->func);
            } else {
                hk__guard_out_str(o, s->name);
                hk__guard_out_str(o, "+");
                hk__guard_out_hex(o, s->pc - s->name_addr);
            }
            if (s->loc[0]) {
                hk__guard_out_str(o, " at ");
                hk__guard_out_str(o, s->loc);
            } else if (s->module) {
                const char *m = strrchr(s->module, '/');
                hk__guard_out_str(o, " (");
                hk__guard_out_str(o, m ? m + 1 : s->module);
                hk__guard_out_str(o, ")");
            }
        } else if (s->module) {
            const char *m = strrchr(s->module, '/');
            hk__guard_out_str(o, " (");
            hk__guard_out_str(o, m ? m + 1 : s->module);
            hk__guard_out_str(o, "+");
            hk__guard_out_hex(o, s->pc - s->base);
            hk__guard_out_str(o, ")");
        } else {
            hk__guard_out_str(o, " in ???");
        }
        hk__guard_out_str(o, "\n");
    }
}

void hk__guard_out_count(guard_out *o, uint64_t n, const char *one, const char *many) {
    hk__guard_out_dec(o, n);
    hk__guard_out_str(o, " ");
    hk__guard_out_str(o, n == 1 ? one : many);
}

/* ---- detailed reports ----------------------------------------------------------- */

_Thread_local int hk__guard_tl_reporting __attribute__((tls_model("initial-exec")));

guard_out hk__guard_report_begin(void) {
    while (__atomic_exchange_n(&guard_report_busy, 1, __ATOMIC_ACQUIRE)) {
    }
    hk__guard_tl_reporting = 1;
    guard_report_buf[0] = 0;
    guard_out o = {guard_report_buf, 0, sizeof guard_report_buf};
    return o;
}
void hk__guard_report_end(void) {
    hk__guard_tl_reporting = 0;
    __atomic_store_n(&guard_report_busy, 0, __ATOMIC_RELEASE);
}

void hk__guard_out_prefix(guard_out *o) {
    hk__guard_out_str(o, "==");
    hk__guard_out_dec(o, (uint64_t)hk_os_getpid());
    hk__guard_out_str(o, "== heapkit guard: ");
}

void hk__guard_report_finish(hk_guard *g, guard_out *o, const char *label, void *const *cur, int ncur,
                             int fault, const guard_blockinfo *b, bool aborting) {
    guard_nsyms = 0;
    int c0 = 0, cn = 0, a0 = 0, an = 0, f0 = 0, fn = 0;
    c0 = guard_sym_stack(cur, ncur, fault, &cn);
    if (b && b->valid) {
        int n;
        const void *const *fr = hk__guard_trace_get(g, b->alloc_trace, &n);
        if (fr) a0 = guard_sym_stack((void *const *)(uintptr_t)fr, n, 0, &an);
        fr = hk__guard_trace_get(g, b->free_trace, &n);
        if (fr && b->state != GUARD_STATE_LIVE) f0 = guard_sym_stack((void *const *)(uintptr_t)fr, n, 0, &fn);
    }
    hk_os_symbolize(guard_syms, guard_nsyms,
                    (g->core.flags & HK_GUARD_NO_SYMBOLIZE_LINES) ? 0u : HK_OS_SYMBOLIZE_LINES);
    hk__guard_out_str(o, "\n");
    /* said once per process, not left to look like a program without
     * debug information */
    static int said_lines;
    if (!(g->core.flags & HK_GUARD_NO_SYMBOLIZE_LINES) && !said_lines) {
        if (hk_os_symbolize_lines_missing()) {
            said_lines = 1;
            hk__guard_out_str(
                o, "  (frames without file:line: neither libdw.so.1 (Debian: libdw1) nor addr2line "
                   "(binutils) was found)\n");
        } else if (hk_os_symbolize_lines_slow()) {
            said_lines = 1;
            hk__guard_out_str(o, "  (file:line from addr2line processes: libdw.so.1 did not load; with it "
                                 "(Debian: libdw1) reports are faster)\n");
        }
    }
    if (label && cn) {
        hk__guard_out_str(o, "  ");
        hk__guard_out_str(o, label);
        hk__guard_out_str(o, ":\n");
    }
    guard_sym_print(o, c0, cn);
    if (b && b->valid) {
        hk__guard_out_str(o, "  block ");
        hk__guard_out_hex(o, b->user);
        hk__guard_out_str(o, " (");
        hk__guard_out_count(o, b->requested, "byte", "bytes");
        hk__guard_out_str(o, ") allocated at:\n");
        if (an)
            guard_sym_print(o, a0, an);
        else
            hk__guard_out_str(o, "    (no stack recorded)\n");
        if (b->state != GUARD_STATE_LIVE) {
            hk__guard_out_str(o, label && strncmp(label, "freed", 5) == 0 ? "  first freed at:\n"
                                                                          : "  freed at:\n");
            if (fn)
                guard_sym_print(o, f0, fn);
            else
                hk__guard_out_str(o, "    (no stack recorded)\n");
        }
    }
    if (aborting) {
        hk__guard_out_prefix(o);
        hk__guard_out_str(o, "aborting\n");
    }
    hk_os_write(g->report_fd, o->buf, o->n);
}

/* The label of the current stack of a misuse report: the call that found it. */
static const char *guard_misuse_label(const char *what) {
    if (strncmp(what, "free", 4) == 0 || strstr(what, "found at free")) return "freed at";
    if (strncmp(what, "realloc", 7) == 0) return "realloc called at";
    return "at";
}

hk_result hk__guard_misuse_ex(hk_guard *g, hk_result res, hk_error_kind kind, const void *addr, size_t size,
                              const guard_blockinfo *b, void *const *cur, int ncur, const char *what,
                              bool may_abort) {
    bool aborting = may_abort && (g->core.flags & HK_GUARD_ABORT) != 0;
    __atomic_add_fetch(&g->reports, 1, __ATOMIC_RELAXED);
    hk__report(&g->core.rep, res, kind, addr, size, NULL, "%s", what);
    if (g->core.flags & HK_GUARD_REPORT) {
        guard_out o = hk__guard_report_begin();
        hk__guard_out_prefix(&o);
        hk__guard_out_str(&o, hk_error_kind_str(kind));
        hk__guard_out_str(&o, ": ");
        hk__guard_out_str(&o, what);
        hk__guard_report_finish(g, &o, guard_misuse_label(what), cur, ncur, 0, b, aborting);
        hk__guard_report_end();
    }
    if (aborting) hk_os_abort();
    return res;
}

hk_result hk__guard_misuse(hk_guard *g, hk_result res, hk_error_kind kind, const void *addr, size_t size,
                           const guard_blockinfo *b, void *const *cur, int ncur, const char *what) {
    return hk__guard_misuse_ex(g, res, kind, addr, size, b, cur, ncur, what, true);
}

hk_result hk__guard_pad_report(hk_guard *g, const guard_blockinfo *b, int dmg, uintptr_t first,
                               uintptr_t last, const char *found, void *const *cur, int ncur) {
    char what[320];
    guard_out o = {what, 0, sizeof what};
    what[0] = 0;
    hk__guard_out_str(&o, dmg > 0 ? "write past the end of " : "write before the start of ");
    hk__guard_out_str(&o, b->state == GUARD_STATE_LIVE && strcmp(found, "at free") != 0 ? "live " : "");
    hk__guard_out_dec(&o, b->requested);
    hk__guard_out_str(&o, "-byte block ");
    hk__guard_out_hex(&o, b->user);
    hk__guard_out_str(&o, " found ");
    hk__guard_out_str(&o, found);
    hk__guard_out_str(&o, ": padding damaged at offset");
    int64_t f = (int64_t)(first - b->user), l = (int64_t)(last - b->user);
    if (f != l) hk__guard_out_str(&o, "s");
    hk__guard_out_str(&o, " ");
    hk__guard_out_sdec(&o, f);
    if (f != l) {
        hk__guard_out_str(&o, " to ");
        hk__guard_out_sdec(&o, l);
    }
    hk__guard_out_str(&o, dmg > 0 ? " (first byte past the end: " : " (block start: ");
    hk__guard_out_hex(&o, dmg > 0 ? b->user + b->requested : b->user);
    hk__guard_out_str(&o, ")");
    return hk__guard_misuse_ex(g, HK_ERR_CORRUPT, dmg > 0 ? HK_EK_HEAP_OVERFLOW : HK_EK_HEAP_UNDERFLOW,
                               (void *)first, b->requested, b, cur, ncur, what,
                               strcmp(found, "at free") == 0);
}

const char *hk__guard_fmt_what(char *buf, size_t n, const char *lead, const void *p, const guard_blockinfo *b,
                               const char *tail) {
    guard_out o = {buf, 0, n};
    buf[0] = 0;
    hk__guard_out_str(&o, lead);
    hk__guard_out_str(&o, " ");
    hk__guard_out_ptr(&o, p);
    if (b && b->valid) {
        hk__guard_out_str(&o, ": ");
        int64_t off = (int64_t)((uintptr_t)p - b->user);
        if (off != 0) {
            hk__guard_out_str(&o, "offset ");
            hk__guard_out_sdec(&o, off);
            hk__guard_out_str(&o, " of ");
        }
        hk__guard_out_dec(&o, b->requested);
        hk__guard_out_str(&o, "-byte block ");
        hk__guard_out_hex(&o, b->user);
    }
    if (tail) hk__guard_out_str(&o, tail);
    return buf;
}

hk_result hk__guard_corrupt(hk_guard *g, hk_error_kind kind, const void *addr, const char *what, uint64_t a,
                            uint64_t b) {
    __atomic_add_fetch(&g->reports, 1, __ATOMIC_RELAXED);
    return hk__report(&g->core.rep, HK_ERR_CORRUPT, kind, addr, 0, NULL, "%s (%llu, %llu)", what,
                      (unsigned long long)a, (unsigned long long)b);
}
