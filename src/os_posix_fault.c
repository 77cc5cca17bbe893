/*
 * src/os_posix_fault.c - the process-wide SIGSEGV/SIGBUS handler and the
 * callbacks it runs (hk_os_fault_register in src/os.h), and protected
 * calls that survive a fault.
 *
 * Invariants: the handler is installed at most once per process; it calls
 * no malloc and names no allocator: it describes the fault (address, pc,
 * access type and size, registers, the stack from the faulting frame on)
 * and hands that to each registered callback in turn; when all return it
 * restores the default action, so the fault repeats and dumps core. A
 * fault inside hk_os_protected_call, or inside a stack capture (a damaged
 * stack), on the same thread jumps back instead. The handler never
 * re-enters: a fault while one is being described ends the process at
 * once (same thread) or waits for the first report to end it (another
 * thread). It runs on an alternate signal stack: the installing thread's,
 * and each thread's that calls hk_os_fault_thread_init.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "internal.h"

#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define FAULT_ALT_SIZE ((size_t)1 << 20) /* symbolizing (libdw) runs on it; pages are touched lazily */

static long fault_owner; /* the thread whose fault is being described, 0 when none */
/* this thread's protected call in progress (its escape point), or NULL */
static _Thread_local sigjmp_buf *fault_protect __attribute__((tls_model("initial-exec")));
static _Thread_local void *fault_alt __attribute__((tls_model("initial-exec")));

static long fault_tid(void) { return (long)syscall(SYS_gettid); }

static void fault_handler(int sig, siginfo_t *si, void *ucv) {
    int saved_errno = errno;
    sigjmp_buf *pj = fault_protect;
    if (pj) {
        /* the mask the thread had when it faulted (a sanitizer's handler
         * wrapper may block signals): the protected call did not save it,
         * so that it costs no system call when nothing faults */
        fault_protect = NULL;
        pthread_sigmask(SIG_SETMASK, &((ucontext_t *)ucv)->uc_sigmask, NULL);
        siglongjmp(*pj, 1);
    }
    hk_os_stack_fault_escape(); /* a stack capture faulting on a damaged stack: back to it */
    long me = fault_tid(), expect = 0;
    if (!__atomic_compare_exchange_n(&fault_owner, &expect, me, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        if (expect == me) {
            /* a fault while describing a fault: no second report, no
             * recursion; die of the signal at once */
            static const char msg[] = "heapkit: fault inside the fault handler; giving up\n";
            hk_os_write(2, msg, sizeof msg - 1);
            signal(sig, SIG_DFL);
            raise(sig);
            _exit(128 + sig);
        }
        /* another thread is reporting; it ends the process */
        for (;;) sched_yield();
    }
    static hk_os_fault f; /* one fault at a time: a report aborts */
    memset(&f, 0, sizeof f);
    f.addr = si->si_addr;
    f.signo = sig;
    f.signame = sig == SIGBUS ? "SIGBUS" : "SIGSEGV";
    f.code = si->si_code;
    uintptr_t fbp = 0, fsp = 0;
#if defined(__x86_64__) && defined(__linux__)
    {
        ucontext_t *uc = (ucontext_t *)ucv;
        greg_t *gr = uc->uc_mcontext.gregs;
        f.pc = (void *)(uintptr_t)gr[REG_RIP];
        fbp = (uintptr_t)gr[REG_RBP];
        fsp = (uintptr_t)gr[REG_RSP];
        /* Page faults (trap 14) carry the access type in bit 1 of the error code. */
        if (gr[REG_TRAPNO] == 14) f.access = (gr[REG_ERR] & 2) ? HK_OS_ACCESS_WRITE : HK_OS_ACCESS_READ;
        if (f.pc && hk_os_readable(f.pc, 16))
            f.access_size = hk_os_x86_access_size((const unsigned char *)f.pc);
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
    /* The stack through the signal frame, exactly (a damaged stack ends the
     * capture early instead of faulting); start at the faulting frame. */
    static void *tmp[HK_OS_FAULT_FRAMES];
    int n = hk_os_stack_capture(tmp, HK_OS_FAULT_FRAMES, 0, HK_OS_STACK_EXACT);
    int first = -1;
    for (int i = 0; i < n; i++)
        if (f.pc && tmp[i] == f.pc) {
            first = i;
            break;
        }
    if (first < 0) {
        /* the unwinder did not get through the faulting frame (a wild pc, a
         * smashed stack): the pc, then the frame-pointer chain */
        if (f.pc) f.frames[f.nframes++] = f.pc;
        f.nframes +=
            hk_os_fp_walk(fbp, fsp, f.frames + f.nframes, HK_OS_FAULT_FRAMES - f.nframes, hk_os_readable);
    } else {
        for (int i = first; i < n && f.nframes < HK_OS_FAULT_FRAMES; i++) f.frames[f.nframes++] = tmp[i];
    }

    hk_os_fault_cb_run(&f);

    /* Nobody's: let the default action happen (a core dump at the fault). */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(sig, &sa, NULL);
    errno = saved_errno;
}

static void fault_alt_release(void) {
    void *mem = fault_alt;
    fault_alt = NULL;
    if (!mem || mem == (void *)1) return; /* none, or the thread's own (not ours to free) */
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_flags = SS_DISABLE;
    if (sigaltstack(&ss, NULL) == 0) hk_os_release(mem, FAULT_ALT_SIZE);
}

void hk_os_fault_thread_init(void) {
    if (fault_alt) return;
    stack_t old;
    if (sigaltstack(NULL, &old) != 0 || !(old.ss_flags & SS_DISABLE)) {
        fault_alt = (void *)1; /* the thread has one already (ours or the program's) */
        return;
    }
    void *mem = hk_os_alloc(FAULT_ALT_SIZE);
    if (!mem) return;
    size_t ps = hk_os_page_size();
    (void)hk_os_protect(mem, ps, HK_PROT_NONE); /* a guard page: an overflow faults, never corrupts */
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = (char *)mem + ps;
    ss.ss_size = FAULT_ALT_SIZE - ps;
    if (sigaltstack(&ss, NULL) != 0) {
        hk_os_release(mem, FAULT_ALT_SIZE);
        return;
    }
    fault_alt = mem;
    (void)hk_os_on_thread_exit(fault_alt_release);
}

static int fault_install(void) {
    hk_os_fault_thread_init();
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
    return hk_os_fault_cb_add(fn, user, fault_install);
}

int hk_os_protected_call(void (*fn)(void *arg), void *arg) {
    sigjmp_buf jb;
    sigjmp_buf *outer = fault_protect;
    int rc = 0;
    if (sigsetjmp(jb, 0) == 0) { /* no mask saved: the handler restores the fault's */
        fault_protect = &jb;
        fn(arg);
    } else {
        rc = -1;
    }
    fault_protect = outer;
    return rc;
}
