/*
 * src/os_win32_world.c - stopping every other thread of the process for a
 * moment (hk_os_stop_world in src/os.h) on Windows, so that a leak scan
 * can read each thread's live stack, from its stack pointer up, and its
 * registers: the counterpart of os_posix_world.c.
 *
 * How: the process's threads are listed with a Toolhelp snapshot (taken
 * before any thread is stopped: it allocates); each other thread is opened,
 * suspended (SuspendThread) and its registers read (GetThreadContext,
 * which returns once the suspension has taken effect); fn runs with their
 * states; then every stopped thread is resumed and its handle closed.
 *
 * Invariants: one stop at a time (a spin lock); between the first
 * suspension and the last resumption nothing here allocates; a thread that
 * cannot be opened, suspended or read is left out and keeps running; every
 * suspended thread is resumed exactly once. The states live in a static
 * table, valid during fn only. There is no signal frame on Windows: a
 * state's handler_sp is its sp, and its registers are all known.
 */
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN 1
#endif
#include "internal.h"

#include <windows.h>

#include <tlhelp32.h>

static hk_os_thread_state world_states[HK_OS_WORLD_MAX];
static HANDLE world_handles[HK_OS_WORLD_MAX];
static int world_lock;

/* Suspends thread tid and records its state in slot n; false when it
 * cannot (left out, running). */
static bool world_stop_one(DWORD tid, int n) {
    HANDLE h = OpenThread(THREAD_SUSPEND_RESUME | THREAD_GET_CONTEXT | THREAD_QUERY_INFORMATION, FALSE, tid);
    if (!h) return false;
    if (SuspendThread(h) == (DWORD)-1) {
        CloseHandle(h);
        return false;
    }
    CONTEXT ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.ContextFlags = CONTEXT_INTEGER | CONTEXT_CONTROL;
    if (!GetThreadContext(h, &ctx)) {
        ResumeThread(h);
        CloseHandle(h);
        return false;
    }
    hk_os_thread_state *s = &world_states[n];
    memset(s, 0, sizeof *s);
    s->tid = (long)tid;
    s->sp = (uintptr_t)ctx.Rsp;
    s->handler_sp = (uintptr_t)ctx.Rsp;
    const DWORD64 regs[HK_OS_THREAD_NREGS] = {ctx.Rax, ctx.Rbx, ctx.Rcx, ctx.Rdx, ctx.Rsi, ctx.Rdi,
                                              ctx.Rbp, ctx.R8,  ctx.R9,  ctx.R10, ctx.R11, ctx.R12,
                                              ctx.R13, ctx.R14, ctx.R15, ctx.Rip};
    for (int i = 0; i < HK_OS_THREAD_NREGS; i++) s->regs[i] = (uintptr_t)regs[i];
    s->nregs = HK_OS_THREAD_NREGS;
    s->stack_lo = hk_os_stack_alloc_lo(s->sp);
    world_handles[n] = h;
    return true;
}

int hk_os_stop_world(hk_os_world_fn fn, void *user) {
    if (!fn) return -1;
    while (__atomic_exchange_n(&world_lock, 1, __ATOMIC_ACQUIRE)) SwitchToThread();
    DWORD me = GetCurrentThreadId(), pid = GetCurrentProcessId();
    HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
    if (snap == INVALID_HANDLE_VALUE) {
        __atomic_store_n(&world_lock, 0, __ATOMIC_RELEASE);
        return -1;
    }
    int n = 0;
    THREADENTRY32 te;
    memset(&te, 0, sizeof te);
    te.dwSize = sizeof te;
    for (BOOL ok = Thread32First(snap, &te); ok && n < HK_OS_WORLD_MAX; ok = Thread32Next(snap, &te)) {
        if (te.th32OwnerProcessID != pid || te.th32ThreadID == me) continue;
        if (world_stop_one(te.th32ThreadID, n)) n++;
        te.dwSize = sizeof te;
    }
    fn(world_states, n, user);
    for (int i = 0; i < n; i++) {
        ResumeThread(world_handles[i]);
        CloseHandle(world_handles[i]);
    }
    CloseHandle(snap);
    __atomic_store_n(&world_lock, 0, __ATOMIC_RELEASE);
    return n;
}
