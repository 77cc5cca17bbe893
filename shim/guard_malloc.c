/*
 * shim/guard_malloc.c - libheapkit-guard.so: malloc, free, calloc, realloc,
 * the aligned allocators and malloc_usable_size on the guard heap, for
 * LD_PRELOAD (the `heapkit guard` command sets it up).
 *
 * Configuration comes from the environment (read once, at the first
 * allocation or at load, whichever is first): the HEAPKIT_GUARD_* options
 * of shim/options.h, where each is declared with its default and help
 * (`heapkit env` lists them; `heapkit guard --help` shows their flags).
 *
 * Leak check: at exit, in the process that loaded the library (a child
 * forked without exec is not leak-checked; its blocks are its parent's).
 *
 * Two runs: with HEAPKIT_GUARD_TWIN (set by `heapkit guard`), the
 * constructor forks the second run (shim/guard_twin.c).
 *
 * Exit status: a fault or misuse report aborts (SIGABRT) by default; with
 * HEAPKIT_GUARD_ABORT=0, and always for leaks and damage found at exit, the
 * process ends with HEAPKIT_GUARD_EXITCODE instead of its own status.
 *
 * Under an address-space limit (ulimit -v) the heap reserves what the limit
 * allows (one line on stderr says how much); when not even 16 MiB can be
 * had, the process exits with status 125 before main, saying so: a program
 * the user asked to check never runs unchecked.
 *
 * Bootstrapping: malloc can be called before this library's constructor
 * (by other constructors) and from inside its own initialization (the
 * unwinder loading libgcc_s, dlsym). Calls made while this thread is
 * initializing are served from a static bump arena; frees of those blocks
 * are ignored. Calls that re-enter the heap from inside it are served
 * unguarded (hk_guard_alloc_unguarded), which takes no lock.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "heapkit/guard.h"
#include "guard_twin.h"
#include "options.h"
#include "track.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t a, size_t n);

#define SHIM_BOOT_SIZE    (1u << 20)
#define SHIM_UNINIT       0
#define SHIM_INITIALIZING 1
#define SHIM_READY        2
#define SHIM_FAILED       3

static _Alignas(64) unsigned char shim_boot[SHIM_BOOT_SIZE];
static size_t shim_boot_used;
static int shim_state;
static hk_guard *shim_heap;
static int shim_leaks = 1;
static int shim_exitcode = 23;
static int shim_log_fd; /* HEAPKIT_GUARD_LOG's descriptor (0: none, reports on stderr) */
static pid_t shim_pid;  /* the process that created the heap (forked children are not leak-checked) */
static _Thread_local int shim_busy __attribute__((tls_model("initial-exec")));

/* ---- bootstrap arena ------------------------------------------------------- */

static int shim_is_boot(const void *p) {
    return (const unsigned char *)p >= shim_boot && (const unsigned char *)p < shim_boot + SHIM_BOOT_SIZE;
}

