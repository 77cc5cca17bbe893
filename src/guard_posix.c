/*
 * src/guard_posix.c - the guard heap's host glue: the SIGSEGV/SIGBUS
 * reporter, raw writes, /proc/self/maps, fork/exec of addr2line. Pages
 * themselves go through the OS layer (os_posix.c); this file holds what only
 * the guard heap needs, so guard.c stays free of system calls.
 *
 * Invariants: nothing here calls malloc (the guard heap may be the process's
 * malloc, and most of this runs inside a signal handler or at exit); the
 * handler is installed at most once per process; a fault inside
 * hk__guard_os_protected_call on the same thread jumps back instead of
 * reporting.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "guard_internal.h"
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

extern char **environ;

/* ---- raw output ------------------------------------------------------------ */

void hk__guard_os_write(int fd, const char *buf, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return;
        }
        buf += w;
        n -= (size_t)w;
    }
}

void hk__guard_os_abort(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(SIGABRT, &sa, NULL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGABRT);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    abort();
}

int hk__guard_os_getpid(void) { return (int)getpid(); }

hk_result hk__guard_os_discard(void *p, size_t n) {
    void *r = mmap(p, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return r == p ? HK_OK : HK_ERR_NOMEM;
}

hk_result hk__guard_os_map_own(void *p, size_t n, int rw) {
    /* no MAP_NORESERVE: the flags differ from the reservation's, so the
     * kernel never merges this range with the guard pages around it */
    void *r =
        mmap(p, n, rw ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    return r == p ? HK_OK : HK_ERR_NOMEM;
}

int hk__guard_os_resident(void *p, size_t n, unsigned char *vec) { return mincore(p, n, vec); }

/* ---- /proc ----------------------------------------------------------------- */

static size_t guard_posix_read_num(const char *path, size_t dflt) {
    char buf[64];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return dflt;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return dflt;
    size_t v = 0;
    int any = 0;
    for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++) {
        v = v * 10 + (size_t)(buf[i] - '0');
        any = 1;
    }
    return any ? v : dflt;
}

size_t hk__guard_os_max_map_count(void) { return guard_posix_read_num("/proc/sys/vm/max_map_count", 65530); }

/* Reads /proc/self/maps line by line into a static buffer; calls line_fn for
 * each complete line (without the newline). Not reentrant (callers hold the
 * heap lock or are single-threaded tests). */
static char guard_posix_maps_buf[1 << 16];
static int guard_posix_each_map_line(void (*line_fn)(const char *line, size_t n, void *user), void *user) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t have = 0;
    int lines = 0;
    for (;;) {
        ssize_t r = read(fd, guard_posix_maps_buf + have, sizeof guard_posix_maps_buf - have);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        have += (size_t)r;
        size_t start = 0;
        for (size_t i = 0; i < have; i++) {
            if (guard_posix_maps_buf[i] == '\n') {
                line_fn(guard_posix_maps_buf + start, i - start, user);
                lines++;
                start = i + 1;
            }
        }
        memmove(guard_posix_maps_buf, guard_posix_maps_buf + start, have - start);
        have -= start;
        if (have == sizeof guard_posix_maps_buf) have = 0; /* absurdly long line: drop it */
    }
    close(fd);
    return lines;
}

static void guard_posix_count_line(const char *line, size_t n, void *user) {
    (void)line;
    (void)n;
    (*(size_t *)user)++;
}

size_t hk__guard_os_map_count(void) {
    size_t count = 0;
    if (guard_posix_each_map_line(guard_posix_count_line, &count) < 0) return 0;
    return count;
}

static uintptr_t guard_posix_hex(const char **s, const char *end) {
    uintptr_t v = 0;
    while (*s < end) {
        char c = **s;
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else
            break;
        v = (v << 4) | d;
        (*s)++;
    }
    return v;
}

typedef struct guard_posix_ranges {
    hk__guard_range_fn fn;
    void *user;
    int count;
} guard_posix_ranges;

