/*
 * src/guard_leak.c - leak detection at exit (hk_guard_leaks): blocks no
 * pointer reaches (a conservative mark from the process's writable
 * memory), or every live block, grouped by allocation stack, largest
 * first; and the padding of every live block checked once more.
 *
 * Invariants: the scan reads the heap's metadata and blocks under its lock
 * and writes nothing but its own work arrays (fresh OS pages, or for a short
 * run a buffer on this stack; excluded from the roots with the heap's own
 * mappings); reading a root that vanished or is unreadable is survived (a
 * protected call) when the fault handler is installed; a block is reported
 * unreachable only when no aligned word in the roots or in reached blocks
 * points into it. The roots: every private
 * writable mapping (data and bss of every module, TLS blocks, other
 * threads' stacks, the backing heap) but the heap's own, and of the
 * scanning thread's stack only the live part, from its stack pointer up,
 * with its callee-saved registers spilled there first: nothing below a
 * stack pointer keeps a block alive, so the verdict does not depend on
 * what dead frames happen to hold.
 */
#include "guard_internal.h"

#define GUARD_SCAN_WHOLE ((uintptr_t)64 << 10) /* roots larger than this: resident pages only */
#define GUARD_SCAN_STEP  ((uintptr_t)64 << 20)
#define GUARD_LEAK_SMALL 4096u /* work arrays up to this size live on the scanning thread's stack */

typedef struct guard_leak_ctx {
    hk_guard *g;
    uint8_t *marks;  /* one byte per slot id */
    uint32_t *stack; /* ids to scan */
    size_t nstack, capstack;
    uintptr_t excl_lo[10], excl_hi[10];
    int nexcl;
    uintptr_t scan_lo, scan_hi;        /* the range being scanned (for protected calls) */
    bool scan_block;                   /* scanning a block (words from its start) rather than a root */
    uintptr_t sp;                      /* the scanning thread's stack pointer: nothing below it is live */
    uintptr_t sp_lo;                   /* its stack's lowest address where the host knows it, else 0 */
    const hk_os_thread_state *threads; /* the other threads, stopped (their stack pointers) */
    int nthreads;
    bool scanned; /* the roots could be read (else: report nothing) */
} guard_leak_ctx;

/* Below a stopped thread's stack pointer: the x86-64 red zone, where a
 * leaf function may keep live values the signal frame skipped over. */
#define GUARD_RED_ZONE 128u

typedef struct __attribute__((packed, may_alias)) guard_uword { /* a word at any address */
    uintptr_t v;
} guard_uword;

static void guard_leak_mark_word(guard_leak_ctx *c, uintptr_t w) {
    hk_guard *g = c->g;
    uintptr_t off = w - (uintptr_t)g->arena;
    if (off >= g->bump) return;
    uint32_t id = g->pagemap[off / g->page];
    if (!id || c->marks[id]) return;
    const guard_slot *s = &g->slots[id];
    if (s->state != GUARD_STATE_LIVE || w < guard_data(g, s)) return;
    c->marks[id] = 1;
    if (c->nstack < c->capstack) c->stack[c->nstack++] = id;
}

/* Reads whole mappings of the process, memory no sanitizer tracks: under
 * ThreadSanitizer the loads are plain (not instrumented, no intercepted
 * memcpy), or its shadow lookup faults on them. */
static HK__NO_TSAN void guard_leak_scan_range(void *arg) {
    guard_leak_ctx *c = (guard_leak_ctx *)arg;
    /* roots: aligned words; a block: words at multiples of 8 from its start,
     * where its fields are (a block may be aligned to less than 8) */
    uintptr_t lo = c->scan_block ? c->scan_lo : (c->scan_lo + 7) & ~(uintptr_t)7;
    uintptr_t hi = c->scan_hi < 8 ? 0 : c->scan_hi - 7;
    for (uintptr_t p = lo; p < hi; p += 8) {
        uintptr_t w;
        if (hk__tsan_enabled())
            w = c->scan_block ? ((const volatile guard_uword *)p)->v : *(const volatile uintptr_t *)p;
        else
            memcpy(&w, (const void *)p, sizeof w);
        guard_leak_mark_word(c, w);
    }
}

