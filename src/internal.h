/*
 * src/internal.h - machinery shared by heapkit's allocators and not part of
 * the public API: error reporting, lock hooks, sanitizer awareness and
 * internal assertions. Names here use the `hk__` prefix. It includes the
 * host layer (os.h), so every module sees the hk_os_* functions.
 */
#ifndef HEAPKIT_INTERNAL_H
#define HEAPKIT_INTERNAL_H

#include "heapkit/heapkit.h"
#include "os.h"

#include <stdarg.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define HK__LIKELY(x)   __builtin_expect(!!(x), 1)
#define HK__UNLIKELY(x) __builtin_expect(!!(x), 0)
#if defined(_WIN32)
#define HK__PRINTF(f, a)                                                                                     \
    __attribute__((format(gnu_printf, f, a))) /* MinGW's C99 printf (__USE_MINGW_ANSI_STDIO) */
#else
#define HK__PRINTF(f, a) __attribute__((format(printf, f, a)))
#endif
#define HK__NOINLINE __attribute__((noinline))
#define HK__UNUSED   __attribute__((unused))
#else
#define HK__LIKELY(x)   (x)
#define HK__UNLIKELY(x) (x)
#define HK__PRINTF(f, a)
#define HK__NOINLINE
#define HK__UNUSED
#endif

/* ------------------------------------------------------------------------ */
/* Error reporting                                                           */
/* ------------------------------------------------------------------------ */

/* What an instance needs to report misuse: its hook, its names, its flags,
 * and a counter to bump (the error_count of its stats). */
typedef struct hk__reporter {
    hk_error_fn fn;
    void *user;
    const char *allocator;
    const char *instance;
    uint32_t flags;
    uint64_t error_count;
} hk__reporter;

/* Sets up a reporter from an instance's desc fields: its hook, names and
 * flags (`name` NULL means the allocator's own name). */
static inline void hk__reporter_init(hk__reporter *r, const char *allocator, const char *name, hk_error_fn fn,
                                     void *user, uint32_t flags) {
    r->fn = fn;
    r->user = user;
    r->allocator = allocator;
    r->instance = name ? name : allocator;
    r->flags = flags;
    r->error_count = 0;
}

/* Builds the one-line message from fmt (the detail, after the common
 * "<allocator> '<instance>': <kind>" prefix), bumps error_count and calls
 * the instance's hook, or the default handler unless HK_FLAG_QUIET.
 * Does not allocate. Returns `result` so callers can `return hk__report(...)`. */
hk_result hk__report(hk__reporter *rep, hk_result result, hk_error_kind kind, const void *address,
                     size_t size, const char *block_name, const char *fmt, ...) HK__PRINTF(7, 8);

/* ------------------------------------------------------------------------ */
/* Lock hooks                                                                */
/* ------------------------------------------------------------------------ */

static inline void hk__lock(const hk_lock_hooks *h) {
    if (h->lock) h->lock(h->user);
}
static inline void hk__unlock(const hk_lock_hooks *h) {
    if (h->unlock) h->unlock(h->user);
}

/* ------------------------------------------------------------------------ */
/* Assertions                                                                */
/* ------------------------------------------------------------------------ */

void hk__assert_fail(const char *expr, const char *file, int line);
#if HK_DEBUG >= 2
#define HK__ASSERT(e) ((e) ? (void)0 : hk__assert_fail(#e, __FILE__, __LINE__))
#else
#define HK__ASSERT(e) ((void)0)
#endif

/* ------------------------------------------------------------------------ */
/* Sanitizer awareness                                                       */
/* ------------------------------------------------------------------------ */
/*
 * Allocators call these so AddressSanitizer and Valgrind keep working on
 * programs that use heapkit:
 *   hk__san_alloc(p, n, zeroed)  a user block [p, p+n) was handed out
 *   hk__san_free(p, n)           the user block at p was given back
 *   hk__san_noaccess(p, n)       bytes the user must not touch (free space, padding)
 *   hk__san_access(p, n)         the allocator itself is about to use these bytes
 *                                (free-list links inside free space, fill checks)
 * Without a sanitizer they compile to nothing.
 */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HK__ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(HK__ASAN)
#define HK__ASAN 1
#endif

