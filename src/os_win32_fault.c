/*
 * src/os_win32_fault.c - the process-wide vectored exception handler and
 * the callbacks it runs (hk_os_fault_register in src/os.h), protected
 * calls that survive a fault, and hk_os_abort (which ends a callback's
 * fault report): the Windows counterpart of os_posix_fault.c.
 *
 * Invariants: the handler is added at most once per process, first in the
 * vectored list; it takes only access violations and in-page errors, calls
 * no malloc and names no allocator: it describes the fault (address, pc,
 * read or write, access size, registers, the stack from the faulting frame
 * on) and hands that to each registered callback in turn. A callback that
 * ends with hk_os_abort comes back here (a __builtin_longjmp within this
 * handler's own frames, no system frame crossed); either way the handler
 * then returns EXCEPTION_CONTINUE_SEARCH, so a debugger, the program's
 * handlers or the crash reporter see the exception exactly as without
 * heapkit. A reported fault that nobody handles reaches heapkit's
 * top-level filter, which hands it to the filter installed before it (a
 * crash reporter), if any, and otherwise ends the process with the
 * exception code at once (no error dialog, a fixed exit status); faults
 * heapkit did not report pass through untouched. A fault inside hk_os_protected_call on the same thread
 * resumes in a landing function that jumps back to the call (the exception is dismissed with
 * EXCEPTION_CONTINUE_EXECUTION). The handler never re-enters: a fault while one is being described ends the
 * process at once (same thread) or waits for that description to finish (another thread). The per-thread
 * escape points live in TLS slots (TlsAlloc), never in the C runtime's emulated thread-locals, which may
 * allocate.
 */
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN 1
#endif
#include "internal.h"

#include <windows.h>

#define FAULT_STACK_RESERVE (64u * 1024u) /* kept for the handler at a stack overflow */

static int fault_ready;   /* the handler is installed (fault_install succeeded) */
static DWORD fault_owner; /* the thread whose fault is being described, 0 when none */
/* the last fault a callback reported (ended with hk_os_abort): its
 * instruction and address, for the top-level filter */
static void *fault_reported_pc, *fault_reported_addr;
static LPTOP_LEVEL_EXCEPTION_FILTER fault_prev_filter;
/* TLS slots: this thread's protected call in progress and the callbacks'
 * escape point (each a __builtin_setjmp buffer), or NULL */
static DWORD fault_tls_protect = TLS_OUT_OF_INDEXES, fault_tls_abort = TLS_OUT_OF_INDEXES;

static void **fault_slot_get(DWORD slot) {
    return slot == TLS_OUT_OF_INDEXES ? NULL : (void **)TlsGetValue(slot);
}

/* Where a faulting protected call resumes: back into hk_os_protected_call. */
static HK__NOINLINE void fault_protect_land(void) {
    void **jb = fault_slot_get(fault_tls_protect);
    (void)TlsSetValue(fault_tls_protect, NULL);
    __builtin_longjmp(jb, 1);
}

void hk_os_fault_abort_escape(void) {
    void **jb = fault_slot_get(fault_tls_abort);
    if (jb) {
        (void)TlsSetValue(fault_tls_abort, NULL);
        __builtin_longjmp(jb, 1);
    }
}

void hk_os_abort(void) {
    hk_os_fault_abort_escape(); /* inside a fault callback: the exception goes on instead */
    if (IsDebuggerPresent()) DebugBreak();
    /* the C runtime's abort() status, without its SIGABRT handlers or message box */
    TerminateProcess(GetCurrentProcess(), 3);
    ExitProcess(3);
}

