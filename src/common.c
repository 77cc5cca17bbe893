/*
 * src/common.c - the instance core (src/common.h): results, error kinds, the
 * one error reporter, core initialisation and validation, the paranoid
 * after-op check, the fill / canary compare.
 *
 * Invariants: hk__report never allocates and never fails; a message longer
 * than its buffer is truncated, not dropped. A core that hk__core_init
 * accepted has both lock hooks or neither, and both backing hooks set.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

int hk_version(void) { return HK_VERSION; }

const char *hk_result_str(hk_result r) {
    switch (r) {
    case HK_OK: return "ok";
    case HK_ERR_INVALID: return "invalid argument";
    case HK_ERR_NOMEM: return "out of memory";
    case HK_ERR_CORRUPT: return "heap corrupted";
    case HK_ERR_STALE: return "stale ID or handle";
    case HK_ERR_FOREIGN: return "foreign pointer, ID or handle";
    case HK_ERR_DOUBLE_FREE: return "double free";
    case HK_ERR_LOCKED: return "block is locked";
    case HK_ERR_OVERFLOW: return "size overflow";
    case HK_ERR_UNSUPPORTED: return "unsupported";
    case HK_ERR_STATE: return "not allowed in this state";
    }
    return "unknown result";
}

const char *hk_error_kind_str(hk_error_kind kind) {
    static const char *const names[HK_EK_COUNT] = {
        [HK_EK_NONE] = "no error",
        [HK_EK_NOMEM] = "out of memory",
        [HK_EK_INVALID_ARG] = "invalid argument",
        [HK_EK_OVERFLOW] = "size overflow",
        [HK_EK_DOUBLE_FREE] = "double free",
        [HK_EK_FOREIGN_PTR] = "foreign pointer",
        [HK_EK_INTERIOR_PTR] = "interior pointer",
        [HK_EK_STALE] = "stale ID or handle",
        [HK_EK_CORRUPT_HEADER] = "damaged header",
        [HK_EK_CORRUPT_CANARY] = "damaged canary",
        [HK_EK_CORRUPT_FREE] = "write after free",
        [HK_EK_CORRUPT_STRUCTURE] = "damaged structure",
        [HK_EK_LOCKED] = "block is locked",
        [HK_EK_STATE] = "invalid state",
        [HK_EK_HEAP_OVERFLOW] = "heap overflow",
        [HK_EK_HEAP_UNDERFLOW] = "heap underflow",
        [HK_EK_USE_AFTER_FREE] = "use after free",
        [HK_EK_LEAK] = "leak",
    };
    if ((unsigned)kind >= (unsigned)HK_EK_COUNT || !names[kind]) return "unknown error";
    return names[kind];
}

static hk_error_fn g_default_fn;
static void *g_default_user;

void hk_set_default_error_handler(hk_error_fn fn, void *user) {
    g_default_fn = fn;
    g_default_user = user;
}

static void print_error(const hk_error *err) {
    /* One write so concurrent reports do not interleave mid-line. */
    fprintf(stderr, "heapkit: %s\n", err->message);
    fflush(stderr);
}

hk_result hk__report(hk__reporter *rep, hk_result result, hk_error_kind kind, const void *address,
                     size_t size, const char *block_name, const char *fmt, ...) {
    char msg[512];
    int n;
    const char *alloc = rep && rep->allocator ? rep->allocator : "heapkit";
    if (rep && rep->instance)
        n = snprintf(msg, sizeof msg, "%s '%s': %s", alloc, rep->instance, hk_error_kind_str(kind));
    else
        n = snprintf(msg, sizeof msg, "%s: %s", alloc, hk_error_kind_str(kind));
    if (n < 0) n = 0;
    if ((size_t)n < sizeof msg && fmt && fmt[0]) {
        va_list ap;
        va_start(ap, fmt);
        msg[n++] = ':';
        if ((size_t)n < sizeof msg) msg[n++] = ' ';
        if ((size_t)n < sizeof msg)
            vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
        else
            msg[sizeof msg - 1] = 0;
        va_end(ap);
    }
    msg[sizeof msg - 1] = 0;

    hk_error err;
    err.result = result;
    err.kind = kind;
    err.allocator = alloc;
    err.instance = rep ? rep->instance : NULL;
    err.address = address;
    err.size = size;
    err.block_name = block_name;
    err.message = msg;
    if (rep) rep->error_count++;
    if (rep && rep->fn)
        rep->fn(&err, rep->user);
    else if (!rep || !(rep->flags & HK_FLAG_QUIET)) {
        if (g_default_fn)
            g_default_fn(&err, g_default_user);
        else
            print_error(&err);
    }
    return result;
}

void hk__assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "heapkit: internal assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}

void hk_fill(void *p, size_t n, unsigned b) { memset(p, (int)(b & 0xffu), n); }

/* Reference runs of the three fill patterns: a long compare against one is
 * a memcmp, which the C library does with its widest vector code. */
