/*
 * src/os_win32_world.c - stopping the other threads on Windows
 * (hk_os_stop_world, see src/os.h): each other thread of the process is
 * suspended (SuspendThread), its registers read (GetThreadContext), fn is
 * called with their states, and every thread is resumed.
 *
 * Invariants: one stop at a time (a spin lock, like the POSIX host's); no
 * allocation by heapkit's own allocators (the thread list comes from a
 * Toolhelp snapshot, which the system allocates); every thread suspended
 * here is resumed before return, whatever fn does. A thread is counted only
 * once its context was read; a thread that exits or refuses to be opened
 * is left out and keeps running. Windows has no handler frame: handler_sp
 * is the thread's stack pointer and the registers are all known.
 */
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include "os.h"

#include <windows.h>
#include <string.h>
#include <tlhelp32.h>

static volatile LONG world_lock; /* one stop at a time */
static hk_os_thread_state world_out[HK_OS_WORLD_MAX];
static HANDLE world_handles[HK_OS_WORLD_MAX];

int hk_os_stop_world(hk_os_world_fn fn, void *user) {
    if (!fn) return -1;
    while (InterlockedExchange(&world_lock, 1)) SwitchToThread();
    HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
    if (snap == INVALID_HANDLE_VALUE) {
        InterlockedExchange(&world_lock, 0);
        return -1;
    }
    DWORD pid = GetCurrentProcessId(), me = GetCurrentThreadId();
    int n = 0;
    THREADENTRY32 te;
    te.dwSize = sizeof te;
    for (BOOL ok = Thread32First(snap, &te); ok && n < HK_OS_WORLD_MAX; ok = Thread32Next(snap, &te)) {
        if (te.th32OwnerProcessID != pid || te.th32ThreadID == me) continue;
        HANDLE h = OpenThread(THREAD_SUSPEND_RESUME | THREAD_GET_CONTEXT | THREAD_QUERY_INFORMATION, FALSE,
                              te.th32ThreadID);
        if (!h) continue;
        if (SuspendThread(h) == (DWORD)-1) {
            CloseHandle(h);
            continue;
        }
        /* GetThreadContext waits until the thread is really stopped */
        CONTEXT ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.ContextFlags = CONTEXT_INTEGER | CONTEXT_CONTROL;
        if (!GetThreadContext(h, &ctx)) {
            ResumeThread(h);
            CloseHandle(h);
            continue;
        }
        hk_os_thread_state *s = &world_out[n];
        memset(s, 0, sizeof *s);
        s->tid = (long)te.th32ThreadID;
#if defined(_M_X64) || defined(__x86_64__)
        s->sp = (uintptr_t)ctx.Rsp;
        const DWORD64 regs[] = {ctx.Rax, ctx.Rbx, ctx.Rcx, ctx.Rdx, ctx.Rsi, ctx.Rdi, ctx.Rbp, ctx.R8,
                                ctx.R9,  ctx.R10, ctx.R11, ctx.R12, ctx.R13, ctx.R14, ctx.R15, ctx.Rip};
#elif defined(_M_IX86) || defined(__i386__)
        s->sp = (uintptr_t)ctx.Esp;
        const DWORD regs[] = {ctx.Eax, ctx.Ebx, ctx.Ecx, ctx.Edx, ctx.Esi, ctx.Edi, ctx.Ebp, ctx.Eip};
#elif defined(_M_ARM64) || defined(__aarch64__)
        s->sp = (uintptr_t)ctx.Sp;
        const DWORD64 regs[] = {ctx.X[0],  ctx.X[1],  ctx.X[2],  ctx.X[3], ctx.X[4],  ctx.X[5],
                                ctx.X[6],  ctx.X[7],  ctx.X[8],  ctx.X[9], ctx.X[10], ctx.X[11],
                                ctx.X[12], ctx.X[13], ctx.X[14], ctx.Fp};
#endif
        s->handler_sp = s->sp;
        for (size_t i = 0; i < sizeof regs / sizeof regs[0] && i < HK_OS_THREAD_NREGS; i++)
            s->regs[s->nregs++] = (uintptr_t)regs[i];
        world_handles[n++] = h;
    }
    CloseHandle(snap);
    fn(world_out, n, user);
    for (int i = 0; i < n; i++) {
        ResumeThread(world_handles[i]);
        CloseHandle(world_handles[i]);
    }
    InterlockedExchange(&world_lock, 0);
    return n;
}