static void guard_posix_range_line(const char *line, size_t n, void *user) {
    guard_posix_ranges *r = (guard_posix_ranges *)user;
    const char *s = line, *end = line + n;
    uintptr_t lo = guard_posix_hex(&s, end);
    if (s >= end || *s != '-') return;
    s++;
    uintptr_t hi = guard_posix_hex(&s, end);
    if (s + 5 > end || s[0] != ' ') return;
    /* perms: rwxp */
    if (s[1] != 'r' || s[2] != 'w' || s[4] != 'p') return;
    /* path: the last field, if any */
    const char *path = NULL;
    for (const char *q = s; q < end; q++) {
        if (*q == '/' || *q == '[') {
            path = q;
            break;
        }
    }
    if (path) {
        size_t pn = (size_t)(end - path);
        if (pn >= 5 && memcmp(path, "/dev/", 5) == 0) return;
        if (pn >= 6 && memcmp(path, "[vvar]", 6) == 0) return;
        if (pn >= 10 && memcmp(path, "[vsyscall]", 10) == 0) return;
    }
    if (hi > lo) {
        r->fn(lo, hi, r->user);
        r->count++;
    }
}

int hk__guard_os_writable_ranges(hk__guard_range_fn fn, void *user) {
    guard_posix_ranges r = {fn, user, 0};
    if (guard_posix_each_map_line(guard_posix_range_line, &r) < 0) return -1;
    return r.count;
}

int hk__guard_os_readable(const void *p, size_t n) {
    char tmp[64];
    if (n > sizeof tmp) n = sizeof tmp;
    struct iovec local = {tmp, n};
    struct iovec remote = {(void *)(uintptr_t)p, n};
    ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (r == (ssize_t)n) return 1;
    if (r < 0 && (errno == ENOSYS || errno == EPERM)) {
        /* Probe unavailable: fall back to "mapped" (mincore on the page). */
        size_t ps = hk_os_page_size();
        unsigned char vec;
        void *page = (void *)((uintptr_t)p & ~(uintptr_t)(ps - 1));
        return mincore(page, ps, &vec) == 0;
    }
    return 0;
}

uintptr_t hk__guard_os_main_base(void) {
    Dl_info info;
    unsigned long phdr = getauxval(AT_PHDR);
    if (phdr && dladdr((void *)phdr, &info)) return (uintptr_t)info.dli_fbase;
    return 0;
}

/* ---- the fault handler ------------------------------------------------------ */

static int guard_posix_installed;
static volatile sig_atomic_t guard_posix_scan_tid;
static sigjmp_buf guard_posix_scan_jmp;

static long guard_posix_tid(void) { return (long)syscall(SYS_gettid); }

static void guard_posix_handler(int sig, siginfo_t *si, void *ucv) {
    int saved_errno = errno;
    if (guard_posix_scan_tid != 0 && guard_posix_scan_tid == (sig_atomic_t)guard_posix_tid())
        siglongjmp(guard_posix_scan_jmp, 1);
    static hk__guard_fault f; /* one fault at a time: the report aborts */
    memset(&f, 0, sizeof f);
    f.addr = si->si_addr;
    f.signo = sig;
    f.code = si->si_code;
#if defined(__x86_64__) && defined(__linux__)
    {
        ucontext_t *uc = (ucontext_t *)ucv;
        greg_t *gr = uc->uc_mcontext.gregs;
        f.pc = (void *)(uintptr_t)gr[REG_RIP];
        /* Page faults (trap 14) carry the access type in bit 1 of the error code. */
        if (gr[REG_TRAPNO] == 14)
            f.access = (gr[REG_ERR] & 2) ? HK__GUARD_ACCESS_WRITE : HK__GUARD_ACCESS_READ;
        static const int idx[HK__GUARD_NREGS] = {REG_RAX, REG_RBX, REG_RCX, REG_RDX, REG_RSI, REG_RDI,
                                                 REG_RBP, REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12,
                                                 REG_R13, REG_R14, REG_R15, REG_RSP};
        static const char *const names[HK__GUARD_NREGS] = {"rax", "rbx", "rcx", "rdx", "rsi", "rdi",
                                                           "rbp", "r8",  "r9",  "r10", "r11", "r12",
                                                           "r13", "r14", "r15", "rsp"};
        for (int i = 0; i < HK__GUARD_NREGS; i++) {
            f.regs[i] = (uintptr_t)gr[idx[i]];
            f.regnames[i] = names[i];
        }
        f.nregs = HK__GUARD_NREGS;
    }
#else
    (void)ucv;
#endif
    /* The stack through the signal frame; start at the faulting frame. */
    void *tmp[HK_GUARD_MAX_FRAMES + 24];
    int n = backtrace(tmp, (int)(sizeof tmp / sizeof tmp[0]));
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
    for (int i = first; i < n && f.nframes < (int)(sizeof f.frames / sizeof f.frames[0]); i++)
        f.frames[f.nframes++] = tmp[i];

    hk__guard_on_fault(&f); /* returns only when the fault is not ours */

    /* Not a guard heap's fault: let the default action happen (core dump). */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigaction(sig, &sa, NULL);
    errno = saved_errno;
}

