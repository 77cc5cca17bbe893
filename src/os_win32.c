/*
 * src/os_win32.c - the host layer on Windows: pages (VirtualAlloc,
 * VirtualProtect, VirtualFree), page size and allocation granularity
 * (GetSystemInfo), the monotonic clocks (QueryPerformanceCounter,
 * GetTickCount64), process helpers, address-space queries (VirtualQuery),
 * SRWLOCK mutexes and thread-exit callbacks (FLS). See src/os.h; stack
 * capture, faults and symbolization are in os_win32_*.c, the failure point
 * and what else does not depend on the OS in os_common.c.
 *
 * Invariants: nothing here calls malloc; every page acquisition (reserve,
 * alloc, commit, protect to an accessible protection, map_own of
 * accessible pages) asks the failure point (hk_os_fail_now) first. Thread
 * exit callbacks run while the thread's _Thread_local variables are still
 * there (see "Thread exit" below). A
 * reservation is one VirtualAlloc region: hk_os_release of its whole
 * extent from its base releases it (MEM_RELEASE); any other range is
 * decommitted and its address space stays reserved. Pages are either
 * reserved (inaccessible, no memory) or committed with the protection last
 * set; making a range accessible commits it (committing committed pages
 * keeps their contents), making it inaccessible keeps it committed.
 */
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN 1
#endif
#include "internal.h"

#include <io.h>
#include <windows.h>

#include <psapi.h>
#ifdef HK_WIN32_PTHREAD_EXIT
#include <pthread.h>
#endif

/* ---- the public names -------------------------------------------------------- */

size_t hk_page_size(void) { return hk_os_page_size(); }
uint64_t hk_now_ns(void) { return hk_os_now_ns(); }

/* ---- pages ----------------------------------------------------------------------- */

static size_t g_page_size, g_granularity;
static uintptr_t g_addr_lo, g_addr_hi; /* the application's address space */

static void os_sysinfo(void) {
    SYSTEM_INFO si;
    GetSystemInfo(&si);
    g_addr_lo = (uintptr_t)si.lpMinimumApplicationAddress;
    g_addr_hi = (uintptr_t)si.lpMaximumApplicationAddress;
    __atomic_store_n(&g_granularity, si.dwAllocationGranularity ? (size_t)si.dwAllocationGranularity : 65536u,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&g_page_size, si.dwPageSize ? (size_t)si.dwPageSize : 4096u, __ATOMIC_RELEASE);
}

size_t hk_os_page_size(void) {
    size_t ps = __atomic_load_n(&g_page_size, __ATOMIC_ACQUIRE);
    if (ps == 0) {
        os_sysinfo();
        ps = g_page_size;
    }
    return ps;
}

size_t hk_os_alloc_granularity(void) {
    (void)hk_os_page_size();
    return __atomic_load_n(&g_granularity, __ATOMIC_RELAXED);
}

static bool round_pages(size_t size, size_t *out) {
    return size != 0 && hk_size_align(size, hk_os_page_size(), out);
}

static bool page_range_ok(const void *p, size_t size) {
    return p != NULL && ((uintptr_t)p % hk_os_page_size()) == 0 && size != 0;
}

void *hk_os_reserve(size_t size) {
    size_t len;
    if (!round_pages(size, &len) || hk_os_fail_now()) return NULL;
    return VirtualAlloc(NULL, len, MEM_RESERVE, PAGE_NOACCESS);
}

void *hk_os_reserve_rw(size_t size) {
    (void)size; /* committed memory is charged when committed: reserve, then commit */
    return NULL;
}

