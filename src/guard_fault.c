/*
 * src/guard_fault.c - turns a fault into a report: the guard heap's
 * callback for the host layer's SIGSEGV/SIGBUS handler.
 *
 * A fault in a guard page next to a live block is an overflow (the block
 * before it) or an underflow (the block after it); in a freed slot's pages,
 * a use after free. A fault elsewhere whose address or a register holds a
 * fill pattern is uninitialized or freed heap memory used as a pointer.
 * Anything else is reported as unexplained and left to the default action.
 *
 * Invariants: instances are registered here at create and removed at
 * destroy (up to GUARD_MAX_INSTANCES with HK_GUARD_FAULT_HANDLER); the
 * callback is registered with the host layer once per process; it reads
 * the heaps' metadata without their locks (the program is about to die)
 * and never returns from a fault it reported.
 */
#include "guard_internal.h"

static hk_guard *guard_instances[GUARD_MAX_INSTANCES];

static const char *guard_access_str(int access) {
    return access == HK_OS_ACCESS_WRITE ? "write" : access == HK_OS_ACCESS_READ ? "read" : "access";
}

/* Does this value look like it came from a fill pattern? */
static bool guard_is_fill_value(uintptr_t v, unsigned *pat) {
    static const unsigned pats[3] = {HK_FILL_ALLOC, HK_FILL_FREE, HK_FILL_PAD};
    for (int i = 0; i < 3; i++) {
        uint32_t w = 0x01010101u * pats[i];
        if ((uint32_t)v == w || (uint32_t)(v >> 32) == w) {
            *pat = pats[i];
            return true;
        }
    }
    return false;
}