int hk__guard_os_install_fault_handler(void) {
    if (__atomic_exchange_n(&guard_posix_installed, 1, __ATOMIC_ACQ_REL)) return 0;
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
    sa.sa_sigaction = guard_posix_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0) return -1;
    if (sigaction(SIGBUS, &sa, NULL) != 0) return -1;
    return 0;
}

int hk__guard_os_protected_call(void (*fn)(void *arg), void *arg) {
    int rc = 0;
    if (sigsetjmp(guard_posix_scan_jmp, 1) == 0) {
        guard_posix_scan_tid = (sig_atomic_t)guard_posix_tid();
        fn(arg);
    } else {
        rc = -1;
    }
    guard_posix_scan_tid = 0;
    return rc;
}

int hk__guard_os_backtrace(void **frames, int max) { return backtrace(frames, max); }

/* ---- fast stack capture ------------------------------------------------------
 *
 * glibc's backtrace() runs the DWARF unwinder: per frame a binary search for
 * the FDE and an interpretation of its CFI, about 150 ns a frame here. But
 * at a given return address the distance between the caller's CFA and the
 * callee's CFA (the caller's frame size at that call) is a constant for any
 * function without alloca/VLAs. So we run the real unwinder
 * (_Unwind_Backtrace, exact) the first time a call path is seen, and learn,
 * per return address, that distance; later captures walk the stack with
 * table lookups: return address k+1 sits just below CFA k, CFA k+1 = CFA k +
 * learned distance. A walk that meets a return address not in the table, a
 * distance seen to vary (alloca, signal frames), or a CFA outside the part
 * of this thread's stack the unwinder has walked, falls back to the exact
 * unwinder (which learns). The table is process-wide, lock-free, fixed-size
 * (full: no more learning, the exact unwinder is used for unknown sites).
 */
#if defined(__x86_64__) && defined(__GNUC__)
#include <unwind.h>
#define GUARD_UW_SLOTS    8192u       /* power of two */
#define GUARD_UW_TERMINAL 0x40000000u /* the unwinder found no caller beyond this frame */
#define GUARD_UW_DYNAMIC  0x20000000u /* the distance varies: always unwind exactly */
#define GUARD_UW_VALID    0x80000000u
#define GUARD_UW_DIST     0x1fffffffu
typedef struct guard_uw_entry {
    uintptr_t ip;
    uint32_t val; /* GUARD_UW_VALID | flags | distance */
    uint32_t pad;
} guard_uw_entry;
static guard_uw_entry guard_uw_table[GUARD_UW_SLOTS];
static _Thread_local uintptr_t guard_uw_stack_hi __attribute__((tls_model("initial-exec")));

static inline uint32_t guard_uw_hash(uintptr_t ip) {
    uint64_t h = (uint64_t)ip * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 40) & (GUARD_UW_SLOTS - 1);
}

static uint32_t guard_uw_lookup(uintptr_t ip) {
    uint32_t i = guard_uw_hash(ip);
    for (uint32_t k = 0; k < 16; k++, i = (i + 1) & (GUARD_UW_SLOTS - 1)) {
        uintptr_t e = __atomic_load_n(&guard_uw_table[i].ip, __ATOMIC_ACQUIRE);
        if (e == ip) return __atomic_load_n(&guard_uw_table[i].val, __ATOMIC_ACQUIRE);
        if (e == 0) return 0;
    }
    return 0;
}

