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
 *
 * Wine: each thread has a "kernel stack" (the Unix side of its system
 * calls) in user address space, a private read-write allocation placed
 * right above its stack, holding stale system-call arguments (such as the
 * page addresses the guard heap protects). hk_os_wine_kernel_stack names
 * those allocations (for the stopped threads and the caller) so that
 * hk_os_writable_ranges leaves them out, as Windows keeps kernel stacks
 * out of reach: measured, a leak scan found a dead block "reachable"
 * through one in 1 of 12 runs.
 */
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN 1
#endif
#include "internal.h"

#include <windows.h>

#include <tlhelp32.h>

static hk_os_thread_state world_states[HK_OS_WORLD_MAX];
static uintptr_t world_tops[HK_OS_WORLD_MAX]; /* the end of each stopped thread's stack allocation */
static int world_ntops;                       /* set during a stop only */
static HANDLE world_handles[HK_OS_WORLD_MAX];
static int world_lock;

/* The end of the allocation holding sp (its regions walked), or 0. */
static uintptr_t world_alloc_end(uintptr_t sp) {
    MEMORY_BASIC_INFORMATION mi;
    if (VirtualQuery((const void *)sp, &mi, sizeof mi) != sizeof mi || mi.State == MEM_FREE) return 0;
    void *base = mi.AllocationBase;
    uintptr_t at = (uintptr_t)mi.BaseAddress;
    for (int k = 0; k < 4096; k++) {
        if (VirtualQuery((const void *)at, &mi, sizeof mi) != sizeof mi || mi.AllocationBase != base ||
            mi.State == MEM_FREE)
            return at;
        at = (uintptr_t)mi.BaseAddress + mi.RegionSize;
    }
    return 0;
}

static int world_is_wine(void) {
    static int wine = -1;
    if (wine < 0) {
        HMODULE nt = GetModuleHandleA("ntdll.dll");
        wine = nt && GetProcAddress(nt, "wine_get_version") ? 1 : 0;
    }
    return wine;
}

uintptr_t hk_os_wine_caller_top(void) {
    int here = 0;
    return world_is_wine() ? world_alloc_end((uintptr_t)&here) : 0;
}

bool hk_os_wine_kernel_stack(const void *alloc_base, uintptr_t caller_top) {
    if (!world_is_wine() || !alloc_base) return false;
    uintptr_t b = (uintptr_t)alloc_base;
    if (b == caller_top) return true; /* the caller's own */
    int n = __atomic_load_n(&world_ntops, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (world_tops[i] == b) return true;
    return false;
}

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
    (void)world_is_wine(); /* asked now, not while the threads are stopped */
    for (int i = 0; i < n; i++) world_tops[i] = world_alloc_end(world_states[i].sp);
    __atomic_store_n(&world_ntops, n, __ATOMIC_RELEASE);
    fn(world_states, n, user);
    __atomic_store_n(&world_ntops, 0, __ATOMIC_RELEASE);
    for (int i = 0; i < n; i++) {
        ResumeThread(world_handles[i]);
        CloseHandle(world_handles[i]);
    }
    CloseHandle(snap);
    __atomic_store_n(&world_lock, 0, __ATOMIC_RELEASE);
    return n;
}
