/*
 * src/os_posix_world.c - stopping every other thread of the process for a
 * moment (hk_os_stop_world in src/os.h), so that a leak scan can read each
 * thread's live stack, from its stack pointer up, and its registers, as
 * LeakSanitizer does (it uses ptrace; a signal is enough here).
 *
 * How: in a process that never started a thread (glibc's
 * __libc_single_threaded, 2.32+) fn is called at once, with no states;
 * otherwise the threads are listed from /proc/self/task (raw getdents64, no
 * allocation); each other thread is sent HK_OS_WORLD_SIGNAL with tgkill.
 * Its handler (on the thread's own stack, not the alternate one) copies the
 * stack pointer and general registers of the interrupted context into a
 * slot of a static table, counts itself in, and waits on a futex until the
 * stopper bumps the generation. The stopper waits for every signalled
 * thread (a thread that exited meanwhile, or blocks the signal, is given up
 * after HK_OS_WORLD_WAIT_MS and left out), calls fn, then resumes them all.
 *
 * Invariants: one stop at a time (a spin lock); nothing here allocates or
 * takes a lock another thread could hold; a handler that runs when no stop
 * is in progress (a late signal) returns at once; a handler writes its
 * slot only while the generation it saw is current; the signal's previous
 * action is restored after a stop in which every signalled thread answered
 * (otherwise ours stays, so a late signal never meets SIGPWR's default
 * action, which ends the process); the states are cleared after fn
 * returns (stale register values must not look like live pointers to the
 * next scan).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
#include <sys/single_threaded.h>
#define HK_OS_WORLD_SINGLE() (__libc_single_threaded != 0)
#else
#define HK_OS_WORLD_SINGLE() 0
#endif

#define HK_OS_WORLD_SIGNAL  SIGPWR /* as the Boehm collector's suspend signal on Linux */
#define HK_OS_WORLD_WAIT_MS 500

static hk_os_thread_state world_slots[HK_OS_WORLD_MAX];
static hk_os_thread_state world_out[HK_OS_WORLD_MAX]; /* the slots complete when fn is called */
static int world_done[HK_OS_WORLD_MAX];               /* slot i is written (this stop) */
static int world_lock;                                /* one stop at a time */
static int world_gen;                                 /* futex word: bumped to resume */
static int world_active;                              /* a stop is in progress */
static int world_next;                                /* slots taken */
static int world_acks;                                /* stopped threads counted in */

