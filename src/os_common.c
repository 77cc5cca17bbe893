/*
 * src/os_common.c - the parts of the host layer that do not depend on the
 * operating system, shared by the POSIX (os_posix*.c) and Windows
 * (os_win32*.c) hosts: the out-of-memory failure point, the x86-64 access-size decoder and the
 * frame-pointer walk the fault handlers use, the fault callbacks' registry,
 * the lock-free slot claim of the thread-exit tables, and on Windows the
 * snprintf that prints %p as POSIX does (internal.h). See src/os.h.
 *
 * Invariants: nothing here calls malloc, the OS, or a host file (the
 * hosts call this file, never the other way: no loop in the file graph);
 * every page acquisition of a host asks hk_os_fail_now first; a one-shot
 * point is disarmed (countdown back to 0) by the acquisition it fails, a
 * persistent one stays at 1 (every acquisition fails) until disarmed; the
 * random point draws acquisition k's verdict from splitmix64(seed + k).
 */
#include "internal.h"

/* ---- the failure point ---------------------------------------------------------- */

static uint64_t os_fail_countdown; /* 0: disarmed; k: the k-th next acquisition fails */
static int os_fail_persistent;     /* and, once it fired, every one after it */
static uint64_t os_fail_total;

void hk_os_fail_after(uint64_t n, bool persistent) {
    __atomic_store_n(&os_fail_persistent, persistent ? 1 : 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&os_fail_countdown, n, __ATOMIC_SEQ_CST);
}

uint64_t hk_os_fail_count(void) { return __atomic_load_n(&os_fail_total, __ATOMIC_RELAXED); }

static uint32_t os_fail_per_million; /* the random point: 0 disarmed */
static uint64_t os_fail_seed;
static uint64_t os_fail_draws; /* acquisitions seen since it was armed */

void hk_os_fail_random(uint32_t per_million, uint64_t seed) {
    __atomic_store_n(&os_fail_per_million, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&os_fail_seed, seed, __ATOMIC_SEQ_CST);
    __atomic_store_n(&os_fail_draws, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&os_fail_per_million, per_million > 1000000u ? 1000000u : per_million, __ATOMIC_SEQ_CST);
}

static bool os_fail_draw(uint32_t pm) {
    uint64_t x = __atomic_load_n(&os_fail_seed, __ATOMIC_RELAXED) +
                 0x9E3779B97F4A7C15ull * (__atomic_add_fetch(&os_fail_draws, 1, __ATOMIC_RELAXED));
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull; /* splitmix64's finalizer */
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    if (x % 1000000u >= pm) return false;
    __atomic_add_fetch(&os_fail_total, 1, __ATOMIC_RELAXED);
    return true;
}