#define FILL_R4(x)   x, x, x, x
#define FILL_R16(x)  FILL_R4(x), FILL_R4(x), FILL_R4(x), FILL_R4(x)
#define FILL_R64(x)  FILL_R16(x), FILL_R16(x), FILL_R16(x), FILL_R16(x)
#define FILL_R256(x) FILL_R64(x), FILL_R64(x), FILL_R64(x), FILL_R64(x)
#define FILL_R1K(x)  FILL_R256(x), FILL_R256(x), FILL_R256(x), FILL_R256(x)
#define FILL_R4K(x)  FILL_R1K(x), FILL_R1K(x), FILL_R1K(x), FILL_R1K(x)
#define FILL_REF     4096u /* a page: a guard block's padding in one memcmp */
#define FILL_REF_MIN 64u   /* shorter compares stay in the word loop */
static const unsigned char fill_ref_pad[FILL_REF] = {FILL_R4K(HK_FILL_PAD)};
static const unsigned char fill_ref_free[FILL_REF] = {FILL_R4K(HK_FILL_FREE)};
static const unsigned char fill_ref_alloc[FILL_REF] = {FILL_R4K(HK_FILL_ALLOC)};

/* The word loop: offset of the first byte of [c, c+n) that is not `want`,
 * or n. The common case is "all equal" (a canary or padding checked on
 * every free in debug modes): OR the differences of 32-byte blocks
 * together with no branch per word, and locate the bad byte only in the
 * block that has one. */
static inline size_t fill_scan(const unsigned char *c, size_t n, unsigned char want) {
    const uint64_t pat = 0x0101010101010101ull * want;
    size_t i = 0;
    while (i + 32 <= n) {
        uint64_t w[4];
        memcpy(w, c + i, sizeof w);
        if (((w[0] ^ pat) | (w[1] ^ pat) | (w[2] ^ pat) | (w[3] ^ pat)) != 0) break;
        i += 32;
    }
    while (i + 8 <= n) {
        uint64_t w;
        memcpy(&w, c + i, 8);
        if (w != pat) break;
        i += 8;
    }
    while (i < n) {
        if (c[i] != want) return i;
        i++;
    }
    return n;
}

/* n >= FILL_REF_MIN: memcmp against a reference run in FILL_REF-byte steps
 * (the common case, all equal, never leaves memcmp); the word loop locates
 * the bad byte in the step that has one. */
static HK__NOINLINE size_t fill_find_long(const unsigned char *c, size_t n, unsigned char want) {
    const unsigned char *ref = want == HK_FILL_PAD     ? fill_ref_pad
                               : want == HK_FILL_FREE  ? fill_ref_free
                               : want == HK_FILL_ALLOC ? fill_ref_alloc
                                                       : NULL;
    if (!ref) return fill_scan(c, n, want);
    for (size_t i = 0; i < n;) {
        size_t k = n - i < FILL_REF ? n - i : FILL_REF;
        if (memcmp(c + i, ref, k) != 0) return i + fill_scan(c + i, k, want);
        i += k;
    }
    return n;
}

size_t hk__fill_find(const void *p, size_t n, unsigned b) {
    const unsigned char want = (unsigned char)(b & 0xffu);
    if (HK__UNLIKELY(n >= FILL_REF_MIN)) return fill_find_long((const unsigned char *)p, n, want);
    return fill_scan((const unsigned char *)p, n, want);
}

size_t hk_fill_check(const void *p, size_t n, unsigned b) { return hk__fill_find(p, n, b); }

/* ---- the instance core ------------------------------------------------------------ */

static void *core_default_alloc(size_t size, void *user) {
    (void)user;
    return malloc(size);
}
static void core_default_free(void *ptr, size_t size, void *user) {
    (void)size;
    (void)user;
    free(ptr);
}

hk_result hk__core_init(hk__core *c, const char *allocator, const char *name, uint32_t flags,
                        hk_error_fn on_error, void *error_user, const hk_lock_hooks *lock,
                        const hk_alloc_hooks *backing, hk__check_fn check, void *self) {
    memset(c, 0, sizeof *c);
    hk__reporter_init(&c->rep, allocator, name, on_error, error_user, flags);
    c->flags = flags;
    c->check = check;
    c->self = self;
    c->paranoid = check && ((flags & HK_FLAG_PARANOID) || HK_DEBUG >= 3);
    if (lock) {
        if ((lock->lock == NULL) != (lock->unlock == NULL))
            return hk__report(&c->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL,
                              "lock hooks need both lock and unlock, or neither (%s is missing)",
                              lock->lock ? "unlock" : "lock");
        c->lock = *lock;
        c->locked_hooks = lock->lock != NULL;
    }
    c->track = (uint8_t)hk__track_tools();
    if (c->track) c->locked_hooks = true; /* every call on the announcing (locked) paths */
    c->backing.alloc = core_default_alloc;
    c->backing.free = core_default_free;
    if (backing) {
        if ((backing->alloc == NULL) != (backing->free == NULL))
            return hk__report(&c->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL,
                              "backing hooks need both alloc and free, or neither (%s is missing)",
                              backing->alloc ? "free" : "alloc");
        if (backing->alloc) c->backing = *backing;
    }
    return HK_OK;
}

void hk__core_lock_slow(const hk__core *c) {
    if (c->lock.lock) c->lock.lock(c->lock.user);
    if (c->track) hk__track_enter(c);
}

void hk__core_unlock_slow(const hk__core *c) {
    if (c->track) hk__track_leave(c);
    if (c->lock.unlock) c->lock.unlock(c->lock.user);
}

void hk__core_paranoid_check(hk__core *c) {
    if (c->check) (void)c->check(c->self);
}

void hk_print_file(const char *text, void *user) {
    FILE *f = user ? (FILE *)user : stdout;
    fputs(text, f);
}