static void guard_leak_root(uintptr_t lo, uintptr_t hi, void *user) {
    guard_leak_ctx *c = (guard_leak_ctx *)user;
    /* A host that shows a stack as several regions (Windows): a region
     * wholly inside a stack's allocation and below its stack pointer (less
     * the red zone) is dead stack, skipped like the dead part of the region
     * holding the stack pointer below. */
    if (c->sp_lo && lo >= c->sp_lo && hi <= c->sp) return;
    for (int i = 0; i < c->nthreads; i++) {
        const hk_os_thread_state *t = &c->threads[i];
        if (t->stack_lo && lo >= t->stack_lo && t->sp - t->stack_lo >= GUARD_RED_ZONE &&
            hi <= t->sp - GUARD_RED_ZONE)
            return;
    }
    /* This thread's stack: only its live part, from the stack pointer up
     * (the scan's own frames are there, and the registers hk_guard_leaks
     * spilled). Below it lie dead frames whose stale pointers would hide
     * real leaks, differently on every run. */
    uintptr_t live = c->sp >= lo && c->sp < hi ? c->sp : UINTPTR_MAX;
    /* Each stopped thread's stack likewise: from its stack pointer (less
     * the red zone) up. A mapping holding several stack pointers (stacks
     * without guard pages between them) is scanned from the lowest. */
    for (int i = 0; i < c->nthreads; i++) {
        uintptr_t sp = c->threads[i].sp;
        sp = sp - lo >= GUARD_RED_ZONE ? sp - GUARD_RED_ZONE : lo;
        if (sp >= lo && sp < hi && sp < live) live = sp;
    }
    if (live != UINTPTR_MAX) lo = live & ~(uintptr_t)7;
    /* subtract the heap's own mappings */
    for (int i = 0; i < c->nexcl; i++) {
        if (c->excl_hi[i] <= lo || c->excl_lo[i] >= hi) continue;
        if (c->excl_lo[i] > lo) guard_leak_root(lo, c->excl_lo[i], user);
        if (c->excl_hi[i] < hi) guard_leak_root(c->excl_hi[i], hi, user);
        return;
    }
    if (hi - lo <= GUARD_SCAN_WHOLE) {
        c->scan_lo = lo;
        c->scan_hi = hi;
        (void)hk_os_protected_call(guard_leak_scan_range, c);
        return;
    }
    /* A larger range (a sanitizer's shadow, a runtime's arena reservation,
     * the 1 MiB alternate signal stacks, bss arenas): only its resident
     * pages. A page never touched reads as zero (holds no pointer), and
     * reading it would fault in a page per 4 KiB: most of a small
     * program's exit time. A page swapped out is not resident either: a
     * pointer in it is missed (see docs/guard.md). */
    static unsigned char vec[GUARD_SCAN_STEP / 4096];
    size_t ps = c->g->page;
    uintptr_t first = lo & ~(uintptr_t)(ps - 1);
    for (uintptr_t at = first; at < hi; at += GUARD_SCAN_STEP) {
        uintptr_t end = hi - at > GUARD_SCAN_STEP ? at + GUARD_SCAN_STEP : hi;
        size_t npages = (end - at + ps - 1) / ps;
        if (npages > sizeof vec || hk_os_resident((void *)at, npages * ps, vec) != 0) {
            /* cannot tell: scan it all */
            c->scan_lo = at > lo ? at : lo;
            c->scan_hi = end;
            (void)hk_os_protected_call(guard_leak_scan_range, c);
            continue;
        }
        for (size_t i = 0; i < npages; i++) {
            if (!(vec[i] & 1)) continue;
            uintptr_t pl = at + i * ps, ph = pl + ps;
            c->scan_lo = pl > lo ? pl : lo;
            c->scan_hi = ph < end ? ph : end;
            (void)hk_os_protected_call(guard_leak_scan_range, c);
        }
    }
}