static void fault_describe(hk_os_fault *f, const EXCEPTION_RECORD *er, const CONTEXT *ctx) {
    memset(f, 0, sizeof *f);
    f->signo = (int)er->ExceptionCode;
    f->signame = er->ExceptionCode == EXCEPTION_IN_PAGE_ERROR ? "in-page error" : "access violation";
    f->code = er->NumberParameters >= 1 ? (int)er->ExceptionInformation[0] : 0;
    f->pc = er->ExceptionAddress;
    if (er->NumberParameters >= 2) {
        f->addr = (void *)(uintptr_t)er->ExceptionInformation[1];
        ULONG_PTR kind = er->ExceptionInformation[0]; /* 0 read, 1 write, 8 execute (DEP) */
        f->access = kind == 1 ? HK_OS_ACCESS_WRITE : kind == 0 ? HK_OS_ACCESS_READ : HK_OS_ACCESS_UNKNOWN;
    }
    if (f->pc && hk_os_readable(f->pc, 16))
        f->access_size = hk_os_x86_access_size((const unsigned char *)f->pc);
    const DWORD64 regs[HK_OS_FAULT_NREGS] = {ctx->Rax, ctx->Rbx, ctx->Rcx, ctx->Rdx, ctx->Rsi, ctx->Rdi,
                                             ctx->Rbp, ctx->R8,  ctx->R9,  ctx->R10, ctx->R11, ctx->R12,
                                             ctx->R13, ctx->R14, ctx->R15, ctx->Rsp};
    static const char *const names[HK_OS_FAULT_NREGS] = {"rax", "rbx", "rcx", "rdx", "rsi", "rdi",
                                                         "rbp", "r8",  "r9",  "r10", "r11", "r12",
                                                         "r13", "r14", "r15", "rsp"};
    for (int i = 0; i < HK_OS_FAULT_NREGS; i++) {
        f->regs[i] = (uintptr_t)regs[i];
        f->regnames[i] = names[i];
    }
    f->nregs = HK_OS_FAULT_NREGS;
    /* the stack from the faulting frame on, through the unwind tables; a
     * wild pc (no unwind data, unreadable): the pc, then the rbp chain */
    f->nframes = hk_os_stack_from_context(ctx, f->frames, HK_OS_FAULT_FRAMES);
    if (f->nframes <= 1 && !hk_os_readable(f->pc, 1)) {
        f->nframes = 0;
        if (f->pc) f->frames[f->nframes++] = f->pc;
        f->nframes += hk_os_fp_walk((uintptr_t)ctx->Rbp, (uintptr_t)ctx->Rsp, f->frames + f->nframes,
                                    HK_OS_FAULT_FRAMES - 1, hk_os_readable);
    }
}

/* Runs the callbacks; one may end them with hk_os_abort (the escape).
 * Returns true when one did (the fault was reported). */
static HK__NOINLINE bool fault_run_callbacks(const hk_os_fault *f) {
    void *jb[5];
    volatile bool aborted = true;
    if (__builtin_setjmp(jb) == 0) {
        (void)TlsSetValue(fault_tls_abort, jb);
        hk_os_fault_cb_run(f);
        aborted = false;
    }
    (void)TlsSetValue(fault_tls_abort, NULL);
    return aborted;
}

/* The top-level filter: a fault heapkit reported and nobody handled goes
 * to the filter installed before this one, else ends the process now. */
static LONG WINAPI fault_top_filter(EXCEPTION_POINTERS *ep) {
    if (fault_prev_filter) {
        LONG r = fault_prev_filter(ep);
        if (r != EXCEPTION_CONTINUE_SEARCH) return r;
    }
    const EXCEPTION_RECORD *er = ep->ExceptionRecord;
    if ((er->ExceptionCode == EXCEPTION_ACCESS_VIOLATION || er->ExceptionCode == EXCEPTION_IN_PAGE_ERROR) &&
        er->NumberParameters >= 2 &&
        er->ExceptionAddress == __atomic_load_n(&fault_reported_pc, __ATOMIC_ACQUIRE) &&
        (void *)er->ExceptionInformation[1] == __atomic_load_n(&fault_reported_addr, __ATOMIC_ACQUIRE))
        TerminateProcess(GetCurrentProcess(), (UINT)er->ExceptionCode);
    return EXCEPTION_CONTINUE_SEARCH;
}