void *hk_os_alloc(size_t size) {
    size_t len;
    if (!round_pages(size, &len) || hk_os_fail_now()) return NULL;
    return VirtualAlloc(NULL, len, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

static DWORD to_native(hk_prot prot) {
    switch (prot) {
    case HK_PROT_NONE: return PAGE_NOACCESS;
    case HK_PROT_READ: return PAGE_READONLY;
    case HK_PROT_READ_WRITE: return PAGE_READWRITE;
    }
    return PAGE_NOACCESS;
}

static hk_result os_error(void) {
    DWORD e = GetLastError();
    return (e == ERROR_NOT_ENOUGH_MEMORY || e == ERROR_COMMITMENT_LIMIT || e == ERROR_OUTOFMEMORY)
               ? HK_ERR_NOMEM
               : HK_ERR_INVALID;
}

/* Makes the committed pages of [p, p+len) inaccessible; reserved ones are
 * already (VirtualProtect refuses a range that holds any). */
static hk_result os_noaccess(void *p, size_t len) {
    DWORD old;
    if (VirtualProtect(p, len, PAGE_NOACCESS, &old)) return HK_OK;
    unsigned char *at = (unsigned char *)p, *end = at + len;
    while (at < end) {
        MEMORY_BASIC_INFORMATION mi;
        if (VirtualQuery(at, &mi, sizeof mi) != sizeof mi || mi.State == MEM_FREE) return HK_ERR_INVALID;
        unsigned char *rend = (unsigned char *)mi.BaseAddress + mi.RegionSize;
        if (rend > end) rend = end;
        if (mi.State == MEM_COMMIT && !VirtualProtect(at, (size_t)(rend - at), PAGE_NOACCESS, &old))
            return HK_ERR_INVALID;
        at = rend;
    }
    return HK_OK;
}

/* Commits [p, p+len) with prot (committed pages keep their contents). */
static hk_result os_commit(void *p, size_t len, DWORD prot) {
    return VirtualAlloc(p, len, MEM_COMMIT, prot) == p ? HK_OK : os_error();
}

hk_result hk_os_protect(void *p, size_t size, hk_prot prot) {
    size_t len;
    if (!page_range_ok(p, size) || !round_pages(size, &len)) return HK_ERR_INVALID;
    if (prot == HK_PROT_NONE) return os_noaccess(p, len);
    if (hk_os_fail_now()) return HK_ERR_NOMEM; /* an acquisition */
    return os_commit(p, len, to_native(prot));
}

hk_result hk_os_commit(void *p, size_t size) {
    size_t len;
    if (!page_range_ok(p, size) || !round_pages(size, &len)) return HK_ERR_INVALID;
    if (hk_os_fail_now()) return HK_ERR_NOMEM;
    return os_commit(p, len, PAGE_READWRITE);
}

hk_result hk_os_decommit(void *p, size_t size) {
    size_t len;
    if (!page_range_ok(p, size) || !round_pages(size, &len)) return HK_ERR_INVALID;
    return VirtualFree(p, len, MEM_DECOMMIT) ? HK_OK : HK_ERR_INVALID;
}

hk_result hk_os_unback(void *p, size_t size) {
    size_t len;
    if (!page_range_ok(p, size) || !round_pages(size, &len)) return HK_ERR_INVALID;
    /* decommit then commit: fresh zero pages on the next touch, the range
     * readable and writable throughout the caller's view */
    if (!VirtualFree(p, len, MEM_DECOMMIT)) return HK_ERR_INVALID;
    return os_commit(p, len, PAGE_READWRITE) == HK_OK ? HK_OK : HK_ERR_INVALID;
}

/* Imports are bound when the image loads: nothing to prepare. */
void hk_os_unback_prepare(void) {}

hk_result hk_os_prefault(void *p, size_t size) {
    size_t len;
    if (!page_range_ok(p, size) || !round_pages(size, &len)) return HK_ERR_INVALID;
    /* committed pages are backed (the commit charge): touch each one now,
     * keeping what it holds */
    size_t page = hk_os_page_size();
    for (size_t o = 0; o < len; o += page) {
        volatile unsigned char *c = (volatile unsigned char *)p + o;
        *c = *c;
    }
    return HK_OK;
}

/* The extent of the reservation that starts at base (0 when base starts none). */
static size_t os_reservation_size(void *base) {
    size_t total = 0;
    unsigned char *at = (unsigned char *)base;
    for (;;) {
        MEMORY_BASIC_INFORMATION mi;
        if (VirtualQuery(at, &mi, sizeof mi) != sizeof mi || mi.AllocationBase != base ||
            mi.State == MEM_FREE)
            return total;
        total += mi.RegionSize;
        at += mi.RegionSize;
    }
}

void hk_os_release(void *p, size_t size) {
    size_t len;
    if (!p || !round_pages(size, &len)) return;
    MEMORY_BASIC_INFORMATION mi;
    if (VirtualQuery(p, &mi, sizeof mi) != sizeof mi || mi.State == MEM_FREE) return;
    if (mi.AllocationBase == p && len >= os_reservation_size(p)) {
        (void)VirtualFree(p, 0, MEM_RELEASE);
        return;
    }
    (void)VirtualFree(p, len, MEM_DECOMMIT); /* part of a reservation: its memory goes back */
}

hk_result hk_os_discard(void *p, size_t n) {
    if (!page_range_ok(p, n)) return HK_ERR_INVALID;
    return VirtualFree(p, n, MEM_DECOMMIT) ? HK_OK : HK_ERR_NOMEM;
}

hk_result hk_os_map_own(void *p, size_t n, int rw) {
    if (!page_range_ok(p, n)) return HK_ERR_INVALID;
    if (!rw) return VirtualFree(p, n, MEM_DECOMMIT) ? HK_OK : HK_ERR_NOMEM;
    if (hk_os_fail_now()) return HK_ERR_NOMEM; /* an acquisition */
    /* fresh pages: drop what was there, then commit zero pages */
    (void)VirtualFree(p, n, MEM_DECOMMIT);
    return os_commit(p, n, PAGE_READWRITE) == HK_OK ? HK_OK : HK_ERR_NOMEM;
}

hk_result hk_os_guard_install(void *p, size_t n) {
    (void)p;
    (void)n;
    return HK_ERR_UNSUPPORTED; /* guard pages are separate protections here */
}

hk_result hk_os_guard_install_many(void *const *at, size_t count, size_t n) {
    (void)at;
    (void)count;
    (void)n;
    return HK_ERR_UNSUPPORTED;
}

/* Residency from the working set (QueryWorkingSetEx: one entry per page,
 * asked 64 pages at a time); where the system cannot tell, committed pages
 * count as resident (the caller then scans more, never less). */
int hk_os_resident(void *p, size_t n, unsigned char *vec) {
    size_t ps = hk_os_page_size();
    size_t np = (n + ((uintptr_t)p & (ps - 1)) + ps - 1) / ps;
    uintptr_t first = (uintptr_t)p & ~(uintptr_t)(ps - 1);
    bool ws_ok = true;
    for (size_t done = 0; done < np && ws_ok;) {
        PSAPI_WORKING_SET_EX_INFORMATION ws[64];
        size_t k = np - done > 64 ? 64 : np - done;
        for (size_t i = 0; i < k; i++) {
            memset(&ws[i], 0, sizeof ws[i]);
            ws[i].VirtualAddress = (void *)(first + (done + i) * ps);
        }
        if (!K32QueryWorkingSetEx(GetCurrentProcess(), ws, (DWORD)(k * sizeof ws[0]))) {
            ws_ok = false;
            break;
        }
        for (size_t i = 0; i < k; i++) vec[done + i] = ws[i].VirtualAttributes.Valid ? 1 : 0;
        done += k;
    }
    if (ws_ok) return 0;
    unsigned char *at = (unsigned char *)((uintptr_t)p & ~(uintptr_t)(ps - 1));
    unsigned char *end = (unsigned char *)p + n;
    size_t i = 0;
    while (at < end) {
        MEMORY_BASIC_INFORMATION mi;
        if (VirtualQuery(at, &mi, sizeof mi) != sizeof mi) return -1;
        unsigned char *rend = (unsigned char *)mi.BaseAddress + mi.RegionSize;
        unsigned char bit = mi.State == MEM_COMMIT ? 1 : 0;
        for (; at < rend && at < end; at += ps) vec[i++] = bit;
    }
    return 0;
}

static bool os_prot_readable(DWORD prot) {
    if (prot & (PAGE_GUARD | PAGE_NOACCESS)) return false;
    return (prot & (PAGE_READONLY | PAGE_READWRITE | PAGE_WRITECOPY | PAGE_EXECUTE_READ |
                    PAGE_EXECUTE_READWRITE | PAGE_EXECUTE_WRITECOPY)) != 0;
}

int hk_os_readable(const void *p, size_t n) {
    if (n > 64) n = 64;
    if (n == 0) n = 1;
    const unsigned char *at = (const unsigned char *)p, *end = at + n;
    if (end < at) return 0;
    while (at < end) {
        MEMORY_BASIC_INFORMATION mi;
        if (VirtualQuery(at, &mi, sizeof mi) != sizeof mi) return 0;
        if (mi.State != MEM_COMMIT || !os_prot_readable(mi.Protect)) return 0;
        at = (const unsigned char *)mi.BaseAddress + mi.RegionSize;
    }
    return 1;
}

/* ---- clock and process -------------------------------------------------------------- */

static uint64_t g_qpc_freq;

uint64_t hk_os_now_ns(void) {
    uint64_t f = __atomic_load_n(&g_qpc_freq, __ATOMIC_RELAXED);
    if (f == 0) {
        LARGE_INTEGER fr;
        f = QueryPerformanceFrequency(&fr) && fr.QuadPart > 0 ? (uint64_t)fr.QuadPart : 1000000000u;
        __atomic_store_n(&g_qpc_freq, f, __ATOMIC_RELAXED);
    }
    LARGE_INTEGER c;
    QueryPerformanceCounter(&c);
    uint64_t t = (uint64_t)c.QuadPart;
    return t / f * 1000000000ull + (t % f) * 1000000000ull / f;
}

uint64_t hk_os_coarse_ns(void) { return (uint64_t)GetTickCount64() * 1000000u; }

int hk_os_getpid(void) { return (int)GetCurrentProcessId(); }

void hk_os_write(int fd, const char *buf, size_t n) {
    HANDLE h = INVALID_HANDLE_VALUE;
    if (fd >= 0) h = (HANDLE)_get_osfhandle(fd);
    if ((h == INVALID_HANDLE_VALUE || h == NULL) && (fd == 1 || fd == 2))
        h = GetStdHandle(fd == 1 ? STD_OUTPUT_HANDLE : STD_ERROR_HANDLE);
    if (h == INVALID_HANDLE_VALUE || h == NULL) return;
    while (n > 0) {
        DWORD chunk = n > 0x40000000u ? 0x40000000u : (DWORD)n, w = 0;
        if (!WriteFile(h, buf, chunk, &w, NULL) || w == 0) return;
        buf += w;
        n -= w;
    }
}

/* ---- the address space ---------------------------------------------------------------- */

/* Windows has no cap on the number of mappings: the Linux default keeps
 * the guard heap's budget of guarded blocks the same on both. */
size_t hk_os_max_map_count(void) { return 65530; }

/* The number of allocations (reservations, images, views), each counted
 * once however many regions of different protections it holds. */
size_t hk_os_map_count(void) {
    (void)hk_os_page_size();
    size_t count = 0;
    uintptr_t at = g_addr_lo;
    void *last = NULL;
    while (at < g_addr_hi) {
        MEMORY_BASIC_INFORMATION mi;
        if (VirtualQuery((const void *)at, &mi, sizeof mi) != sizeof mi || mi.RegionSize == 0) break;
        if (mi.State != MEM_FREE && mi.AllocationBase != last) count++;
        last = mi.State != MEM_FREE ? mi.AllocationBase : NULL;
        at = (uintptr_t)mi.BaseAddress + mi.RegionSize;
    }
    return count;
}

static bool os_prot_writable(DWORD prot) {
    if (prot & (PAGE_GUARD | PAGE_NOACCESS)) return false;
    return (prot & (PAGE_READWRITE | PAGE_WRITECOPY | PAGE_EXECUTE_READWRITE | PAGE_EXECUTE_WRITECOPY)) != 0;
}

int hk_os_writable_ranges(hk_os_range_fn fn, void *user) {
    (void)hk_os_page_size();
    int count = 0;
    uintptr_t at = g_addr_lo, lo = 0, hi = 0; /* [lo, hi): the run of writable regions being merged */
    uintptr_t my_top = hk_os_wine_caller_top();
    void *cur_alloc = NULL;
    bool cur_skip = false;
    while (at < g_addr_hi) {
        MEMORY_BASIC_INFORMATION mi;
        if (VirtualQuery((const void *)at, &mi, sizeof mi) != sizeof mi || mi.RegionSize == 0) break;
        uintptr_t b = (uintptr_t)mi.BaseAddress, e = b + mi.RegionSize;
        /* private memory and the modules' data sections; not views of
         * files, nor Wine's per-thread kernel stacks (os_win32_world.c) */
        if (mi.AllocationBase != cur_alloc) { /* once per allocation */
            cur_alloc = mi.AllocationBase;
            cur_skip = hk_os_wine_kernel_stack(cur_alloc, my_top);
        }
        int keep = mi.State == MEM_COMMIT && (mi.Type == MEM_PRIVATE || mi.Type == MEM_IMAGE) &&
                   os_prot_writable(mi.Protect) && !cur_skip;
        if (keep && hi == b) {
            hi = e;
        } else {
            if (hi > lo) {
                fn(lo, hi, user);
                count++;
            }
            lo = keep ? b : 0;
            hi = keep ? e : 0;
        }
        at = e;
    }
    if (hi > lo) {
        fn(lo, hi, user);
        count++;
    }
    return count;
}

/* ---- threads ----------------------------------------------------------------------- */

_Static_assert(sizeof(SRWLOCK) <= sizeof(hk_os_mutex), "hk_os_mutex holds an SRWLOCK");

void hk_os_mutex_init(hk_os_mutex *m) { InitializeSRWLock((PSRWLOCK)(void *)m); }
void hk_os_mutex_destroy(hk_os_mutex *m) { (void)m; /* an SRWLOCK holds no resource */ }
void hk_os_mutex_lock(hk_os_mutex *m) { AcquireSRWLockExclusive((PSRWLOCK)(void *)m); }
void hk_os_mutex_unlock(hk_os_mutex *m) { ReleaseSRWLockExclusive((PSRWLOCK)(void *)m); }
void hk_os_mutex_lock_hook(void *m) { AcquireSRWLockExclusive((PSRWLOCK)m); }
void hk_os_mutex_unlock_hook(void *m) { ReleaseSRWLockExclusive((PSRWLOCK)m); }

/* Thread exit: one FLS index whose callback runs the functions this thread
 * armed. The FLS value itself is the mask of armed functions (bit 8 always
 * set, so it is never NULL: Windows runs callbacks for non-NULL values
 * only), so the callback itself needs no thread-local variable.
 *
 * But the functions do (the zone's and the guard's per-thread state). With
 * native TLS (MSVC, clang) it outlives the FLS callbacks. GCC on MinGW-w64
 * emulates TLS (libgcc's emutls), and with the posix thread model frees a
 * thread's variables from a winpthreads key destructor, before FLS
 * callbacks run: HK_WIN32_PTHREAD_EXIT (set by CMake for that compiler)
 * uses a winpthreads key instead, made by a constructor before any
 * emulated variable exists, so its destructor runs first (winpthreads runs
 * destructors in key order). */
#define OS_EXIT_FNS 8
#define OS_EXIT_SET 0x100u
static void (*os_exit_fns[OS_EXIT_FNS])(void);
static DWORD os_exit_index = FLS_OUT_OF_INDEXES;
static INIT_ONCE os_exit_once = INIT_ONCE_STATIC_INIT;

static void WINAPI os_exit_run(void *value) {
    unsigned armed = (unsigned)(uintptr_t)value;
    if (os_exit_index != FLS_OUT_OF_INDEXES && FlsGetValue(os_exit_index))
        (void)FlsSetValue(os_exit_index, NULL);
    for (int i = 0; i < OS_EXIT_FNS; i++)
        if (armed & (1u << i)) {
            void (*fn)(void) = __atomic_load_n(&os_exit_fns[i], __ATOMIC_ACQUIRE);
            if (fn) fn();
        }
}

#ifdef HK_WIN32_PTHREAD_EXIT
static pthread_key_t os_exit_pkey;
static int os_exit_pkey_ok;
static void os_exit_run_key(void *value) { os_exit_run(value); }
__attribute__((constructor(101))) static void os_exit_pkey_init(void) {
    os_exit_pkey_ok = pthread_key_create(&os_exit_pkey, os_exit_run_key) == 0;
}
#endif

static BOOL CALLBACK os_exit_index_init(PINIT_ONCE once, void *param, void **ctx) {
    (void)once;
    (void)param;
    (void)ctx;
    os_exit_index = FlsAlloc(os_exit_run);
    return TRUE;
}

hk_result hk_os_on_thread_exit(void (*fn)(void)) {
    int slot = hk_os_fn_slot(os_exit_fns, OS_EXIT_FNS, fn);
    if (slot < 0) return HK_ERR_NOMEM;
#ifdef HK_WIN32_PTHREAD_EXIT
    if (os_exit_pkey_ok) {
        unsigned set = (unsigned)(uintptr_t)pthread_getspecific(os_exit_pkey);
        if (set & (1u << slot)) return HK_OK;
        set |= OS_EXIT_SET | (1u << slot);
        return pthread_setspecific(os_exit_pkey, (void *)(uintptr_t)set) == 0 ? HK_OK : HK_ERR_NOMEM;
    }
#endif
    (void)InitOnceExecuteOnce(&os_exit_once, os_exit_index_init, NULL, NULL);
    if (os_exit_index == FLS_OUT_OF_INDEXES) return HK_ERR_NOMEM;
    unsigned armed = (unsigned)(uintptr_t)FlsGetValue(os_exit_index);
    if (armed & (1u << slot)) return HK_OK;
    armed |= OS_EXIT_SET | (1u << slot);
    return FlsSetValue(os_exit_index, (void *)(uintptr_t)armed) ? HK_OK : HK_ERR_NOMEM;
}