/* The mark phase, run while the other threads are stopped (threads: their
 * states; hk_os_stop_world's fn) or, when they cannot be, with none known
 * (their stacks are then scanned whole, as any other mapping): roots, each
 * stopped thread's registers, then the blocks reached. Allocates nothing. */
static void guard_leak_mark(const hk_os_thread_state *threads, int n, void *user) {
    guard_leak_ctx *c = (guard_leak_ctx *)user;
    hk_guard *g = c->g;
    c->threads = threads;
    c->nthreads = n;
    if (n > 0) { /* the states (the host layer's memory) are read as registers below, not as a root */
        c->excl_lo[c->nexcl] = (uintptr_t)threads;
        c->excl_hi[c->nexcl++] = (uintptr_t)(threads + n);
    }
    c->scan_block = false;
    if (hk_os_writable_ranges(guard_leak_root, c) < 0) return; /* c->scanned stays false: report nothing */
    c->scanned = true;
    for (int i = 0; i < n; i++)
        for (int r = 0; r < threads[i].nregs; r++) guard_leak_mark_word(c, threads[i].regs[r]);
    c->scan_block = true;
    while (c->nstack > 0) {
        const guard_slot *s = &g->slots[c->stack[--c->nstack]];
        c->scan_lo = guard_user(g, s);
        c->scan_hi = c->scan_lo + s->requested;
        guard_leak_scan_range(c);
    }
    if (n > 0) c->nexcl--;
    c->threads = NULL; /* the states are the host layer's, valid during the stop only */
    c->nthreads = 0;
}

typedef struct guard_leak_group {
    uint32_t trace;
    uint32_t count;
    uint64_t bytes;
} guard_leak_group;

static void guard_group_sift(guard_leak_group *a, size_t n, size_t i) {
    for (;;) { /* min-heap on bytes, so the sort leaves the largest first */
        size_t l = 2 * i + 1, m = i;
        if (l < n && a[l].bytes < a[m].bytes) m = l;
        if (l + 1 < n && a[l + 1].bytes < a[m].bytes) m = l + 1;
        if (m == i) return;
        guard_leak_group t = a[i];
        a[i] = a[m];
        a[m] = t;
        i = m;
    }
}

/* An address in the caller's callee's frame: below every live frame of
 * the caller, above nothing live. */
static HK__NOINLINE uintptr_t guard_stack_pointer(void) {
    volatile char here = 0;
    uintptr_t sp = (uintptr_t)&here;
    __asm__ volatile("" : : "r"(sp) : "memory");
    return sp;
}

/* True when the stack t was allocated from inside the C library's stdio
 * (its buffers are still reachable at exit by design): the first frame's
 * nearest symbol is one of glibc's _IO_ internals. Lock held. */
static bool guard_trace_is_stdio(const hk_guard *g, uint32_t t) {
    int n;
    const void *const *fr = hk__guard_trace_get(g, t, &n);
    if (!fr || n == 0) return false;
    /* past the frames of this library (the preload's malloc) */
    uintptr_t self = hk_os_module_base((const void *)(uintptr_t)guard_trace_is_stdio);
    int i = 0;
    while (self != hk_os_main_base() && i < n - 1 && hk_os_module_base(fr[i]) == self) i++;
    hk_os_symbol sym;
    memset(&sym, 0, sizeof sym);
    sym.pc = (uintptr_t)fr[i];
    sym.return_address = 1;
    (void)hk__guard_report_begin(); /* the symbolizer is serialized with reports */
    hk_os_symbolize(&sym, 1, 0);
    hk__guard_report_end();
    return sym.name && strncmp(sym.name, "_IO_", 4) == 0;
}