static LONG CALLBACK fault_handler(EXCEPTION_POINTERS *ep) {
    const EXCEPTION_RECORD *er = ep->ExceptionRecord;
    if (er->ExceptionCode != EXCEPTION_ACCESS_VIOLATION && er->ExceptionCode != EXCEPTION_IN_PAGE_ERROR)
        return EXCEPTION_CONTINUE_SEARCH;
    DWORD saved_error = GetLastError();
    CONTEXT *ctx = ep->ContextRecord;
    if (fault_slot_get(fault_tls_protect)) {
        /* resume in the landing function on a fresh call frame below the
         * faulting one (16-byte aligned minus the return address slot) */
        DWORD64 sp = ((ctx->Rsp - 512u) & ~(DWORD64)15) - 8u;
        ctx->Rsp = sp;
        ctx->Rip = (DWORD64)(uintptr_t)fault_protect_land;
        SetLastError(saved_error);
        return EXCEPTION_CONTINUE_EXECUTION;
    }
    DWORD me = GetCurrentThreadId(), expect = 0;
    while (
        !__atomic_compare_exchange_n(&fault_owner, &expect, me, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        if (expect == me) {
            /* a fault while describing a fault: no second report, no recursion */
            static const char msg[] = "heapkit: fault inside the fault handler; giving up\n";
            hk_os_write(2, msg, sizeof msg - 1);
            TerminateProcess(GetCurrentProcess(), (UINT)er->ExceptionCode);
        }
        Sleep(1); /* another thread is describing its fault */
        expect = 0;
    }
    static hk_os_fault f; /* one fault at a time (fault_owner) */
    fault_describe(&f, er, ctx);
    if (fault_run_callbacks(&f)) {
        __atomic_store_n(&fault_reported_addr, f.addr, __ATOMIC_RELEASE);
        __atomic_store_n(&fault_reported_pc, f.pc, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&fault_owner, 0, __ATOMIC_RELEASE);
    SetLastError(saved_error);
    return EXCEPTION_CONTINUE_SEARCH; /* on to the debugger, the program's handlers, the crash reporter */
}

void hk_os_fault_thread_init(void) {
    static _Thread_local int done;
    if (done) return;
    done = 1;
    ULONG want = FAULT_STACK_RESERVE;
    (void)SetThreadStackGuarantee(&want);
}

static BOOL CALLBACK fault_tls_init(PINIT_ONCE once, void *param, void **ctx) {
    (void)once;
    (void)param;
    (void)ctx;
    fault_tls_protect = TlsAlloc();
    fault_tls_abort = TlsAlloc();
    return TRUE;
}

static int fault_install(void) {
    static INIT_ONCE once = INIT_ONCE_STATIC_INIT;
    (void)InitOnceExecuteOnce(&once, fault_tls_init, NULL, NULL);
    if (fault_tls_protect == TLS_OUT_OF_INDEXES || fault_tls_abort == TLS_OUT_OF_INDEXES) return -1;
    hk_os_fault_thread_init();
    if (!AddVectoredExceptionHandler(1, fault_handler)) return -1;
    fault_prev_filter = SetUnhandledExceptionFilter(fault_top_filter);
    __atomic_store_n(&fault_ready, 1, __ATOMIC_RELEASE);
    return 0;
}

hk_result hk_os_fault_register(hk_os_fault_fn fn, void *user) {
    return hk_os_fault_cb_add(fn, user, fault_install);
}

static HK__NOINLINE int fault_protected_run(void (*fn)(void *arg), void *arg) {
    void *jb[5];
    void **volatile outer = fault_slot_get(fault_tls_protect);
    volatile int rc = 0;
    if (__builtin_setjmp(jb) == 0) {
        (void)TlsSetValue(fault_tls_protect, jb);
        fn(arg);
    } else {
        rc = -1;
    }
    (void)TlsSetValue(fault_tls_protect, outer);
    return rc;
}

int hk_os_protected_call(void (*fn)(void *arg), void *arg) {
    if (!__atomic_load_n(&fault_ready, __ATOMIC_ACQUIRE) || fault_tls_protect == TLS_OUT_OF_INDEXES) {
        fn(arg); /* no handler yet: nothing to protect with (as on POSIX) */
        return 0;
    }
    return fault_protected_run(fn, arg);
}
