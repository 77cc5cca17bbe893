/*
 * src/os_posix_stack.c - stack capture, the one implementation in heapkit
 * (hk_os_stack_capture in src/os.h).
 *
 * glibc's backtrace() runs the DWARF unwinder: per frame a binary search for
 * the FDE and an interpretation of its CFI. But at a given return address
 * the distance between the caller's CFA and the callee's CFA (the caller's
 * frame size at that call) is a constant for any function without
 * alloca/VLAs. So we run the real unwinder (_Unwind_Backtrace, exact) the
 * first time a call path is seen, and learn, per return address, that
 * distance; later captures walk the stack with table lookups: return
 * address k+1 sits just below CFA k, CFA k+1 = CFA k + learned distance.
 *
 * Invariants: a table entry's distance is used only while the entry is
 * valid, not DYNAMIC (a distance seen to vary, or a jump between stacks)
 * and the CFA stays within the part of this thread's stack the exact
 * unwinder has walked (stack_hi); anything else falls back to the exact
 * unwinder, which learns. The table is process-wide, lock-free and
 * fixed-size (full: no more learning, unknown sites unwind exactly).
 * Nothing here calls malloc once hk_os_stack_init ran.
 *
 * A smashed stack (a program that overran a local array) can hold saved
 * registers that send the exact unwinder to unmapped memory: the exact
 * unwind runs with an escape point set for this thread, and the fault
 * handler (os_posix_fault.c, when installed) jumps back to it through
 * hk_os_stack_fault_escape, so the capture ends with the frames it had
 * instead of faulting inside malloc. The fast walk reads only words
 * between the caller's frame and the highest CFA the exact unwinder has
 * seen on this thread (the thread's own stack).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "internal.h"

#include <execinfo.h>
#include <setjmp.h>

/* The escape point of the exact unwind in progress on this thread, or NULL. */
static _Thread_local sigjmp_buf *os_stack_escape __attribute__((tls_model("initial-exec")));