static long world_futex(int *addr, int op, int val) {
    return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

static void world_handler(int sig, siginfo_t *si, void *ucv) {
    (void)sig;
    (void)si;
    int saved_errno = errno;
    int gen = __atomic_load_n(&world_gen, __ATOMIC_ACQUIRE);
    if (!__atomic_load_n(&world_active, __ATOMIC_ACQUIRE)) {
        errno = saved_errno;
        return; /* a late signal: no stop in progress */
    }
    int i = __atomic_fetch_add(&world_next, 1, __ATOMIC_ACQ_REL);
    if (i < HK_OS_WORLD_MAX && __atomic_load_n(&world_gen, __ATOMIC_ACQUIRE) == gen) {
        hk_os_thread_state *t = &world_slots[i];
        volatile char here = 0;
        t->tid = (long)syscall(SYS_gettid);
        t->handler_sp = (uintptr_t)&here;
        t->sp = t->handler_sp;
        t->nregs = 0;
#if defined(__x86_64__) && defined(__linux__)
        {
            const greg_t *gr = ((const ucontext_t *)ucv)->uc_mcontext.gregs;
            static const int idx[HK_OS_THREAD_NREGS] = {REG_RAX, REG_RBX, REG_RCX, REG_RDX, REG_RSI, REG_RDI,
                                                        REG_RBP, REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12,
                                                        REG_R13, REG_R14, REG_R15, REG_RIP};
            for (int k = 0; k < HK_OS_THREAD_NREGS; k++) t->regs[k] = (uintptr_t)gr[idx[k]];
            t->nregs = HK_OS_THREAD_NREGS;
            t->sp = (uintptr_t)gr[REG_RSP];
        }
#else
        (void)ucv; /* the registers are in the signal frame, above handler_sp */
#endif
        __atomic_store_n(&world_done[i], 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&world_acks, 1, __ATOMIC_RELEASE);
    }
    while (__atomic_load_n(&world_gen, __ATOMIC_ACQUIRE) == gen)
        (void)world_futex(&world_gen, FUTEX_WAIT_PRIVATE, gen);
    errno = saved_errno;
}

/* The ids of the process's threads into tids (at most max); -1 on error. */
static int world_list_threads(long *tids, int max) {
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int n = 0;
    _Alignas(8) char buf[4096];
    for (;;) {
        long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (got <= 0) break;
        for (long off = 0; off < got;) {
            const char *d = buf + off;
            unsigned short reclen;
            memcpy(&reclen, d + 16, sizeof reclen); /* d_ino 8, d_off 8, d_reclen 2, d_type 1, d_name */
            const char *name = d + 19;
            long tid = 0;
            int digits = 1;
            for (const char *c = name; *c; c++) {
                if (*c < '0' || *c > '9') digits = 0;
                tid = tid * 10 + (*c - '0');
            }
            if (digits && tid > 0 && n < max) tids[n++] = tid;
            off += reclen;
        }
    }
    close(fd);
    return n;
}

static void world_sleep_us(long us) {
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

int hk_os_stop_world(hk_os_world_fn fn, void *user) {
    if (!fn) return -1;
    while (__atomic_exchange_n(&world_lock, 1, __ATOMIC_ACQUIRE)) sched_yield();
    if (HK_OS_WORLD_SINGLE()) { /* no thread was ever started: nothing to list, signal or wait for */
        fn(world_out, 0, user);
        __atomic_store_n(&world_lock, 0, __ATOMIC_RELEASE);
        return 0;
    }
    static long tids[HK_OS_WORLD_MAX];
    long me = (long)syscall(SYS_gettid);
    pid_t pid = getpid();
    int n = world_list_threads(tids, HK_OS_WORLD_MAX);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = world_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask); /* nothing else runs on top of a stopped thread's handler */
    sigdelset(&sa.sa_mask, SIGSEGV);
    sigdelset(&sa.sa_mask, SIGBUS);
    if (n < 0 || sigaction(HK_OS_WORLD_SIGNAL, &sa, &old) != 0) {
        __atomic_store_n(&world_lock, 0, __ATOMIC_RELEASE);
        return -1;
    }
    memset(world_done, 0, sizeof world_done);
    __atomic_store_n(&world_next, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&world_acks, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&world_active, 1, __ATOMIC_RELEASE);
    int sent = 0;
    for (int i = 0; i < n; i++)
        if (tids[i] != me && syscall(SYS_tgkill, pid, tids[i], HK_OS_WORLD_SIGNAL) == 0) sent++;
    /* wait for every signalled thread to count itself in */
    for (long waited = 0; __atomic_load_n(&world_acks, __ATOMIC_ACQUIRE) < sent; waited += 50) {
        if (waited >= (long)HK_OS_WORLD_WAIT_MS * 1000) break;
        world_sleep_us(50);
    }
    int got = __atomic_load_n(&world_acks, __ATOMIC_ACQUIRE);
    int taken = __atomic_load_n(&world_next, __ATOMIC_ACQUIRE);
    if (taken > HK_OS_WORLD_MAX) taken = HK_OS_WORLD_MAX;
    int ready = 0; /* a thread still writing its slot (a stop that timed out) is left out */
    for (int i = 0; i < taken; i++)
        if (__atomic_load_n(&world_done[i], __ATOMIC_ACQUIRE)) world_out[ready++] = world_slots[i];
    /* one copy only while fn runs: fn may read this module's memory as
     * data and must find the registers where it was told they are */
    memset(world_slots, 0, (size_t)taken * sizeof world_slots[0]);
    fn(world_out, ready, user);
    /* resume: no handler of this stop writes a slot from here on */
    __atomic_store_n(&world_active, 0, __ATOMIC_RELEASE);
    __atomic_add_fetch(&world_gen, 1, __ATOMIC_ACQ_REL);
    (void)world_futex(&world_gen, FUTEX_WAKE_PRIVATE, 0x7fffffff);
    if (got >= sent) (void)sigaction(HK_OS_WORLD_SIGNAL, &old, NULL); /* nobody late: the program's again */
    /* no register values of this stop stay behind in this module's memory,
     * where a later leak scan (which reads it as a root) would take them
     * for live pointers */
    taken = __atomic_load_n(&world_next, __ATOMIC_ACQUIRE);
    if (taken > HK_OS_WORLD_MAX) taken = HK_OS_WORLD_MAX;
    memset(world_slots, 0, (size_t)taken * sizeof world_slots[0]);
    memset(world_out, 0, (size_t)ready * sizeof world_out[0]);
    __atomic_store_n(&world_lock, 0, __ATOMIC_RELEASE);
    return ready;
}
