/*
 * tests/hk_test.h - the small test framework every tests/test_*.c uses.
 *
 *   HKT_TEST(name) { ... CHECK(cond); CHECK_EQ(a, b); REQUIRE(cond); ... }
 *
 * Tests register themselves; main() (provided here, once per program) runs
 * them all, or those whose name contains argv[1], and ends with the line
 * "N passed, M failed". CHECK records a failure and goes on; REQUIRE
 * records it and ends the current test.
 *
 * hkt_errors collects on_error reports so tests can assert what was
 * reported: pass hkt_on_error / &errs as the desc's on_error / error_user.
 */
#ifndef HK_TEST_H
#define HK_TEST_H

#include <inttypes.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heapkit/heapkit.h"
#include "hk_test_win32.h" /* Windows: the POSIX calls the tests use */

typedef void (*hkt_fn)(void);
typedef struct hkt_case {
    const char *name;
    hkt_fn fn;
} hkt_case;

#define HKT_MAX_CASES 512
static hkt_case hkt_cases[HKT_MAX_CASES];
static int hkt_ncases;
static int hkt_cur_failed;
static int hkt_total_checks;
static jmp_buf hkt_jmp;

static void hkt_register(const char *name, hkt_fn fn) {
    if (hkt_ncases < HKT_MAX_CASES) {
        hkt_cases[hkt_ncases].name = name;
        hkt_cases[hkt_ncases].fn = fn;
        hkt_ncases++;
    }
}

#define HKT_TEST(name)                                                                                       \
    static void name(void);                                                                                  \
    __attribute__((constructor)) static void name##_hkt_reg(void) { hkt_register(#name, name); }             \
    static void name(void)

static void hkt_fail(const char *file, int line, const char *what) {
    printf("    FAIL %s:%d: %s\n", file, line, what);
    fflush(stdout);
    hkt_cur_failed++;
}

#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        hkt_total_checks++;                                                                                  \
        if (!(c)) hkt_fail(__FILE__, __LINE__, #c);                                                          \
    } while (0)
