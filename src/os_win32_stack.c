/*
 * src/os_win32_stack.c - stack capture on Windows (hk_os_stack_capture in
 * src/os.h): RtlCaptureStackBackTrace for the calling thread, and an
 * RtlVirtualUnwind walk from a saved CONTEXT for the fault handler.
 *
 * Invariants: both walk the x64 unwind tables (.pdata/.xdata, which
 * MinGW-w64 and MSVC emit for every function), so they are exact
 * (HK_OS_STACK_EXACT changes nothing) and need no learning; neither calls
 * malloc. The CONTEXT walk reads only the thread's own stack (between its
 * limits), so a smashed stack ends it early instead of faulting; a frame
 * without unwind data is a leaf whose return address is at rsp.
 */
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN 1
#endif
#include "internal.h"

#include <windows.h>

void hk_os_stack_init(void) {
    void *frames[2];
    (void)RtlCaptureStackBackTrace(0, 2, frames, NULL); /* whatever the first call loads, now */
}

void hk_os_stack_fault_escape(void) {
    /* the unwinders used here stop at the stack's limits: nothing to escape */
}

HK__NOINLINE int hk_os_stack_capture(void **frames, int max, int skip, unsigned flags) {
    (void)flags;
    if (max <= 0 || !frames) return 0;
    if (skip < 0) skip = 0;
    /* frame 0 of RtlCaptureStackBackTrace is its return address into this
     * function: skip it, so the first frame kept is our return address into
     * the caller ("a pc in the caller", what os.h promises first) */
    int got = 0;
    while (got < max) {
        int want = max - got > 62 ? 62 : max - got; /* older systems cap a call at 62 frames */
        USHORT n = RtlCaptureStackBackTrace((DWORD)(1 + skip + got), (DWORD)want, frames + got, NULL);
        int k = 0;
        while (k < n && frames[got + k]) k++; /* past the thread's start: no frame */
        got += k;
        if (k < want) break;
    }
    __asm__ volatile("" ::: "memory"); /* no tail call: the skip counts this frame */
    return got;
}

int hk_os_stack_from_context(const void *context, void **frames, int max) {
    if (!context || !frames || max <= 0) return 0;
    CONTEXT c;
    memcpy(&c, context, sizeof c);
    ULONG_PTR lo = 0, hi = 0;
    GetCurrentThreadStackLimits(&lo, &hi);
    int n = 0;
    while (n < max && c.Rip >= 4096) {
        frames[n++] = (void *)(uintptr_t)c.Rip;
        DWORD64 image = 0;
        PRUNTIME_FUNCTION fe = RtlLookupFunctionEntry(c.Rip, &image, NULL);
        if (c.Rsp < lo || c.Rsp + 8 > hi || (c.Rsp & 7u)) break;
        if (!fe) { /* a leaf: the return address is at rsp */
            c.Rip = *(const DWORD64 *)(uintptr_t)c.Rsp;
            c.Rsp += 8;
        } else {
            void *handler_data = NULL;
            DWORD64 frame = 0;
            DWORD64 prev_sp = c.Rsp;
            (void)RtlVirtualUnwind(UNW_FLAG_NHANDLER, image, c.Rip, fe, &c, &handler_data, &frame, NULL);
            if (c.Rsp <= prev_sp) break; /* no progress: a damaged frame */
        }
        if (c.Rsp < lo || c.Rsp > hi) break;
    }
    return n;
}

uintptr_t hk_os_stack_alloc_lo(uintptr_t sp) {
    MEMORY_BASIC_INFORMATION mi;
    if (VirtualQuery((const void *)sp, &mi, sizeof mi) != sizeof mi || mi.State != MEM_COMMIT) return 0;
    return (uintptr_t)mi.AllocationBase;
}