static void *shim_boot_alloc(size_t n, size_t align) {
    if (align < 16) align = 16;
    if (n > SHIM_BOOT_SIZE) return NULL;
    size_t cur = __atomic_load_n(&shim_boot_used, __ATOMIC_RELAXED);
    for (;;) {
        size_t start = (cur + 16 + align - 1) & ~(align - 1);
        size_t end = start + ((n + 15) & ~(size_t)15);
        if (end > SHIM_BOOT_SIZE) return NULL;
        if (__atomic_compare_exchange_n(&shim_boot_used, &cur, end, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            memcpy(shim_boot + start - sizeof(size_t), &n, sizeof n);
            return shim_boot + start;
        }
    }
}

static size_t shim_boot_size(const void *p) {
    size_t n;
    memcpy(&n, (const unsigned char *)p - sizeof(size_t), sizeof n);
    return n;
}

/* ---- configuration ------------------------------------------------------------- */

static int shim_open_log(const char *path) {
    char buf[512];
    size_t o = 0;
    for (const char *s = path; *s && o + 24 < sizeof buf; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            char num[16];
            int k = 0;
            unsigned v = (unsigned)getpid();
            do {
                num[k++] = (char)('0' + v % 10);
                v /= 10;
            } while (v);
            while (k) buf[o++] = num[--k];
            s++;
        } else {
            buf[o++] = *s;
        }
    }
    buf[o] = 0;
    return open(buf, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

/* Exit status when no guard heap can be had at all (before main). */
#define SHIM_EXIT_NO_HEAP 125

/* Errors of hk_guard_create (HK_FLAG_QUIET): the shim prints its own lines. */
static void shim_on_create_error(const hk_error *e, void *user) {
    (void)e;
    (void)user;
}

static void shim_fork_prepare(void) { hk_guard_fork_prepare(shim_heap); }
static void shim_fork_parent(void) { hk_guard_fork_parent(shim_heap); }
static void shim_fork_child(void) { hk_guard_fork_child(shim_heap); }

static void shim_create(void) {
    hk_guard_desc d;
    memset(&d, 0, sizeof d);
    d.name = "preload";
    d.flags = HK_GUARD_REPORT | HK_GUARD_FAULT_HANDLER | HK_FLAG_QUIET;
    if (hk_opt_bool(HK_OPT_GUARD_ABORT)) d.flags |= HK_GUARD_ABORT;
    if (!hk_opt_bool(HK_OPT_GUARD_SYMBOLIZE)) d.flags |= HK_GUARD_NO_SYMBOLIZE_LINES;
    if (!hk_opt_bool(HK_OPT_GUARD_FILL)) d.flags |= HK_GUARD_NO_FILL;
    if (hk_opt_bool(HK_OPT_GUARD_DISCARD)) d.flags |= HK_GUARD_DISCARD_FREED;
    if (hk_opt_bool(HK_OPT_GUARD_EXACT_STACKS)) d.flags |= HK_GUARD_EXACT_STACKS;
    if (hk_opt_bool(HK_OPT_GUARD_FAST_REUSE)) d.flags |= HK_GUARD_FAST_REUSE;
    const char *side = hk_opt_get(HK_OPT_GUARD_SIDE);
    if (strcmp(side, "start") == 0)
        d.side = HK_GUARD_SIDE_START;
    else if (strcmp(side, "random") == 0)
        d.side = HK_GUARD_SIDE_RANDOM;
    d.align = hk_opt_number(HK_OPT_GUARD_ALIGN);
    d.align_min = hk_opt_number(HK_OPT_GUARD_ALIGN_MIN);
    if (d.align && d.align_min > d.align) d.align_min = d.align; /* --exact with --align-min: exact wins */
    d.quarantine_bytes = hk_opt_number(HK_OPT_GUARD_QUARANTINE);
    if (d.quarantine_bytes == 0) d.quarantine_bytes = 1; /* "0": none (0 in the desc means the default) */
    d.quarantine_blocks = hk_opt_number(HK_OPT_GUARD_QUARANTINE_BLOCKS);
    d.sample_rate = (uint32_t)hk_opt_number(HK_OPT_GUARD_SAMPLE);
    d.max_guarded = hk_opt_number(HK_OPT_GUARD_MAX_GUARDED);
    size_t frames = hk_opt_number(HK_OPT_GUARD_FRAMES);
    d.frames = frames > HK_GUARD_MAX_FRAMES ? HK_GUARD_MAX_FRAMES : (int)frames;
    d.reserve = hk_opt_number(HK_OPT_GUARD_RESERVE);
    d.seed = (uint64_t)(unsigned)getpid() * 0x9E3779B97F4A7C15ull;
    d.backing.malloc = __libc_malloc;
    d.backing.free = __libc_free;
    d.backing.realloc = __libc_realloc;
    d.backing.memalign = __libc_memalign;
    /* glibc's, not ours (override.inc defines malloc_usable_size too) */
    void *mus = dlsym(RTLD_NEXT, "malloc_usable_size");
    if (mus) memcpy(&d.backing.usable_size, &mus, sizeof mus);
    if (d.sample_rate > 1 && d.backing.usable_size && hk_opt_bool(HK_OPT_GUARD_PLAIN))
        d.flags |= HK_GUARD_PLAIN_UNGUARDED;
    const char *log = hk_opt_get(HK_OPT_GUARD_LOG);
    if (log && *log) {
        int fd = shim_open_log(log);
        if (fd > 2) d.report_fd = shim_log_fd = fd;
    }
    const char *leaks = hk_opt_get(HK_OPT_GUARD_LEAKS);
    shim_leaks = strcmp(leaks, "all") == 0 ? 2 : leaks[0] != '0';
    shim_exitcode = (int)hk_opt_number(HK_OPT_GUARD_EXITCODE);

    shim_pid = getpid();
    hk__track_off(); /* this is malloc: the tools see its calls (src/track.h) */
    d.on_error = shim_on_create_error;
    shim_heap = hk_guard_create(&d);
    if (!shim_heap) {
        /* Never run the program unchecked when checking was asked for. */
        static const char msg[] =
            "heapkit guard: cannot create the guard heap (the OS refused even 16 MiB of "
            "address space: see `ulimit -v`); not running the program unchecked\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(SHIM_EXIT_NO_HEAP);
    }
    hk_guard_info info;
    if (hk_guard_get_info(shim_heap, &info) == HK_OK && d.reserve && info.reserve_size < d.reserve) {
        char line[200];
        int k =
            snprintf(line, sizeof line,
                     "heapkit guard: address space limited (ulimit -v): %zu MiB reserved for guarded blocks "
                     "instead of %zu MiB\n",
                     info.reserve_size >> 20, d.reserve >> 20);
        if (k > 0) {
            ssize_t w = write(d.report_fd ? d.report_fd : 2, line,
                              (size_t)k < sizeof line ? (size_t)k : sizeof line - 1);
            (void)w;
        }
    }
    __atomic_store_n(&shim_state, SHIM_READY, __ATOMIC_RELEASE);
    pthread_atfork(shim_fork_prepare, shim_fork_parent, shim_fork_child);
}

/* Returns the heap, or NULL when the caller must use the bootstrap arena
 * (this thread is initializing) or glibc (creation failed). */
static hk_guard *shim_get(void) {
    int st = __atomic_load_n(&shim_state, __ATOMIC_ACQUIRE);
    if (st == SHIM_READY) return shim_heap;
    if (st == SHIM_FAILED) return NULL;
    if (shim_busy) return NULL; /* our own initialization allocating */
    int expect = SHIM_UNINIT;
    if (__atomic_compare_exchange_n(&shim_state, &expect, SHIM_INITIALIZING, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
        shim_busy = 1;
        shim_create();
        shim_busy = 0;
    } else {
        while (__atomic_load_n(&shim_state, __ATOMIC_ACQUIRE) == SHIM_INITIALIZING) sched_yield();
    }
    return __atomic_load_n(&shim_state, __ATOMIC_ACQUIRE) == SHIM_READY ? shim_heap : NULL;
}

static void shim_at_exit(void) {
    hk_guard *g = shim_get();
    if (!g) return;
    shim_busy = 1;
    /* A child forked without exec holds a copy of its parent's blocks: the
     * parent reports those, not each child. */
    if (shim_leaks && getpid() == shim_pid)
        hk_guard_leaks(g, shim_leaks == 2 ? HK_GUARD_LEAKS_ALL : HK_GUARD_LEAKS_UNREACHABLE, NULL);
    else
        (void)hk_guard_check_padding(g); /* damage to live blocks is reported whether or not leaks are */
    shim_busy = 0;
    if (hk_guard_report_count(g) > 0) {
        fflush(NULL);
        _exit(shim_exitcode);
    }
}

/* glibc passes constructors main's arguments and environment. */
__attribute__((constructor(101))) static void shim_ctor(int argc, char **argv, char **envp) {
    (void)argc;
    (void)argv;
    if (!shim_get()) return;
    /* `heapkit guard`'s default: the second run forks from here */
    if (hk__twin_start(shim_heap, shim_log_fd, envp)) shim_leaks = 0;
    atexit(shim_at_exit);
}

/* ---- the backend of override.inc ------------------------------------------------ */

static void *shim_malloc(size_t n) {
    hk_guard *g = shim_get();
    if (!g) {
        if (__atomic_load_n(&shim_state, __ATOMIC_ACQUIRE) == SHIM_FAILED) return __libc_malloc(n);
        return shim_boot_alloc(n, 16);
    }
    if (shim_busy) return hk_guard_alloc_unguarded(g, n);
    shim_busy = 1;
    void *p = hk_guard_alloc(g, n);
    shim_busy = 0;
    return p;
}

static void shim_free(void *p) {
    if (shim_is_boot(p)) return;
    hk_guard *g = shim_get();
    if (!g) {
        __libc_free(p);
        return;
    }
    int was = shim_busy;
    shim_busy = 1;
    hk_guard_free(g, p);
    shim_busy = was;
}

static size_t shim_usable_size(void *p) {
    if (shim_is_boot(p)) return shim_boot_size(p);
    hk_guard *g = shim_get();
    if (!g) return 0;
    return hk_guard_usable_size(g, p);
}

static void *shim_realloc(void *p, size_t n) {
    if (shim_is_boot(p)) {
        void *q = shim_malloc(n);
        if (q) {
            size_t old = shim_boot_size(p);
            memcpy(q, p, old < n ? old : n);
        }
        return q;
    }
    hk_guard *g = shim_get();
    if (!g) return __libc_realloc(p, n);
    if (shim_busy) {
        void *q = hk_guard_alloc_unguarded(g, n);
        if (q) {
            size_t old = hk_guard_usable_size(g, p);
            memcpy(q, p, old < n ? old : n);
            hk_guard_free(g, p);
        }
        return q;
    }
    shim_busy = 1;
    void *q = hk_guard_realloc(g, p, n);
    shim_busy = 0;
    return q;
}

static void *shim_memalign(size_t a, size_t n) {
    hk_guard *g = shim_get();
    if (!g) {
        if (__atomic_load_n(&shim_state, __ATOMIC_ACQUIRE) == SHIM_FAILED) return __libc_memalign(a, n);
        return shim_boot_alloc(n, a);
    }
    if (shim_busy) return a <= 16 ? hk_guard_alloc_unguarded(g, n) : shim_boot_alloc(n, a);
    shim_busy = 1;
    void *p = hk_guard_alloc_aligned(g, a, n);
    shim_busy = 0;
    return p;
}

#include "override.inc"
