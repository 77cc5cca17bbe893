/*
 * src/os_posix.c - the host layer on POSIX (Linux): pages (mmap, mprotect,
 * madvise), the monotonic clock, process helpers, /proc queries, mutexes
 * and thread-exit callbacks. See src/os.h; stack capture, faults and
 * symbolization are in os_posix_*.c, the failure point and what else does
 * not depend on the OS in os_common.c.
 *
 * Invariants: nothing here calls malloc; every page acquisition (reserve,
 * alloc, commit, protect to an accessible protection, map_own of
 * accessible pages) asks the failure point (hk_os_fail_now) first.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ---- the public names -------------------------------------------------------- */

size_t hk_page_size(void) { return hk_os_page_size(); }
uint64_t hk_now_ns(void) { return hk_os_now_ns(); }

/* ---- pages ----------------------------------------------------------------------- */

static size_t g_page_size;

size_t hk_os_page_size(void) {
    size_t ps = __atomic_load_n(&g_page_size, __ATOMIC_RELAXED);
    if (ps == 0) {
        long v = sysconf(_SC_PAGESIZE);
        ps = v > 0 ? (size_t)v : 4096u;
        __atomic_store_n(&g_page_size, ps, __ATOMIC_RELAXED);
    }
    return ps;
}

size_t hk_os_alloc_granularity(void) { return hk_os_page_size(); }

static bool round_pages(size_t size, size_t *out) {
    return size != 0 && hk_size_align(size, hk_os_page_size(), out);
}

