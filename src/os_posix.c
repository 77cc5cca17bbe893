/*
 * src/os_posix.c - the only file in heapkit that talks to the operating
 * system: pages (mmap/mprotect/madvise), the monotonic clock, stack capture
 * and symbolization.
 *
 * Invariant: nothing here calls malloc, except the unwinder's first use
 * (glibc's backtrace loads libgcc_s); hk_os_stack_init() forces that early.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

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

static bool round_pages(size_t size, size_t *out) {
    return size != 0 && hk_size_align(size, hk_os_page_size(), out);
}

void *hk_os_reserve(size_t size) {
    size_t len;
    if (!round_pages(size, &len)) return NULL;
    void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void *hk_os_alloc(size_t size) {
    size_t len;
    if (!round_pages(size, &len)) return NULL;
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

hk_result hk_os_protect(void *p, size_t size, hk_prot prot) {
    size_t len;
    if (!page_range_ok(p, size) || !round_pages(size, &len)) return HK_ERR_INVALID;
    return mprotect(p, len, to_native(prot)) == 0 ? HK_OK : (errno == ENOMEM ? HK_ERR_NOMEM : HK_ERR_INVALID);
}

hk_result hk_os_commit(void *p, size_t size) { return hk_os_protect(p, size, HK_PROT_READ_WRITE); }

hk_result hk_os_decommit(void *p, size_t size) {
    size_t len;
    if (!page_range_ok(p, size) || !round_pages(size, &len)) return HK_ERR_INVALID;
    /* MADV_DONTNEED on private anonymous memory drops the pages: they read
     * as zero afterwards. Then make the range inaccessible. */
    if (madvise(p, len, MADV_DONTNEED) != 0) return HK_ERR_INVALID;
    return mprotect(p, len, PROT_NONE) == 0 ? HK_OK : HK_ERR_INVALID;
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

uint64_t hk_os_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void hk_os_stack_init(void) {
    void *frames[2];
    (void)backtrace(frames, 2);
}

HK__NOINLINE int hk_os_stack_capture(void **frames, int max, int skip) {
    void *tmp[128];
    if (max <= 0 || !frames) return 0;
    if (skip < 0) skip = 0;
    int want = max + skip + 1;
    if (want > 128) want = 128;
    int n = backtrace(tmp, want);
    int first = skip + 1; /* our own frame */
    int out = 0;
    for (int i = first; i < n && out < max; i++) frames[out++] = tmp[i];
    return out;
}

size_t hk_os_symbolize(const void *addr, char *buf, size_t n) {
    Dl_info info;
    int w;
    if (!buf || n == 0) return 0;
    if (dladdr(addr, &info) && info.dli_sname) {
        uintptr_t off = (uintptr_t)addr - (uintptr_t)info.dli_saddr;
        w = snprintf(buf, n, "%s+0x%lx (%s)", info.dli_sname, (unsigned long)off,
                     info.dli_fname ? info.dli_fname : "?");
    } else if (dladdr(addr, &info) && info.dli_fname) {
        uintptr_t off = (uintptr_t)addr - (uintptr_t)info.dli_fbase;
        w = snprintf(buf, n, "%p (%s+0x%lx)", addr, info.dli_fname, (unsigned long)off);
    } else {
        w = snprintf(buf, n, "%p", addr);
    }
    if (w < 0) {
        buf[0] = 0;
        return 0;
    }
    return (size_t)w < n ? (size_t)w : n - 1;
}
