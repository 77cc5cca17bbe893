/*
 * src/common.h - the instance core: what every heapkit allocator embeds.
 *
 * One mechanism for each concern every allocator shares, so that they agree
 * at the edges:
 *   - the instance's names, error hook and error count (the reporter),
 *   - lock hooks, validated once (both lock and unlock, or neither),
 *   - desc flags, and whether the paranoid after-op check runs
 *     (HK_FLAG_PARANOID, or HK_DEBUG >= 3),
 *   - the allocator's own full check, run by hk__core_after() after every
 *     mutating call when paranoid,
 *   - the backing-memory hooks (hk_alloc_hooks), validated once and
 *     defaulting to the C library,
 *   - one fill / canary compare (hk__fill_find, word at a time),
 *   - which tools (Valgrind, heaptrack, Tracy) hear of the instance's
 *     blocks (`track`, src/track.h).
 *
 * An allocator embeds `hk__core core;` in its instance, calls
 * HK__CORE_INIT(&x->core, "name", desc, check_fn, x) first in its create
 * function (which refuses a bad desc with a report), brackets public calls
 * with hk__core_lock/unlock, and ends each mutating call with
 * hk__core_after(&x->core).
 */
#ifndef HEAPKIT_COMMON_H
#define HEAPKIT_COMMON_H

#include "internal.h"

typedef hk_result (*hk__check_fn)(void *self);

typedef struct hk__core {
    hk__reporter rep;       /* allocator and instance names, hook, flags, error_count */
    hk_lock_hooks lock;     /* both set or both NULL */
    uint32_t flags;         /* the desc's flags */
    bool paranoid;          /* run `check` after every mutating call */
    bool locked_hooks;      /* public calls go through hk__core_lock: lock hooks, or a tool on (track) */
    hk__check_fn check;     /* the allocator's full check (may be NULL) */
    void *self;             /* argument for check */
    hk_alloc_hooks backing; /* backing memory: both set (defaults filled in) */
    uint8_t track;          /* tools told about this instance's blocks (HK__TRACK_*, src/track.h) */
} hk__core;

#include "track.h"

/* Initialises the core from the fields every desc carries. Validates the
 * lock hooks (both or neither) and the backing hooks (both or neither;
 * NULL backing means no backing hooks in this allocator's desc, and the C
 * library is used). A refusal is reported through on_error (kind
 * HK_EK_INVALID_ARG) and returned as HK_ERR_INVALID; the caller's create
 * then returns NULL. Never allocates. */
hk_result hk__core_init(hk__core *c, const char *allocator, const char *name, uint32_t flags,
                        hk_error_fn on_error, void *error_user, const hk_lock_hooks *lock,
                        const hk_alloc_hooks *backing, hk__check_fn check, void *self);

/* The common call for a desc with the usual fields (name, flags, on_error,
 * error_user, lock). */
#define HK__CORE_INIT(core, allocator, desc, check, self)                                                    \
    hk__core_init((core), (allocator), (desc)->name, (desc)->flags, (desc)->on_error, (desc)->error_user,    \
                  &(desc)->lock, NULL, (check), (self))

/* Lock hooks and a tool's bracket of the allocator's own code (src/track.h):
 * one predictable branch when there are neither. */
void hk__core_lock_slow(const hk__core *c);
void hk__core_unlock_slow(const hk__core *c);
static inline void hk__core_lock(const hk__core *c) {
    if (HK__UNLIKELY(c->locked_hooks)) hk__core_lock_slow(c);
}
static inline void hk__core_unlock(const hk__core *c) {
    if (HK__UNLIKELY(c->locked_hooks)) hk__core_unlock_slow(c);
}

/* Installs the instance's own mutex as its lock hooks (a zone or guard
 * made for threads, when the desc gave none). */
static inline void hk__core_set_lock(hk__core *c, void (*lock)(void *), void (*unlock)(void *), void *user) {
    c->lock.lock = lock;
    c->lock.unlock = unlock;
    c->lock.user = user;
    c->locked_hooks = true;
}

/* Runs the allocator's full check when the instance is paranoid; the check
 * reports what it finds itself. Call it after a mutating call, inside the
 * lock. Cheap (one predictable branch) when not paranoid. */
void hk__core_paranoid_check(hk__core *c);
static inline void hk__core_after(hk__core *c) {
    if (HK__UNLIKELY(c->paranoid)) hk__core_paranoid_check(c);
}

/* Backing memory through the instance's hooks. alloc returns NULL on
 * failure; free takes the size given to alloc. */
static inline void *hk__core_backing_alloc(const hk__core *c, size_t n) {
    return c->backing.alloc(n, c->backing.user);
}
static inline void hk__core_backing_free(const hk__core *c, void *p, size_t n) {
    if (p) c->backing.free(p, n, c->backing.user);
}

/* The one fill / canary compare: offset of the first byte of [p, p+n) that
 * is not the byte b, or n when all are. Word at a time, with a branch-free
 * vectorizable scan for the common all-equal case; O(n). hk_fill_check (the
 * public name) is the same function. */
size_t hk__fill_find(const void *p, size_t n, unsigned b);
static inline bool hk__fill_ok(const void *p, size_t n, unsigned b) { return hk__fill_find(p, n, b) == n; }

#endif /* HEAPKIT_COMMON_H */