/* True when this acquisition must fail. Two relaxed loads when disarmed. */
bool hk_os_fail_now(void) {
    uint32_t pm = __atomic_load_n(&os_fail_per_million, __ATOMIC_RELAXED);
    if (HK__UNLIKELY(pm != 0) && os_fail_draw(pm)) return true;
    uint64_t k = __atomic_load_n(&os_fail_countdown, __ATOMIC_RELAXED);
    while (HK__UNLIKELY(k != 0)) {
        uint64_t next = k - 1;
        if (k == 1 && __atomic_load_n(&os_fail_persistent, __ATOMIC_RELAXED)) next = 1;
        if (__atomic_compare_exchange_n(&os_fail_countdown, &k, next, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            if (k != 1) return false;
            __atomic_add_fetch(&os_fail_total, 1, __ATOMIC_RELAXED);
            return true;
        }
    }
    return false;
}

/* ---- fault helpers ---------------------------------------------------------------- */

/* Operand size in bytes of the memory access of the x86-64 instruction at
 * pc, for the common integer and SSE moves, ALU and string instructions;
 * 0 when not decoded (VEX/EVEX encodings, x87, anything unusual). */
int hk_os_x86_access_size(const unsigned char *pc) {
    int opsize16 = 0, rexw = 0, rep = 0, i = 0;
    for (; i < 14; i++) { /* legacy prefixes */
        unsigned char b = pc[i];
        if (b == 0x66)
            opsize16 = 1;
        else if (b == 0xF2 || b == 0xF3)
            rep = b;
        else if (b == 0xF0 || b == 0x2E || b == 0x36 || b == 0x3E || b == 0x26 || b == 0x64 || b == 0x65 ||
                 b == 0x67)
            continue;
        else
            break;
    }
    if ((pc[i] & 0xF0) == 0x40) { /* REX */
        rexw = (pc[i] & 8) != 0;
        i++;
    }
    int osz = rexw ? 8 : opsize16 ? 2 : 4;
    unsigned char op = pc[i];
    if (op == 0x0F) {
        unsigned char op2 = pc[i + 1];
        if (op2 == 0xB6 || op2 == 0xBE) return 1; /* movzx / movsx from a byte */
        if (op2 == 0xB7 || op2 == 0xBF) return 2;
        if (op2 == 0x10 || op2 == 0x11) return rep == 0xF3 ? 4 : rep == 0xF2 ? 8 : 16; /* movss/sd/ups/upd */
        if (op2 == 0x28 || op2 == 0x29 || op2 == 0x6F || op2 == 0x7F || op2 == 0xE7 || op2 == 0x2B) return 16;
        if (op2 == 0x12 || op2 == 0x13 || op2 == 0x16 || op2 == 0x17 || op2 == 0xD6) return 8;
        if (op2 == 0x6E || op2 == 0x7E) return rep == 0xF3 ? 8 : rexw ? 8 : 4;
        if (op2 >= 0x40 && op2 <= 0x4F) return osz; /* cmovcc */
        if (op2 == 0xAF || op2 == 0xB0 || op2 == 0xB1 || op2 == 0xC0 || op2 == 0xC1)
            return (op2 == 0xB0 || op2 == 0xC0) ? 1 : osz;
        return 0;
    }
    if (op < 0x40 && (op & 7) < 4) return (op & 1) ? osz : 1; /* add/or/adc/sbb/and/sub/xor/cmp r/m */
    switch (op) {
    case 0x80:
    case 0x84:
    case 0x86:
    case 0x88:
    case 0x8A:
    case 0xC0:
    case 0xC6:
    case 0xD0:
    case 0xD2:
    case 0xF6:
    case 0xFE:
    case 0xA4:
    case 0xA6:
    case 0xAA:
    case 0xAC:
    case 0xAE: return 1;
    case 0x81:
    case 0x83:
    case 0x85:
    case 0x87:
    case 0x89:
    case 0x8B:
    case 0xC1:
    case 0xC7:
    case 0xD1:
    case 0xD3:
    case 0xF7:
    case 0xA5:
    case 0xA7:
    case 0xAB:
    case 0xAD:
    case 0xAF:
    case 0x63: return op == 0x63 ? 4 : osz;
    case 0xFF: return 8; /* push / call / jmp through memory (inc/dec: operand size) */
    case 0x8F: return 8;
    default: return 0;
    }
}

/* Walks the saved frame-pointer chain from bp, accepting only frames that
 * lie above sp, below sp + 64 MiB, in ascending order, and readable: the
 * callers of a function that crashed on a damaged stack, when the unwinder
 * found none. */
int hk_os_fp_walk(uintptr_t bp, uintptr_t sp, void **out, int max, int (*readable)(const void *p, size_t n)) {
    int n = 0;
    while (n < max && bp > sp && bp - sp < ((uintptr_t)64 << 20) && (bp & 7u) == 0 &&
           readable((const void *)bp, 16)) {
        uintptr_t next = ((const uintptr_t *)bp)[0], ret = ((const uintptr_t *)bp)[1];
        if (ret < 4096) break;
        out[n++] = (void *)ret;
        if (next <= bp) break;
        sp = bp;
        bp = next;
    }
    return n;
}

/* ---- the fault callbacks' registry ------------------------------------------------ */

#define OS_FAULT_MAX_FNS 8

typedef struct os_fault_cb {
    hk_os_fault_fn fn;
    void *user;
} os_fault_cb;

static os_fault_cb os_fault_cbs[OS_FAULT_MAX_FNS];
static int os_fault_ncbs;       /* entries below it are complete (release store) */
static int os_fault_installed;  /* the host's handler: 0 not yet, 1 tried */
static int os_fault_install_rc; /* what that try returned */
static int os_fault_lock;

hk_result hk_os_fault_cb_add(hk_os_fault_fn fn, void *user, int (*install)(void)) {
    if (!fn) return HK_ERR_INVALID;
    while (__atomic_exchange_n(&os_fault_lock, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&os_fault_lock, __ATOMIC_RELAXED)) {
        }
    hk_result r = HK_OK;
    int n = os_fault_ncbs, have = 0;
    for (int i = 0; i < n; i++)
        if (os_fault_cbs[i].fn == fn && os_fault_cbs[i].user == user) have = 1;
    if (!have) {
        if (n >= OS_FAULT_MAX_FNS) {
            r = HK_ERR_NOMEM;
        } else {
            os_fault_cbs[n].fn = fn;
            os_fault_cbs[n].user = user;
            __atomic_store_n(&os_fault_ncbs, n + 1, __ATOMIC_RELEASE);
        }
    }
    if (r == HK_OK && !os_fault_installed) {
        os_fault_installed = 1;
        os_fault_install_rc = install();
    }
    if (r == HK_OK && os_fault_install_rc != 0) r = HK_ERR_UNSUPPORTED;
    __atomic_store_n(&os_fault_lock, 0, __ATOMIC_RELEASE);
    return r;
}

void hk_os_fault_cb_run(const hk_os_fault *f) {
    int n = __atomic_load_n(&os_fault_ncbs, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if (os_fault_cbs[i].fn) os_fault_cbs[i].fn(f, os_fault_cbs[i].user); /* returns when not its fault */
}

/* ---- a slot in a table of functions ---------------------------------------------- */

int hk_os_fn_slot(void (**tab)(void), int n, void (*fn)(void)) {
    for (int i = 0; i < n; i++) {
        void (*cur)(void) = __atomic_load_n(&tab[i], __ATOMIC_ACQUIRE);
        if (cur == fn) return i;
        if (cur == NULL) {
            void (*expect)(void) = NULL;
            if (__atomic_compare_exchange_n(&tab[i], &expect, fn, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE) ||
                expect == fn)
                return i;
        }
    }
    return -1;
}

#ifdef _WIN32
/* ---- snprintf with POSIX %p ------------------------------------------------------ */

#undef snprintf
#undef vsnprintf

int hk__vsnprintf(char *buf, size_t n, const char *fmt, va_list ap) {
    char f[512]; /* fmt with each plain %p turned into %#p */
    size_t o = 0, len = strlen(fmt);
    if (len * 2 + 1 > sizeof f) return vsnprintf(buf, n, fmt, ap); /* never so long in heapkit */
    for (size_t i = 0; i < len; i++) {
        f[o++] = fmt[i];
        if (fmt[i] != '%') continue;
        if (fmt[i + 1] == '%') {
            f[o++] = fmt[++i];
            continue;
        }
        if (fmt[i + 1] == 'p') f[o++] = '#';
    }
    f[o] = 0;
    return vsnprintf(buf, n, f, ap);
}

int hk__snprintf(char *buf, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int r = hk__vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return r;
}
#endif