static void guard_on_fault(const hk_os_fault *f, void *user) {
    (void)user;
    hk_guard *g = NULL;
    for (int i = 0; i < GUARD_MAX_INSTANCES; i++)
        if (guard_instances[i] && guard_in_arena(guard_instances[i], f->addr)) g = guard_instances[i];

    guard_out o = hk__guard_report_begin();
    guard_blockinfo b = {0, 0, 0, 0, 0, 0};
    if (!g) {
        /* Not a guard page. Still useful: a pointer made of fill bytes. */
        hk_guard *any = NULL;
        for (int i = 0; i < GUARD_MAX_INSTANCES && !any; i++) any = guard_instances[i];
        unsigned pat = 0;
        int reg = -1;
        if (guard_is_fill_value((uintptr_t)f->addr, &pat)) reg = -2;
        for (int i = 0; i < f->nregs && reg == -1; i++)
            if (guard_is_fill_value(f->regs[i], &pat)) reg = i;
        if (!any) {
            hk__guard_report_end();
            return;
        }
        hk__guard_out_prefix(&o);
        if (reg != -1) {
            hk__guard_out_str(&o, pat == HK_FILL_ALLOC  ? "uninitialized heap memory used as a pointer"
                                  : pat == HK_FILL_FREE ? "freed heap memory used as a pointer"
                                                        : "padding bytes used as a pointer");
            hk__guard_out_str(&o, ": ");
            hk__guard_out_str(&o, f->signame);
            hk__guard_out_str(&o, " at ");
            hk__guard_out_ptr(&o, f->addr);
            hk__guard_out_str(&o, ", ");
            if (reg >= 0) {
                hk__guard_out_str(&o, f->regnames[reg]);
                hk__guard_out_str(&o, " = ");
                hk__guard_out_hex(&o, f->regs[reg]);
            } else {
                hk__guard_out_str(&o, "the address");
            }
            hk__guard_out_str(&o, " holds the fill pattern ");
            hk__guard_out_hex(&o, pat);
            hk__guard_out_str(&o, pat == HK_FILL_ALLOC ? " of fresh, never-written heap memory" : "");
            __atomic_add_fetch(&any->reports, 1, __ATOMIC_RELAXED);
            any->core.rep.error_count++;
            hk__guard_report_finish(any, &o, NULL, f->frames, f->nframes, 1, NULL, true);
            hk_os_abort();
        }
        hk__guard_out_str(&o, f->signame);
        hk__guard_out_str(&o, " on an address outside every guard heap: ");
        hk__guard_out_ptr(&o, f->addr);
        hk__guard_out_str(&o, " (");
        hk__guard_out_str(&o, guard_access_str(f->access));
        hk__guard_out_str(&o, ", pc ");
        hk__guard_out_ptr(&o, f->pc);
        hk__guard_out_str(&o, "); not a heap error heapkit can explain");
        hk__guard_report_finish(any, &o, NULL, f->frames, f->nframes, 1, NULL, false);
        hk__guard_report_end();
        return; /* the default action follows: a core dump at the fault */
    }

    hk_error_kind kind = HK_EK_NONE;
    const char *note = NULL;
    uintptr_t a = (uintptr_t)f->addr;
    uint32_t id = guard_slot_of(g, f->addr);
    size_t off = (size_t)(a - (uintptr_t)g->arena);
    if (id && id < g->nslots && a >= guard_data(g, &g->slots[id])) {
        const guard_slot *s = &g->slots[id];
        guard_blockinfo_from(g, s, &b);
        if (s->state == GUARD_STATE_QUAR)
            kind = HK_EK_USE_AFTER_FREE;
        else if (s->state == GUARD_STATE_FREE) {
            kind = HK_EK_USE_AFTER_FREE;
            note = " (the block has left the quarantine; stacks of its last use)";
        } else {
            kind = HK_EK_NONE;
            note = " (inside a live block: not a guard page)";
        }
    } else {
        /* a guard page: after the previous slot's block, or before this one's */
        uint32_t prev = off >= g->page ? guard_slot_of(g, (const void *)(a - g->page)) : 0;
        if (id && prev == id) prev = 0;
        if (!id && off >= g->bump && g->bump) prev = g->pagemap[g->bump / g->page - 1];
        guard_blockinfo pb = {0, 0, 0, 0, 0, 0}, nb = {0, 0, 0, 0, 0, 0};
        if (prev && prev < g->nslots) guard_blockinfo_from(g, &g->slots[prev], &pb);
        if (id && id < g->nslots) guard_blockinfo_from(g, &g->slots[id], &nb);
        uintptr_t dprev = pb.valid ? a - (pb.user + pb.requested) : UINTPTR_MAX;
        uintptr_t dnext = nb.valid && nb.user > a ? nb.user - a : UINTPTR_MAX;
        int prefer_prev =
            pb.valid &&
            (!nb.valid || (pb.state == GUARD_STATE_LIVE && nb.state != GUARD_STATE_LIVE) ||
             ((pb.state == GUARD_STATE_LIVE) == (nb.state == GUARD_STATE_LIVE) && dprev <= dnext));
        if (prefer_prev) {
            b = pb;
            kind = pb.state == GUARD_STATE_LIVE ? HK_EK_HEAP_OVERFLOW : HK_EK_USE_AFTER_FREE;
        } else if (nb.valid) {
            b = nb;
            kind = nb.state == GUARD_STATE_LIVE ? HK_EK_HEAP_UNDERFLOW : HK_EK_USE_AFTER_FREE;
        }
    }
    hk__guard_out_prefix(&o);
    hk__guard_out_str(&o, kind == HK_EK_NONE ? "fault in the guard heap" : hk_error_kind_str(kind));
    hk__guard_out_str(&o, " (");
    hk__guard_out_str(&o, guard_access_str(f->access));
    hk__guard_out_str(&o, " of ");
    if (f->access_size)
        hk__guard_out_count(&o, (uint64_t)f->access_size, "byte", "bytes");
    else
        hk__guard_out_str(&o, "unknown size");
    hk__guard_out_str(&o, ") at ");
    hk__guard_out_ptr(&o, f->addr);
    if (b.valid) {
        int64_t d = (int64_t)(a - b.user);
        hk__guard_out_str(&o, ": offset ");
        hk__guard_out_sdec(&o, d);
        hk__guard_out_str(&o, " of ");
        hk__guard_out_dec(&o, b.requested);
        hk__guard_out_str(&o, "-byte ");
        hk__guard_out_str(&o, b.state == GUARD_STATE_LIVE ? "block " : "freed block ");
        hk__guard_out_hex(&o, b.user);
        if (kind == HK_EK_HEAP_OVERFLOW) {
            hk__guard_out_str(&o, " (");
            hk__guard_out_count(&o, (uint64_t)(a - (b.user + b.requested)), "byte", "bytes");
            hk__guard_out_str(&o, " past its end; the first byte past the end is ");
            hk__guard_out_hex(&o, b.user + b.requested);
            hk__guard_out_str(&o, ")");
        } else if (kind == HK_EK_HEAP_UNDERFLOW) {
            hk__guard_out_str(&o, " (");
            hk__guard_out_count(&o, (uint64_t)(b.user - a), "byte", "bytes");
            hk__guard_out_str(&o, " before its start)");
        }
    }
    if (note) hk__guard_out_str(&o, note);
    __atomic_add_fetch(&g->reports, 1, __ATOMIC_RELAXED);
    g->core.rep.error_count++;
    hk__guard_report_finish(g, &o, NULL, f->frames, f->nframes, 1, &b, true);
    hk_os_abort();
}

bool hk__guard_fault_attach(hk_guard *g) {
    bool ok = false;
    for (int i = 0; i < GUARD_MAX_INSTANCES && !ok; i++) {
        hk_guard *expect = NULL;
        ok = __atomic_compare_exchange_n(&guard_instances[i], &expect, g, false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE);
    }
    hk_result r = hk_os_fault_register(guard_on_fault, NULL);
    return ok && r == HK_OK;
}

void hk__guard_fault_detach(hk_guard *g) {
    for (int i = 0; i < GUARD_MAX_INSTANCES; i++) {
        hk_guard *expect = g;
        (void)__atomic_compare_exchange_n(&guard_instances[i], &expect, NULL, false, __ATOMIC_ACQ_REL,
                                          __ATOMIC_ACQUIRE);
    }
}