void *hk_os_reserve_rw(size_t size) {
    size_t len;
    if (!round_pages(size, &len) || hk_os_fail_now()) return NULL;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void *hk_os_reserve(size_t size) {
    size_t len;
    if (!round_pages(size, &len) || hk_os_fail_now()) return NULL;
    void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void *hk_os_alloc(size_t size) {
    size_t len;
    if (!round_pages(size, &len) || hk_os_fail_now()) return NULL;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static int to_native(hk_prot prot) {
    switch (prot) {
    case HK_PROT_NONE: return PROT_NONE;
    case HK_PROT_READ: return PROT_READ;
    case HK_PROT_READ_WRITE: return PROT_READ | PROT_WRITE;
    }
    return PROT_NONE;
}

static bool page_range_ok(const void *p, size_t size) {
    return p != NULL && ((uintptr_t)p % hk_os_page_size()) == 0 && size != 0;
}

static hk_result os_protect(void *p, size_t size, hk_prot prot) {
    size_t len;
    if (!page_range_ok(p, size) || !round_pages(size, &len)) return HK_ERR_INVALID;
    return mprotect(p, len, to_native(prot)) == 0 ? HK_OK : (errno == ENOMEM ? HK_ERR_NOMEM : HK_ERR_INVALID);
}

hk_result hk_os_protect(void *p, size_t size, hk_prot prot) {
    if (!page_range_ok(p, size)) return HK_ERR_INVALID;
    if (prot != HK_PROT_NONE && hk_os_fail_now()) return HK_ERR_NOMEM; /* an acquisition */
    return os_protect(p, size, prot);
}

hk_result hk_os_commit(void *p, size_t size) {
    if (!page_range_ok(p, size)) return HK_ERR_INVALID;
    if (hk_os_fail_now()) return HK_ERR_NOMEM;
    return os_protect(p, size, HK_PROT_READ_WRITE);
}

hk_result hk_os_decommit(void *p, size_t size) {
    size_t len;
    if (!page_range_ok(p, size) || !round_pages(size, &len)) return HK_ERR_INVALID;
    /* MADV_DONTNEED on private anonymous memory drops the pages: they read
     * as zero afterwards. Then make the range inaccessible. */
    if (madvise(p, len, MADV_DONTNEED) != 0) return HK_ERR_INVALID;
    return mprotect(p, len, PROT_NONE) == 0 ? HK_OK : HK_ERR_INVALID;
}

hk_result hk_os_unback(void *p, size_t size) {
    size_t len;
    if (!page_range_ok(p, size) || !round_pages(size, &len)) return HK_ERR_INVALID;
    return madvise(p, len, MADV_DONTNEED) == 0 ? HK_OK : HK_ERR_INVALID;
}

void hk_os_unback_prepare(void) {
    static int done;
    if (__atomic_load_n(&done, __ATOMIC_RELAXED)) return;
    /* a zero-length advice is accepted and does nothing; the call binds
     * the madvise entry of whichever object links this file */
    (void)madvise(NULL, 0, MADV_NORMAL);
    __atomic_store_n(&done, 1, __ATOMIC_RELAXED);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

hk_result hk_os_prefault(void *p, size_t size) {
    size_t len;
    if (!page_range_ok(p, size) || !round_pages(size, &len)) return HK_ERR_INVALID;
    if (madvise(p, len, MADV_POPULATE_WRITE) == 0) return HK_OK;
    if (errno == ENOMEM || errno == EFAULT) return HK_ERR_NOMEM;
    /* older kernels (EINVAL): touch each page, keeping what it holds */
    size_t page = hk_os_page_size();
    for (size_t o = 0; o < len; o += page) {
        volatile unsigned char *c = (volatile unsigned char *)p + o;
        *c = *c;
    }
    return HK_OK;
}

void hk_os_release(void *p, size_t size) {
    size_t len;
    if (!p || !round_pages(size, &len)) return;
    munmap(p, len);
}

hk_result hk_os_discard(void *p, size_t n) {
    void *r = mmap(p, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return r == p ? HK_OK : HK_ERR_NOMEM;
}

hk_result hk_os_map_own(void *p, size_t n, int rw) {
    if (rw && hk_os_fail_now()) return HK_ERR_NOMEM; /* an acquisition */
    /* no MAP_NORESERVE: the flags differ from the reservation's, so the
     * kernel never merges this range with the inaccessible pages around it */
    void *r =
        mmap(p, n, rw ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    return r == p ? HK_OK : HK_ERR_NOMEM;
}

hk_result hk_os_guard_install(void *p, size_t n) {
#if defined(__linux__)
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102 /* Linux 6.13 */
#endif
    if (madvise(p, n, MADV_GUARD_INSTALL) == 0) return HK_OK;
    return errno == EINVAL ? HK_ERR_UNSUPPORTED : HK_ERR_NOMEM;
#else
    (void)p;
    (void)n;
    return HK_ERR_UNSUPPORTED;
#endif
}

hk_result hk_os_guard_install_many(void *const *at, size_t count, size_t n) {
    size_t done = 0;
#if defined(__linux__) && defined(SYS_process_madvise)
    /* PIDFD_SELF_THREAD_GROUP (Linux 6.15): the calling process, with no
     * descriptor to open and none that a fork would leave pointing at the
     * parent. Older kernels say EBADF (or EINVAL, ENOSYS): remembered, and
     * then one madvise per range. */
    static int no_vector;
    if (count > 1 && !__atomic_load_n(&no_vector, __ATOMIC_RELAXED)) {
        struct iovec v[64];
        while (done < count) {
            size_t k = count - done < 64 ? count - done : 64;
            for (size_t i = 0; i < k; i++) {
                v[i].iov_base = at[done + i];
                v[i].iov_len = n;
            }
            long r = syscall(SYS_process_madvise, -10001 /* PIDFD_SELF_THREAD_GROUP */, v, k, 102, 0u);
            if (r < 0) {
                if (errno == EBADF || errno == EINVAL || errno == ENOSYS || errno == EPERM)
                    __atomic_store_n(&no_vector, 1, __ATOMIC_RELAXED);
                break;
            }
            done += (size_t)r / n; /* a short count: the rest one by one */
            if ((size_t)r != k * n) break;
        }
    }
#endif
    for (; done < count; done++) {
        hk_result res = hk_os_guard_install(at[done], n);
        if (res != HK_OK) return res;
    }
    return HK_OK;
}

int hk_os_resident(void *p, size_t n, unsigned char *vec) { return mincore(p, n, vec); }

int hk_os_readable(const void *p, size_t n) {
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

/* ---- clock and process -------------------------------------------------------------- */

uint64_t hk_os_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t hk_os_coarse_ns(void) {
#ifdef CLOCK_MONOTONIC_COARSE
    /* a kernel without it (before 2.6.32) refuses it every time: the
     * precise clock then, always */
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0)
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
    return hk_os_now_ns();
}

int hk_os_getpid(void) { return (int)getpid(); }

void hk_os_write(int fd, const char *buf, size_t n) {
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

void hk_os_abort(void) {
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

/* ---- /proc ------------------------------------------------------------------------- */

static size_t os_read_num(const char *path, size_t dflt) {
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

size_t hk_os_max_map_count(void) { return os_read_num("/proc/sys/vm/max_map_count", 65530); }

/* Reads /proc/self/maps line by line into a static buffer; calls line_fn for
 * each complete line (without the newline). Not reentrant. */
static char os_maps_buf[1 << 16];
static int os_each_map_line(void (*line_fn)(const char *line, size_t n, void *user), void *user) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t have = 0;
    int lines = 0;
    for (;;) {
        ssize_t r = read(fd, os_maps_buf + have, sizeof os_maps_buf - have);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        have += (size_t)r;
        size_t start = 0;
        for (size_t i = 0; i < have; i++) {
            if (os_maps_buf[i] == '\n') {
                line_fn(os_maps_buf + start, i - start, user);
                lines++;
                start = i + 1;
            }
        }
        memmove(os_maps_buf, os_maps_buf + start, have - start);
        have -= start;
        if (have == sizeof os_maps_buf) have = 0; /* absurdly long line: drop it */
    }
    close(fd);
    return lines;
}

static void os_count_line(const char *line, size_t n, void *user) {
    (void)line;
    (void)n;
    (*(size_t *)user)++;
}

size_t hk_os_map_count(void) {
    size_t count = 0;
    if (os_each_map_line(os_count_line, &count) < 0) return 0;
    return count;
}

static uintptr_t os_hex(const char **s, const char *end) {
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

typedef struct os_ranges {
    hk_os_range_fn fn;
    void *user;
    int count;
} os_ranges;

static void os_range_line(const char *line, size_t n, void *user) {
    os_ranges *r = (os_ranges *)user;
    const char *s = line, *end = line + n;
    uintptr_t lo = os_hex(&s, end);
    if (s >= end || *s != '-') return;
    s++;
    uintptr_t hi = os_hex(&s, end);
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

int hk_os_writable_ranges(hk_os_range_fn fn, void *user) {
    os_ranges r = {fn, user, 0};
    if (os_each_map_line(os_range_line, &r) < 0) return -1;
    return r.count;
}

/* ---- threads ----------------------------------------------------------------------- */

_Static_assert(sizeof(pthread_mutex_t) <= sizeof(hk_os_mutex), "hk_os_mutex holds a pthread mutex");

void hk_os_mutex_init(hk_os_mutex *m) { pthread_mutex_init((pthread_mutex_t *)(void *)m, NULL); }
void hk_os_mutex_destroy(hk_os_mutex *m) { pthread_mutex_destroy((pthread_mutex_t *)(void *)m); }
void hk_os_mutex_lock(hk_os_mutex *m) { pthread_mutex_lock((pthread_mutex_t *)(void *)m); }
void hk_os_mutex_unlock(hk_os_mutex *m) { pthread_mutex_unlock((pthread_mutex_t *)(void *)m); }
void hk_os_mutex_lock_hook(void *m) { pthread_mutex_lock((pthread_mutex_t *)m); }
void hk_os_mutex_unlock_hook(void *m) { pthread_mutex_unlock((pthread_mutex_t *)m); }

/* Thread exit: one pthread key whose destructor runs the functions this
 * thread armed (a bit each in a thread-local mask). */
#define OS_EXIT_FNS 8
static void (*os_exit_fns[OS_EXIT_FNS])(void);
static pthread_key_t os_exit_key;
static pthread_once_t os_exit_once = PTHREAD_ONCE_INIT;
static int os_exit_key_ok;
static _Thread_local unsigned os_exit_armed __attribute__((tls_model("initial-exec")));

static void os_exit_run(void *arg) {
    (void)arg;
    unsigned armed = os_exit_armed;
    os_exit_armed = 0;
    for (int i = 0; i < OS_EXIT_FNS; i++)
        if (armed & (1u << i)) {
            void (*fn)(void) = __atomic_load_n(&os_exit_fns[i], __ATOMIC_ACQUIRE);
            if (fn) fn();
        }
}
static void os_exit_key_init(void) { os_exit_key_ok = pthread_key_create(&os_exit_key, os_exit_run) == 0; }

hk_result hk_os_on_thread_exit(void (*fn)(void)) {
    int slot = hk_os_fn_slot(os_exit_fns, OS_EXIT_FNS, fn);
    if (slot < 0) return HK_ERR_NOMEM;
    if (os_exit_armed & (1u << slot)) return HK_OK;
    pthread_once(&os_exit_once, os_exit_key_init);
    if (!os_exit_key_ok) return HK_ERR_NOMEM;
    if (os_exit_armed == 0)
        (void)pthread_setspecific(os_exit_key, &os_exit_armed); /* non-NULL: run at exit */
    os_exit_armed |= 1u << slot;
    return HK_OK;
}