#define REQUIRE(c)                                                                                           \
    do {                                                                                                     \
        hkt_total_checks++;                                                                                  \
        if (!(c)) {                                                                                          \
            hkt_fail(__FILE__, __LINE__, #c);                                                                \
            longjmp(hkt_jmp, 1);                                                                             \
        }                                                                                                    \
    } while (0)
#define CHECK_EQ(a, b)                                                                                       \
    do {                                                                                                     \
        hkt_total_checks++;                                                                                  \
        long long hkt_a_ = (long long)(a), hkt_b_ = (long long)(b);                                          \
        if (hkt_a_ != hkt_b_) {                                                                              \
            char hkt_buf_[256];                                                                              \
            snprintf(hkt_buf_, sizeof hkt_buf_, "%s == %s (%lld != %lld)", #a, #b, hkt_a_, hkt_b_);          \
            hkt_fail(__FILE__, __LINE__, hkt_buf_);                                                          \
        }                                                                                                    \
    } while (0)
#define CHECK_STR_CONTAINS(hay, needle)                                                                      \
    do {                                                                                                     \
        hkt_total_checks++;                                                                                  \
        const char *hkt_h_ = (hay);                                                                          \
        if (!hkt_h_ || !strstr(hkt_h_, (needle))) {                                                          \
            char hkt_buf_[1400];                                                                             \
            snprintf(hkt_buf_, sizeof hkt_buf_, "\"%.600s\" contains \"%.600s\"",                            \
                     hkt_h_ ? hkt_h_ : "(null)", (needle));                                                  \
            hkt_fail(__FILE__, __LINE__, hkt_buf_);                                                          \
        }                                                                                                    \
    } while (0)

/* ---- error collection -------------------------------------------------- */

typedef struct hkt_errors {
    int count;
    hk_result last_result;
    hk_error_kind last_kind;
    const void *last_address;
    size_t last_size;
    char last_message[600];
    int quiet; /* do not print messages */
} hkt_errors;

/* This process's address space in use (VmSize), or 0 where /proc is not
 * there: the address-space-limit tests set RLIMIT_AS above it. */
__attribute__((unused)) static size_t hkt_vm_size(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

static void hkt_on_error(const hk_error *e, void *user) {
    hkt_errors *c = (hkt_errors *)user;
    c->count++;
    c->last_result = e->result;
    c->last_kind = e->kind;
    c->last_address = e->address;
    c->last_size = e->size;
    snprintf(c->last_message, sizeof c->last_message, "%s", e->message);
    if (!c->quiet && getenv("HKT_VERBOSE")) printf("    [report] %s\n", e->message);
}

static inline void hkt_errors_reset(hkt_errors *c) {
    int q = c->quiet;
    memset(c, 0, sizeof *c);
    c->quiet = q;
}

/* ---- counting lock hooks ------------------------------------------------- */
/* Lock hooks that count calls and nesting, for "every call takes the lock,
 * and releases it" tests: .lock = hkt_lock, .unlock = hkt_unlock. */
__attribute__((unused)) static int hkt_lock_depth, hkt_lock_max, hkt_lock_calls;
static inline void hkt_lock(void *u) {
    (void)u;
    hkt_lock_calls++;
    if (++hkt_lock_depth > hkt_lock_max) hkt_lock_max = hkt_lock_depth;
}
static inline void hkt_unlock(void *u) {
    (void)u;
    hkt_lock_depth--;
}

/* ---- runner ------------------------------------------------------------ */

/* Command line:
 *   (none)                 run every case
 *   SUBSTRING              run the cases whose name contains it
 *   --exact NAME           run the case named NAME (CTest runs each case so);
 *                          no such case is a failure (exit 2)
 *   --list                 print the case names, one per line
 *   --expect-cases N...    exit 0 only when the registered cases are exactly
 *                          the names given (CTest's registration check: the
 *                          names it found in the source are all there are) */
static int hkt_find_case(const char *name) {
    for (int i = 0; i < hkt_ncases; i++)
        if (strcmp(hkt_cases[i].name, name) == 0) return i;
    return -1;
}

static int hkt_run_all(int argc, char **argv) {
    volatile int passed = 0, failed = 0;
    const char *volatile filter = NULL;
    const char *volatile exact = NULL;
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < hkt_ncases; i++) printf("%s\n", hkt_cases[i].name);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--expect-cases") == 0) {
        int bad = 0;
        for (int a = 2; a < argc; a++)
            if (hkt_find_case(argv[a]) < 0) printf("case %s is not registered\n", argv[a]), bad = 1;
        for (int i = 0; i < hkt_ncases; i++) {
            int seen = 0;
            for (int a = 2; a < argc; a++) seen |= strcmp(argv[a], hkt_cases[i].name) == 0;
            if (!seen)
                printf("case %s has no CTest entry (HKT_TEST(name) must be written literally)\n",
                       hkt_cases[i].name),
                    bad = 1;
        }
        if (hkt_ncases >= HKT_MAX_CASES)
            printf("more than %d cases: raise HKT_MAX_CASES\n", HKT_MAX_CASES), bad = 1;
        printf("%d cases%s\n", hkt_ncases, bad ? ", registration differs" : ", all registered");
        return bad;
    }
    if (argc > 2 && strcmp(argv[1], "--exact") == 0) {
        exact = argv[2];
        if (hkt_find_case(exact) < 0) {
            printf("no test case named %s\n", exact);
            return 2;
        }
    } else if (argc > 1) {
        filter = argv[1];
    }
    for (volatile int i = 0; i < hkt_ncases; i++) {
        if (exact && strcmp(hkt_cases[i].name, exact) != 0) continue;
        if (filter && !strstr(hkt_cases[i].name, filter)) continue;
        hkt_cur_failed = 0;
        printf("  %s\n", hkt_cases[i].name);
        fflush(stdout);
        if (setjmp(hkt_jmp) == 0) hkt_cases[i].fn();
        if (hkt_cur_failed)
            failed++;
        else
            passed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

#ifndef HKT_NO_MAIN
int main(int argc, char **argv);
int main(int argc, char **argv) { return hkt_run_all(argc, argv); }
#endif

#endif /* HK_TEST_H */
