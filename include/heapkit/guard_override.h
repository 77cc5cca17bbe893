/*
 * heapkit/guard_override.h - route a program's malloc family through one
 * guard heap, without LD_PRELOAD: what a Windows program does instead of
 * `heapkit guard -- prog` (docs/guard.md, docs/windows.md), and a way to
 * guard only some translation units anywhere.
 *
 * Use (C or C++):
 *   1. In every translation unit whose allocations should be guarded,
 *      compiled with -DHK_GUARD_OVERRIDE (or `#define HK_GUARD_OVERRIDE`
 *      first), include this header after the system headers:
 *          #include <stdlib.h>
 *          #include <heapkit/guard_override.h>
 *      malloc, calloc, realloc, free, strdup (and _strdup, _aligned_malloc,
 *      _aligned_free on Windows; aligned_alloc elsewhere) then expand to
 *      the hk_guard_override_* functions below.
 *   2. In exactly one translation unit of the program, define
 *      HK_GUARD_OVERRIDE_IMPLEMENT before including it: that unit holds the
 *      shared heap and the functions. For a whole build, add
 *      -DHK_GUARD_OVERRIDE to the compiler flags and one .c file with
 *          #define HK_GUARD_OVERRIDE_IMPLEMENT
 *          #include <heapkit/guard_override.h>
 *   3. Link heapkit (the static library or heapkit.dll).
 * Without HK_GUARD_OVERRIDE the header declares the functions and maps
 * nothing (so the implementing unit may itself be unguarded).
 *
 * The heap is created at the first allocation, with HK_GUARD_FAULT_HANDLER
 * | HK_GUARD_REPORT | HK_GUARD_ABORT (override with -DHK_GUARD_OVERRIDE_FLAGS=...):
 * an overrun, use after free or double free is reported (kind, read or
 * write, offset, allocation and free stacks) on stderr and stops the
 * program (on Windows the access violation then goes on to the debugger or
 * crash handler). Its reservation is HK_GUARD_OVERRIDE_RESERVE bytes (default
 * 1 GiB of address space).
 *
 * Rules: a block must be freed by the side that allocated it. Memory from
 * code not compiled with the override (the C runtime's own, other
 * libraries) must go back to the runtime's free, and guarded blocks must
 * not be freed there: hk_guard_override_free reports a pointer the heap
 * never returned as a foreign pointer. Thread-safe (the heap is created
 * once, atomically). Each call costs what the guard heap's call costs
 * (heapkit/guard.h: a page protection change per allocation and free).
 */
#ifndef HEAPKIT_GUARD_OVERRIDE_H
#define HEAPKIT_GUARD_OVERRIDE_H

#include "heapkit/guard.h"

#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The shared heap (created at the first call; NULL when it cannot be). */
hk_guard *hk_guard_override_heap(void);
/* malloc, calloc, realloc, free, strdup and an aligned allocation on that
 * heap, with the C library's contracts (NULL on failure, free(NULL) does
 * nothing, realloc(NULL, n) allocates, calloc checks n * size). */
void *hk_guard_override_malloc(size_t size);
void *hk_guard_override_calloc(size_t n, size_t size);
void *hk_guard_override_realloc(void *p, size_t size);
void hk_guard_override_free(void *p);
char *hk_guard_override_strdup(const char *s);
void *hk_guard_override_aligned(size_t align, size_t size);

#ifdef __cplusplus
}
#endif

#ifdef HK_GUARD_OVERRIDE_IMPLEMENT
#ifndef HK_GUARD_OVERRIDE_FLAGS
#define HK_GUARD_OVERRIDE_FLAGS (HK_GUARD_FAULT_HANDLER | HK_GUARD_REPORT | HK_GUARD_ABORT)
#endif
#ifndef HK_GUARD_OVERRIDE_RESERVE
#define HK_GUARD_OVERRIDE_RESERVE ((size_t)1 << 30)
#endif
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#define HK_GO_LOAD(p) ((hk_guard *)_InterlockedCompareExchangePointer((void *volatile *)(p), NULL, NULL))
#define HK_GO_CAS(p, old, nw)                                                                                \
    (_InterlockedCompareExchangePointer((void *volatile *)(p), (nw), (old)) == (old))
#else
#define HK_GO_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define HK_GO_CAS(p, old, nw)                                                                                \
    __atomic_compare_exchange_n((p), &(old), (nw), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
#endif
#ifdef __cplusplus
extern "C" {
#endif
static hk_guard *hk_guard_override_g;

hk_guard *hk_guard_override_heap(void) {
    hk_guard *g = HK_GO_LOAD(&hk_guard_override_g);
    if (g) return g;
    hk_guard_desc d;
    memset(&d, 0, sizeof d);
    d.reserve = HK_GUARD_OVERRIDE_RESERVE;
    d.flags = HK_GUARD_OVERRIDE_FLAGS;
    d.name = "guard_override";
    hk_guard *mine = hk_guard_create(&d);
    if (!mine) return NULL;
    hk_guard *none = NULL;
    if (HK_GO_CAS(&hk_guard_override_g, none, mine)) return mine;
    hk_guard_destroy(mine); /* another thread made it first */
    return HK_GO_LOAD(&hk_guard_override_g);
}
void *hk_guard_override_malloc(size_t size) {
    hk_guard *g = hk_guard_override_heap();
    return g ? hk_guard_alloc(g, size) : NULL;
}
void *hk_guard_override_calloc(size_t n, size_t size) {
    if (size && n > (size_t)-1 / size) return NULL;
    void *p = hk_guard_override_malloc(n * size);
    if (p) memset(p, 0, n * size);
    return p;
}
void *hk_guard_override_realloc(void *p, size_t size) {
    hk_guard *g = hk_guard_override_heap();
    return g ? hk_guard_realloc(g, p, size) : NULL;
}
void hk_guard_override_free(void *p) {
    if (p) (void)hk_guard_free(hk_guard_override_heap(), p);
}
char *hk_guard_override_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = (char *)hk_guard_override_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}
void *hk_guard_override_aligned(size_t align, size_t size) {
    hk_guard *g = hk_guard_override_heap();
    return g ? hk_guard_alloc_aligned(g, align, size) : NULL;
}
#ifdef __cplusplus
}
#endif
#undef HK_GO_LOAD
#undef HK_GO_CAS
#endif /* HK_GUARD_OVERRIDE_IMPLEMENT */

#ifdef HK_GUARD_OVERRIDE
#undef malloc
#undef calloc
#undef realloc
#undef free
#undef strdup
#define malloc(n)     hk_guard_override_malloc(n)
#define calloc(n, s)  hk_guard_override_calloc((n), (s))
#define realloc(p, n) hk_guard_override_realloc((p), (n))
#define free(p)       hk_guard_override_free(p)
#define strdup(s)     hk_guard_override_strdup(s)
#ifdef _WIN32
#undef _strdup
#undef _aligned_malloc
#undef _aligned_free
#define _strdup(s)            hk_guard_override_strdup(s)
#define _aligned_malloc(n, a) hk_guard_override_aligned((a), (n))
#define _aligned_free(p)      hk_guard_override_free(p)
#else
#undef aligned_alloc
#define aligned_alloc(a, n) hk_guard_override_aligned((a), (n))
#endif
#endif /* HK_GUARD_OVERRIDE */

#endif /* HEAPKIT_GUARD_OVERRIDE_H */
