/*
 * src/os_posix_fault.c - the process-wide SIGSEGV/SIGBUS handler and the
 * callbacks it runs (hk_os_fault_register in src/os.h), and protected
 * calls that survive a fault.
 *
 * Invariants: the handler is installed at most once per process; it calls
 * no malloc and names no allocator: it describes the fault (address, pc,
 * access type, registers, the stack from the faulting frame on) and hands
 * that to each registered callback in turn; when all return it restores
 * the default action, so the fault repeats and dumps core. A fault inside
 * hk_os_protected_call on the same thread jumps back instead.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "internal.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define FAULT_MAX_FNS 8

typedef struct fault_cb {
    hk_os_fault_fn fn;
    void *user;
} fault_cb;

static fault_cb fault_cbs[FAULT_MAX_FNS];
static int fault_ncbs;
static int fault_installed; /* 0 no, 1 installing or installed */
static int fault_install_rc;
static volatile sig_atomic_t fault_scan_tid;
static sigjmp_buf fault_scan_jmp;

static long fault_tid(void) { return (long)syscall(SYS_gettid); }

static void fault_handler(int sig, siginfo_t *si, void *ucv) {
    int saved_errno = errno;
    if (fault_scan_tid != 0 && fault_scan_tid == (sig_atomic_t)fault_tid()) siglongjmp(fault_scan_jmp, 1);
    static hk_os_fault f; /* one fault at a time: a report aborts */
    memset(&f, 0, sizeof f);
    f.addr = si->si_addr;
    f.signo = sig;
    f.signame = sig == SIGBUS ? "SIGBUS" : "SIGSEGV";
    f.code = si->si_code;
#if defined(__x86_64__) && defined(__linux__)
    {
        ucontext_t *uc = (ucontext_t *)ucv;
        greg_t *gr = uc->uc_mcontext.gregs;
        f.pc = (void *)(uintptr_t)gr[REG_RIP];
        /* Page faults (trap 14) carry the access type in bit 1 of the error code. */
        if (gr[REG_TRAPNO] == 14) f.access = (gr[REG_ERR] & 2) ? HK_OS_ACCESS_WRITE : HK_OS_ACCESS_READ;
        static const int idx[HK_OS_FAULT_NREGS] = {REG_RAX, REG_RBX, REG_RCX, REG_RDX, REG_RSI, REG_RDI,
                                                   REG_RBP, REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12,
                                                   REG_R13, REG_R14, REG_R15, REG_RSP};
        static const char *const names[HK_OS_FAULT_NREGS] = {"rax", "rbx", "rcx", "rdx", "rsi", "rdi",
                                                             "rbp", "r8",  "r9",  "r10", "r11", "r12",
                                                             "r13", "r14", "r15", "rsp"};
        for (int i = 0; i < HK_OS_FAULT_NREGS; i++) {
            f.regs[i] = (uintptr_t)gr[idx[i]];
            f.regnames[i] = names[i];
        }
        f.nregs = HK_OS_FAULT_NREGS;
    }
#else
    (void)ucv;
#endif
    /* The stack through the signal frame, exactly; start at the faulting frame. */
    static void *tmp[HK_OS_FAULT_FRAMES];
    int n = hk_os_stack_capture(tmp, HK_OS_FAULT_FRAMES, 0, HK_OS_STACK_EXACT);
    int first = -1;
    for (int i = 0; i < n; i++)
        if (f.pc && tmp[i] == f.pc) {
            first = i;
            break;
        }
    if (first < 0) {
        if (f.pc) f.frames[f.nframes++] = f.pc;
        first = n; /* the handler's own frames are of no interest */
    }
    for (int i = first; i < n && f.nframes < HK_OS_FAULT_FRAMES; i++) f.frames[f.nframes++] = tmp[i];

    int ncb = __atomic_load_n(&fault_ncbs, __ATOMIC_ACQUIRE);
    for (int i = 0; i < ncb; i++)
        if (fault_cbs[i].fn) fault_cbs[i].fn(&f, fault_cbs[i].user); /* returns when not its fault */

    /* Nobody's: let the default action happen (a core dump at the fault). */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(sig, &sa, NULL);
    errno = saved_errno;
}

static int fault_install(void) {
    size_t alt = 64 * 1024;
    void *stack = hk_os_alloc(alt);
    if (stack) {
        stack_t ss;
        memset(&ss, 0, sizeof ss);
        ss.ss_sp = stack;
        ss.ss_size = alt;
        sigaltstack(&ss, NULL);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fault_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0) return -1;
    if (sigaction(SIGBUS, &sa, NULL) != 0) return -1;
    return 0;
}

hk_result hk_os_fault_register(hk_os_fault_fn fn, void *user) {
    static int lock;
    if (!fn) return HK_ERR_INVALID;
    while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE)) {
    }
    hk_result r = HK_OK;
    int n = fault_ncbs, have = 0;
    for (int i = 0; i < n; i++)
        if (fault_cbs[i].fn == fn && fault_cbs[i].user == user) have = 1;
    if (!have) {
        if (n >= FAULT_MAX_FNS) {
            r = HK_ERR_NOMEM;
        } else {
            fault_cbs[n].fn = fn;
            fault_cbs[n].user = user;
            __atomic_store_n(&fault_ncbs, n + 1, __ATOMIC_RELEASE);
        }
    }
    if (r == HK_OK && !fault_installed) {
        fault_installed = 1;
        fault_install_rc = fault_install();
    }
    if (r == HK_OK && fault_install_rc != 0) r = HK_ERR_UNSUPPORTED;
    __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
    return r;
}

int hk_os_protected_call(void (*fn)(void *arg), void *arg) {
    int rc = 0;
    if (sigsetjmp(fault_scan_jmp, 1) == 0) {
        fault_scan_tid = (sig_atomic_t)fault_tid();
        fn(arg);
    } else {
        rc = -1;
    }
    fault_scan_tid = 0;
    return rc;
}