size_t hk_guard_leaks(hk_guard *g, hk_guard_leak_mode mode, size_t *bytes_out) {
    if (bytes_out) *bytes_out = 0;
    if (!g) return 0;
    __builtin_unwind_init(); /* callee-saved registers onto this frame: scanned as the live stack */
    guard_lock(g);
    size_t marks_sz = g->nslots, stack_sz = (g->live_guarded + 1) * sizeof(uint32_t);
    size_t groups_sz = ((size_t)g->ntraces + 1) * sizeof(guard_leak_group);
    /* work arrays: on this stack when a short run's fit (no mapping to make
     * and drop), else fresh OS pages; zeroed either way */
    _Alignas(16) unsigned char small[GUARD_LEAK_SMALL];
    size_t marks_al = (marks_sz + 15) & ~(size_t)15, stack_al = (stack_sz + 15) & ~(size_t)15;
    bool on_stack = marks_al + stack_al + groups_sz <= sizeof small;
    uint8_t *marks, *stack_p, *groups_p;
    if (on_stack) {
        memset(small, 0, marks_al + stack_al + groups_sz);
        marks = small;
        stack_p = small + marks_al;
        groups_p = small + marks_al + stack_al;
    } else {
        marks = (uint8_t *)hk_os_alloc(marks_sz);
        stack_p = (uint8_t *)hk_os_alloc(stack_sz);
        groups_p = (uint8_t *)hk_os_alloc(groups_sz);
    }
    uint32_t *stack = (uint32_t *)(void *)stack_p;
    guard_leak_group *groups = (guard_leak_group *)(void *)groups_p;
    size_t leaked = 0, leaked_bytes = 0, ngroups = 0;
    if (!marks || !stack || !groups) goto out;

    if (mode == HK_GUARD_LEAKS_UNREACHABLE && g->live_guarded > 0) { /* nothing live: nothing to scan for */
        guard_leak_ctx c;
        memset(&c, 0, sizeof c);
        c.g = g;
        c.marks = marks;
        c.stack = stack;
        c.capstack = stack_sz / sizeof(uint32_t);
        c.sp = guard_stack_pointer();
        c.sp_lo = hk_os_stack_alloc_lo(c.sp);
        const guard_region *regs[4] = {&g->slot_reg, &g->map_reg, &g->trace_reg, &g->bucket_reg};
        c.excl_lo[c.nexcl] = (uintptr_t)g->arena;
        c.excl_hi[c.nexcl++] = (uintptr_t)g->arena + g->arena_size;
        for (int i = 0; i < 4; i++) {
            c.excl_lo[c.nexcl] = (uintptr_t)regs[i]->base;
            c.excl_hi[c.nexcl++] = (uintptr_t)regs[i]->base + regs[i]->size;
        }
        c.excl_lo[c.nexcl] = (uintptr_t)g;
        c.excl_hi[c.nexcl++] = (uintptr_t)g + g->self_size;
        c.excl_lo[c.nexcl] = (uintptr_t)marks;
        c.excl_hi[c.nexcl++] = (uintptr_t)marks + marks_sz;
        c.excl_lo[c.nexcl] = (uintptr_t)stack;
        c.excl_hi[c.nexcl++] = (uintptr_t)stack + stack_sz;
        if (hk_os_stop_world(guard_leak_mark, &c) < 0) guard_leak_mark(NULL, 0, &c); /* threads unknown */
        if (!c.scanned) {
            for (uint32_t id = 1; id < g->nslots; id++) marks[id] = 1; /* cannot tell: report nothing */
        }
    }
    /* padding of every live block, at exit as on free (after the scan:
     * pointers into blocks left in registers or on the stack by this loop
     * must not make them look reachable) */
    (void)hk__guard_check_pads_locked(g, "at exit");
    for (uint32_t id = 1; id < g->nslots; id++) {
        const guard_slot *s = &g->slots[id];
        if (s->state != GUARD_STATE_LIVE || marks[id]) continue;
        leaked++;
        leaked_bytes += s->requested;
        uint32_t t = s->alloc_trace <= g->ntraces ? s->alloc_trace : 0;
        groups[t].trace = t;
        groups[t].count++;
        groups[t].bytes += s->requested;
    }
    /* compact the groups and sort them, largest first */
    for (size_t t = 0; t <= g->ntraces; t++) {
        if (!groups[t].count) continue;
        if (mode == HK_GUARD_LEAKS_ALL && guard_trace_is_stdio(g, (uint32_t)t)) {
            leaked -= groups[t].count; /* stdio's own buffers: never reported */
            leaked_bytes -= groups[t].bytes;
            continue;
        }
        groups[ngroups++] = groups[t];
    }
    for (size_t i = ngroups / 2; i-- > 0;) guard_group_sift(groups, ngroups, i);
    for (size_t n = ngroups; n > 1; n--) {
        guard_leak_group t = groups[0];
        groups[0] = groups[n - 1];
        groups[n - 1] = t;
        guard_group_sift(groups, n - 1, 0);
    }
    if (leaked) {
        __atomic_add_fetch(&g->reports, 1, __ATOMIC_RELAXED);
        hk__report(&g->core.rep, HK_ERR_CORRUPT, HK_EK_LEAK, NULL, leaked_bytes, NULL,
                   "%zu %s in %zu %s %s at exit, from %zu allocation %s", leaked_bytes,
                   leaked_bytes == 1 ? "byte" : "bytes", leaked, leaked == 1 ? "block" : "blocks",
                   mode == HK_GUARD_LEAKS_ALL ? "still live" : "unreachable", ngroups,
                   ngroups == 1 ? "stack" : "stacks");
        if (g->core.flags & HK_GUARD_REPORT) {
            guard_out o0 = hk__guard_report_begin();
            for (size_t i = 0; i < ngroups && i < 32; i++) {
                guard_out o = o0;
                hk__guard_out_prefix(&o);
                hk__guard_out_str(&o, "leak: ");
                hk__guard_out_count(&o, groups[i].bytes, "byte", "bytes");
                hk__guard_out_str(&o, " in ");
                hk__guard_out_count(&o, groups[i].count, "block", "blocks");
                hk__guard_out_str(&o, mode == HK_GUARD_LEAKS_ALL ? " still live" : " unreachable");
                hk__guard_out_str(&o, ", allocated at:");
                int n;
                const void *const *fr = hk__guard_trace_get(g, groups[i].trace, &n);
                hk__guard_report_finish(g, &o, NULL, (void *const *)(uintptr_t)fr, fr ? n : 0, 0, NULL,
                                        false);
            }
            guard_out o = o0;
            hk__guard_out_prefix(&o);
            hk__guard_out_str(&o, "leak summary: ");
            hk__guard_out_count(&o, leaked_bytes, "byte", "bytes");
            hk__guard_out_str(&o, " in ");
            hk__guard_out_count(&o, leaked, "block", "blocks");
            hk__guard_out_str(&o, " from ");
            hk__guard_out_count(&o, ngroups, "allocation stack", "allocation stacks");
            if (ngroups > 32) hk__guard_out_str(&o, " (the 32 largest shown)");
            hk__guard_out_str(&o, "\n");
            hk_os_write(g->report_fd, o.buf, o.n);
            hk__guard_report_end();
        }
    }
out:
    guard_unlock(g);
    if (!on_stack) {
        if (marks) hk_os_release(marks, marks_sz);
        if (stack) hk_os_release(stack, stack_sz);
        if (groups) hk_os_release(groups, groups_sz);
    }
    if (bytes_out) *bytes_out = leaked_bytes;
    return leaked;
}