void hk_os_stack_fault_escape(void) {
    sigjmp_buf *j = os_stack_escape;
    if (j) {
        os_stack_escape = NULL;
        siglongjmp(*j, 1);
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* _Unwind_Backtrace is linked (libgcc_s.so.1 loaded with the program, or
 * libgcc_eh linked in with -static-libgcc, as the guard preload is): its
 * first call allocates nothing, so there is nothing to prepare. */
void hk_os_stack_init(void) {}

#include <unwind.h>
#define UW_SLOTS    8192u       /* power of two */
#define UW_TERMINAL 0x40000000u /* the unwinder found no caller beyond this frame */
#define UW_DYNAMIC  0x20000000u /* the distance varies: always unwind exactly */
#define UW_VALID    0x80000000u
#define UW_DIST     0x1fffffffu
typedef struct uw_entry {
    uintptr_t ip;
    uint32_t val; /* UW_VALID | flags | distance */
    uint32_t pad;
} uw_entry;
static _Alignas(4096) uw_entry uw_table[UW_SLOTS];
static _Thread_local uintptr_t uw_stack_hi __attribute__((tls_model("initial-exec")));

/* A return address's first home is in the group of its 64 KiB of code: the
 * return addresses of one stretch of code share a page of the table, so a
 * short run faults in a page of the table per stretch it calls from, not
 * one per return address. When the 16 slots probed there are all taken by
 * others (never undone: entries are not removed), the address goes to a
 * second home hashed over the whole table, where a lookup then finds it. */
#define UW_GROUP  256u /* slots per group: one 4 KiB page of entries */
#define UW_PROBES 16u
_Static_assert(UW_GROUP * sizeof(uw_entry) == 4096, "a group is a page");

static inline uint32_t uw_home(uintptr_t ip, int second) {
    uint64_t hi = (uint64_t)ip * 0x9E3779B97F4A7C15ull;
    if (second) return (uint32_t)(hi >> 40) & (UW_SLOTS - 1);
    uint64_t hp = (uint64_t)(ip >> 16) * 0xC2B2AE3D27D4EB4Full;
    return ((uint32_t)(hp >> 40) & (UW_SLOTS - UW_GROUP)) | ((uint32_t)(hi >> 40) & (UW_GROUP - 1));
}

/* the next slot to probe: within the group for the first home */
static inline uint32_t uw_next(uint32_t i, int second) {
    if (second) return (i + 1) & (UW_SLOTS - 1);
    return (i & ~(UW_GROUP - 1)) | ((i + 1) & (UW_GROUP - 1));
}

static uint32_t uw_lookup(uintptr_t ip) {
    for (int second = 0; second < 2; second++) {
        uint32_t i = uw_home(ip, second);
        for (uint32_t k = 0; k < UW_PROBES; k++, i = uw_next(i, second)) {
            uintptr_t e = __atomic_load_n(&uw_table[i].ip, __ATOMIC_ACQUIRE);
            if (e == ip) return __atomic_load_n(&uw_table[i].val, __ATOMIC_ACQUIRE);
            if (e == 0) return 0;
        }
    }
    return 0;
}

static void uw_learn(uintptr_t ip, uint32_t dist, uint32_t flags) {
    if (ip == 0) return;
    uint32_t v = UW_VALID | flags | (dist > UW_DIST ? UW_DIST : dist);
    if (dist > UW_DIST) v |= UW_DYNAMIC;
    for (int second = 0; second < 2; second++) {
        uint32_t i = uw_home(ip, second);
        for (uint32_t k = 0; k < UW_PROBES; k++, i = uw_next(i, second)) {
            uintptr_t e = __atomic_load_n(&uw_table[i].ip, __ATOMIC_ACQUIRE);
            if (e == 0) {
                uintptr_t zero = 0;
                if (__atomic_compare_exchange_n(&uw_table[i].ip, &zero, ip, false, __ATOMIC_ACQ_REL,
                                                __ATOMIC_ACQUIRE)) {
                    __atomic_store_n(&uw_table[i].val, v, __ATOMIC_RELEASE);
                    return;
                }
                e = zero;
            }
            if (e != ip) continue;
            uint32_t old = __atomic_load_n(&uw_table[i].val, __ATOMIC_ACQUIRE);
            if (old == 0) return; /* another thread is storing it */
            uint32_t nv = old;
            if ((flags & UW_TERMINAL) != (old & UW_TERMINAL))
                nv |= UW_DYNAMIC; /* outermost or not? */
            else if (!(flags & UW_TERMINAL) && ((old & UW_DIST) != (v & UW_DIST) || (v & UW_DYNAMIC)))
                nv |= UW_DYNAMIC; /* the frame size varies (alloca, signal frame) */
            if (nv != old) __atomic_store_n(&uw_table[i].val, nv, __ATOMIC_RELEASE);
            return;
        }
    }
}

typedef struct uw_state {
    void **out;
    int max, skip, n, idx, stopped;
    uintptr_t prev_ip, prev_sp, hi;
} uw_state;

/* Callback k gets (ip_k, sp_k): a pc in frame k and that frame's stack
 * pointer there (the CFA of frame k-1). Frame 0 is uw_exact, frame 1
 * hk_os_stack_capture, frame 2 its caller. The distance learned for ip_k is
 * sp_{k+1} - sp_k; the return address ip_{k+1} sits at sp_{k+1} - 8. */
static _Unwind_Reason_Code uw_cb(struct _Unwind_Context *ctx, void *arg) {
    uw_state *st = (uw_state *)arg;
    uintptr_t ip = (uintptr_t)_Unwind_GetIP(ctx);
    uintptr_t sp = (uintptr_t)_Unwind_GetCFA(ctx);
    int idx = st->idx++;
    if (ip == 0) return _URC_END_OF_STACK;
    if (idx > 0) {
        if (sp > st->prev_sp && sp - st->prev_sp <= UW_DIST)
            uw_learn(st->prev_ip, (uint32_t)(sp - st->prev_sp), 0);
        else
            uw_learn(st->prev_ip, UW_DIST + 1u, 0); /* a jump between stacks: never walk fast through it */
    }
    st->prev_ip = ip;
    st->prev_sp = sp;
    if (sp > st->hi) st->hi = sp;
    if (idx - 2 >= st->skip && st->n < st->max) st->out[st->n++] = (void *)ip;
    /* learn a few frames past what we keep, so deeper captures of the same path hit */
    if (idx - 2 >= st->skip + st->max + 8) {
        st->stopped = 1;
        return _URC_END_OF_STACK;
    }
    return _URC_NO_REASON;
}

static HK__NOINLINE int uw_exact(void **frames, int max, int skip) {
    uw_state st; /* in memory (its address escapes): read back after an escape */
    memset(&st, 0, sizeof st);
    st.out = frames;
    st.max = max;
    st.skip = skip;
    sigjmp_buf jb;
    sigjmp_buf *outer = os_stack_escape;
    if (sigsetjmp(jb, 1) == 0) { /* the mask too: a sanitizer's handler wrapper may block signals */
        os_stack_escape = &jb;
        (void)_Unwind_Backtrace(uw_cb, &st);
        os_stack_escape = outer;
    } else {
        /* the unwinder faulted on a damaged frame: keep what we have, learn
         * nothing about the last frame (its distance is not known) */
        os_stack_escape = outer;
        __asm__ volatile("" ::: "memory");
        return st.n;
    }
    if (!st.stopped && st.prev_ip) uw_learn(st.prev_ip, 0, UW_TERMINAL); /* the outermost frame */
    if (st.hi > uw_stack_hi) uw_stack_hi = st.hi;
    return st.n;
}

__attribute__((no_sanitize_address)) HK__NOINLINE int hk_os_stack_capture(void **frames, int max, int skip,
                                                                          unsigned flags) {
    if (max <= 0 || !frames) return 0;
    if (skip < 0) skip = 0;
    uintptr_t hi = (flags & HK_OS_STACK_EXACT) ? 0 : uw_stack_hi;
    /* __builtin_frame_address keeps this a classic rbp frame: our CFA is
     * rbp + 16, the caller's stack pointer after we return */
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0) + 16;
    int n = 0, idx = 0;
    while (hi && sp <= hi) {
        uintptr_t ip = *(const uintptr_t *)(sp - 8);
        uint32_t v = uw_lookup(ip);
        if (!v || (v & UW_DYNAMIC)) break;
        if (idx >= skip) frames[n++] = (void *)ip;
        idx++;
        if (n >= max || (v & UW_TERMINAL)) return n;
        sp += v & UW_DIST;
        if ((v & UW_DIST) == 0) break;
    }
    n = uw_exact(frames, max, skip);
    __asm__ volatile("" ::: "memory"); /* no tail call: uw_exact counts on our frame */
    return n;
}

#else
void hk_os_stack_init(void) {
    void *frames[2];
    (void)backtrace(frames, 2); /* loads libgcc_s now, while malloc may be called */
}

/* Elsewhere: backtrace() of the caller, its own frame and `skip` more dropped. */
static HK__NOINLINE int os_backtrace_skip(void **frames, int max, int skip) {
    void *tmp[128];
    int want = max + skip + 1;
    if (want > (int)(sizeof tmp / sizeof tmp[0])) want = (int)(sizeof tmp / sizeof tmp[0]);
    int got = backtrace(tmp, want), n = 0;
    for (int i = skip + 1; i < got && n < max; i++) frames[n++] = tmp[i];
    return n;
}

HK__NOINLINE int hk_os_stack_capture(void **frames, int max, int skip, unsigned flags) {
    (void)flags;
    if (max <= 0 || !frames) return 0;
    if (skip < 0) skip = 0;
    int n = os_backtrace_skip(frames, max, skip + 1);
    __asm__ volatile("" ::: "memory"); /* no tail call: the skip counts this frame */
    return n;
}
#endif

uintptr_t hk_os_stack_alloc_lo(uintptr_t sp) {
    (void)sp;
    return 0; /* one mapping per stack: the leak scan cuts the one holding sp */
}