static void guard_uw_learn(uintptr_t ip, uint32_t dist, uint32_t flags) {
    if (ip == 0) return;
    uint32_t v = GUARD_UW_VALID | flags | (dist > GUARD_UW_DIST ? GUARD_UW_DIST : dist);
    if (dist > GUARD_UW_DIST) v |= GUARD_UW_DYNAMIC;
    uint32_t i = guard_uw_hash(ip);
    for (uint32_t k = 0; k < 16; k++, i = (i + 1) & (GUARD_UW_SLOTS - 1)) {
        uintptr_t e = __atomic_load_n(&guard_uw_table[i].ip, __ATOMIC_ACQUIRE);
        if (e == 0) {
            uintptr_t zero = 0;
            if (__atomic_compare_exchange_n(&guard_uw_table[i].ip, &zero, ip, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                __atomic_store_n(&guard_uw_table[i].val, v, __ATOMIC_RELEASE);
                return;
            }
            e = zero;
        }
        if (e != ip) continue;
        uint32_t old = __atomic_load_n(&guard_uw_table[i].val, __ATOMIC_ACQUIRE);
        if (old == 0) return; /* another thread is storing it */
        uint32_t nv = old;
        if ((flags & GUARD_UW_TERMINAL) != (old & GUARD_UW_TERMINAL))
            nv |= GUARD_UW_DYNAMIC; /* outermost or not? */
        else if (!(flags & GUARD_UW_TERMINAL) &&
                 ((old & GUARD_UW_DIST) != (v & GUARD_UW_DIST) || (v & GUARD_UW_DYNAMIC)))
            nv |= GUARD_UW_DYNAMIC; /* the frame size varies (alloca, signal frame) */
        if (nv != old) __atomic_store_n(&guard_uw_table[i].val, nv, __ATOMIC_RELEASE);
        return;
    }
}

typedef struct guard_uw_state {
    void **out;
    int max, skip, n, idx, stopped;
    uintptr_t prev_ip, prev_sp, hi;
} guard_uw_state;

/* Callback k gets (ip_k, sp_k): a pc in frame k and that frame's stack
 * pointer there (the CFA of frame k-1). Frame 0 is guard_uw_exact, frame 1
 * hk__guard_os_stack, frame 2 its caller. The distance learned for ip_k is
 * sp_{k+1} - sp_k; the return address ip_{k+1} sits at sp_{k+1} - 8. */
static _Unwind_Reason_Code guard_uw_cb(struct _Unwind_Context *ctx, void *arg) {
    guard_uw_state *st = (guard_uw_state *)arg;
    uintptr_t ip = (uintptr_t)_Unwind_GetIP(ctx);
    uintptr_t sp = (uintptr_t)_Unwind_GetCFA(ctx);
    int idx = st->idx++;
    if (ip == 0) return _URC_END_OF_STACK;
    if (idx > 0) {
        if (sp > st->prev_sp && sp - st->prev_sp <= GUARD_UW_DIST)
            guard_uw_learn(st->prev_ip, (uint32_t)(sp - st->prev_sp), 0);
        else
            guard_uw_learn(st->prev_ip, GUARD_UW_DIST + 1u,
                           0); /* a jump between stacks: never walk fast through it */
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

static HK__NOINLINE int guard_uw_exact(void **frames, int max, int skip) {
    guard_uw_state st;
    memset(&st, 0, sizeof st);
    st.out = frames;
    st.max = max;
    st.skip = skip;
    (void)_Unwind_Backtrace(guard_uw_cb, &st);
    if (!st.stopped && st.prev_ip) guard_uw_learn(st.prev_ip, 0, GUARD_UW_TERMINAL); /* the outermost frame */
    if (st.hi > guard_uw_stack_hi) guard_uw_stack_hi = st.hi;
    return st.n;
}

/* Frames of the caller's stack: [a pc in the caller, its return address,
 * ...], the first `skip` dropped, at most max kept. */
__attribute__((no_sanitize_address)) HK__NOINLINE int hk__guard_os_stack(void **frames, int max, int skip) {
    if (max <= 0) return 0;
    uintptr_t hi = guard_uw_stack_hi;
    /* __builtin_frame_address keeps this a classic rbp frame: our CFA is
     * rbp + 16, the caller's stack pointer after we return */
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0) + 16;
    int n = 0, idx = 0;
    while (hi && sp <= hi) {
        uintptr_t ip = *(const uintptr_t *)(sp - 8);
        uint32_t v = guard_uw_lookup(ip);
        if (!v || (v & GUARD_UW_DYNAMIC)) break;
        if (idx >= skip) frames[n++] = (void *)ip;
        idx++;
        if (n >= max || (v & GUARD_UW_TERMINAL)) return n;
        sp += v & GUARD_UW_DIST;
        if ((v & GUARD_UW_DIST) == 0) break;
    }
    n = guard_uw_exact(frames, max, skip);
    __asm__ volatile("" ::: "memory"); /* no tail call: guard_uw_exact counts on our frame */
    return n;
}

#else
/* backtrace() of the caller, its own frame and `skip` more dropped. */
static HK__NOINLINE int guard_posix_backtrace_skip(void **frames, int max, int skip) {
    void *tmp[HK_GUARD_MAX_FRAMES + 64];
    int want = max + skip + 1;
    if (want > (int)(sizeof tmp / sizeof tmp[0])) want = (int)(sizeof tmp / sizeof tmp[0]);
    int got = backtrace(tmp, want), n = 0;
    for (int i = skip + 1; i < got && n < max; i++) frames[n++] = tmp[i];
    return n;
}

HK__NOINLINE int hk__guard_os_stack(void **frames, int max, int skip) {
    return guard_posix_backtrace_skip(frames, max, skip + 1);
}
#endif

/* ---- addr2line --------------------------------------------------------------- */

static char guard_posix_a2l_path[512];
static int guard_posix_a2l_looked;

const char *hk__guard_os_addr2line_path(void) {
    if (guard_posix_a2l_looked) return guard_posix_a2l_path;
    guard_posix_a2l_looked = 1;
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
    const char *s = path;
    while (*s) {
        const char *e = strchr(s, ':');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n > 0 && n + sizeof "/addr2line" < sizeof guard_posix_a2l_path) {
            memcpy(guard_posix_a2l_path, s, n);
            memcpy(guard_posix_a2l_path + n, "/addr2line", sizeof "/addr2line");
            if (access(guard_posix_a2l_path, X_OK) == 0) return guard_posix_a2l_path;
        }
        if (!e) break;
        s = e + 1;
    }
    guard_posix_a2l_path[0] = 0;
    return guard_posix_a2l_path;
}

long hk__guard_os_addr2line(const char *tool, const char *module, const uintptr_t *addrs, int n, char *out,
                            size_t outn) {
    enum { MAXA = 128 };
    static char argbuf[MAXA][24];
    static char *argv[MAXA + 8];
    static char *envp[512];
    if (!tool || !tool[0] || n <= 0 || outn == 0) return -1;
    if (n > MAXA) n = MAXA;
    int a = 0;
    argv[a++] = (char *)(uintptr_t)tool;
    argv[a++] = (char *)(uintptr_t) "-f";
    argv[a++] = (char *)(uintptr_t) "-C";
    argv[a++] = (char *)(uintptr_t) "-e";
    argv[a++] = (char *)(uintptr_t)module;
    for (int i = 0; i < n; i++) {
        /* 0x + hex */
        char *b = argbuf[i];
        uintptr_t v = addrs[i];
        char tmp[20];
        int k = 0;
        do {
            unsigned d = (unsigned)(v & 15u);
            tmp[k++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
            v >>= 4;
        } while (v && k < 20);
        int j = 0;
        b[j++] = '0';
        b[j++] = 'x';
        while (k > 0) b[j++] = tmp[--k];
        b[j] = 0;
        argv[a++] = b;
    }
    argv[a] = NULL;
    int e = 0;
    for (char **ev = environ; ev && *ev && e < 511; ev++)
        if (strncmp(*ev, "LD_PRELOAD=", 11) != 0) envp[e++] = *ev;
    envp[e] = NULL;

    int fds[2];
    if (pipe(fds) != 0) return -1;
        /* The raw system call: glibc's fork() would run pthread_atfork handlers
         * (the preload's take the heap lock) from inside a report. */
#ifdef SYS_fork
    pid_t pid = (pid_t)syscall(SYS_fork);
#else
    pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
#endif
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 2);
        }
        dup2(fds[1], 1);
        close(fds[0]);
        execve(tool, argv, envp);
        _exit(127);
    }
    close(fds[1]);
    size_t have = 0;
    for (;;) {
        if (have + 1 >= outn) {
            char sink[256];
            if (read(fds[0], sink, sizeof sink) <= 0) break;
            continue;
        }
        ssize_t r = read(fds[0], out + have, outn - 1 - have);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        have += (size_t)r;
    }
    out[have] = 0;
    close(fds[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return (long)have;
}