#ifdef HK__ASAN
#include <sanitizer/asan_interface.h>
#endif
/* A function ASan does not check: the allocator's own reads and writes of
 * words inside poisoned free space. Only in ASan builds, where GCC and
 * clang then call it rather than inline it into checked code. */
#ifdef HK__ASAN
#define HK__NO_ASAN __attribute__((no_sanitize_address))
#else
#define HK__NO_ASAN
#endif

#if !defined(HK_NO_VALGRIND) && defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define HK__VALGRIND 1
#endif
#endif

static inline void hk__san_alloc(const void *p, size_t n, int zeroed) {
#ifdef HK__ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
#ifdef HK__VALGRIND
    VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, zeroed);
#endif
    (void)p;
    (void)n;
    (void)zeroed;
}
static inline void hk__san_free(const void *p, size_t n) {
#ifdef HK__ASAN
    ASAN_POISON_MEMORY_REGION(p, n);
#endif
#ifdef HK__VALGRIND
    VALGRIND_FREELIKE_BLOCK(p, 0);
#endif
    (void)p;
    (void)n;
}
static inline void hk__san_resize(const void *p, size_t old_n, size_t new_n) {
#ifdef HK__ASAN
    if (new_n > old_n)
        ASAN_UNPOISON_MEMORY_REGION((const char *)p + old_n, new_n - old_n);
    else
        ASAN_POISON_MEMORY_REGION((const char *)p + new_n, old_n - new_n);
#endif
#ifdef HK__VALGRIND
    VALGRIND_RESIZEINPLACE_BLOCK(p, old_n, new_n, 0);
#endif
    (void)p;
    (void)old_n;
    (void)new_n;
}
static inline void hk__san_noaccess(const void *p, size_t n) {
#ifdef HK__ASAN
    ASAN_POISON_MEMORY_REGION(p, n);
#endif
#ifdef HK__VALGRIND
    VALGRIND_MAKE_MEM_NOACCESS(p, n);
#endif
    (void)p;
    (void)n;
}
static inline void hk__san_access(const void *p, size_t n) {
#ifdef HK__ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
#ifdef HK__VALGRIND
    VALGRIND_MAKE_MEM_DEFINED(p, n);
#endif
    (void)p;
    (void)n;
}

/* ASan-only poisoning, for allocator metadata (headers, canaries) that
 * Valgrind should keep treating as ordinary memory. */
static inline void hk__asan_poison(const void *p, size_t n) {
#ifdef HK__ASAN
    ASAN_POISON_MEMORY_REGION(p, n);
#endif
    (void)p;
    (void)n;
}
static inline void hk__asan_unpoison(const void *p, size_t n) {
#ifdef HK__ASAN
    ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
    (void)p;
    (void)n;
}

#if defined(__SANITIZE_THREAD__)
#define HK__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HK__TSAN 1
#endif
#endif

/* Functions that read memory no sanitizer tracks (conservative scans). */
#if defined(HK__TSAN) && (defined(__GNUC__) || defined(__clang__))
#define HK__NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define HK__NO_TSAN
#endif

/* True when built with ThreadSanitizer (tests that count page faults or
 * scan raw memory skip what its shadow memory changes). */
static inline int hk__tsan_enabled(void) {
#ifdef HK__TSAN
    return 1;
#else
    return 0;
#endif
}

/* True when built with AddressSanitizer (tests use it to skip what ASan owns). */
static inline int hk__asan_enabled(void) {
#ifdef HK__ASAN
    return 1;
#else
    return 0;
#endif
}

/* ------------------------------------------------------------------------ */
/* Windows: %p as on POSIX                                                   */
/* ------------------------------------------------------------------------ */
/* The C runtimes of Windows print %p as 16 hex digits without "0x"; the
 * library's messages and reports read the same everywhere ("0x21dad8"):
 * on Windows snprintf and vsnprintf in the library's sources go through
 * these, which print each %p as MinGW's %#p (os_common.c). */
#ifdef _WIN32
#include <stdio.h>
int hk__snprintf(char *buf, size_t n, const char *fmt, ...) HK__PRINTF(3, 4);
int hk__vsnprintf(char *buf, size_t n, const char *fmt, va_list ap) HK__PRINTF(3, 0);
#undef snprintf
#undef vsnprintf
#define snprintf  hk__snprintf
#define vsnprintf hk__vsnprintf
#endif

#endif /* HEAPKIT_INTERNAL_H */
