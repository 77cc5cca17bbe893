/* tests/fault_exit_prog.c - one guard heap bug per run, for the fault
 * tests that run on every host (tests/fault_exit.cmake; on Windows under
 * Wine): `fault_exit_prog <case>` makes a guard heap with the fault
 * handler and reports on stderr, commits the bug, and must not survive it:
 * the report, then a non-zero exit (SIGABRT on POSIX; on Windows the
 * access violation goes on to the crash handler, status 0xC0000005, or an
 * abort, status 3). Prints "survived" if it ever gets past the bug. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
#include "heapkit/guard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

static volatile unsigned char sink;

static NOINLINE void fault_overflow_write(hk_guard *g) {
    volatile unsigned char *p = hk_guard_alloc(g, 32);
    p[32] = 1;
}
static NOINLINE void fault_overflow_read(hk_guard *g) {
    volatile unsigned char *p = hk_guard_alloc(g, 48);
    sink = p[50];
}
static NOINLINE void fault_underflow_write(hk_guard *g) {
    volatile unsigned char *p = hk_guard_alloc(g, 20);
    p[-3] = 1;
}
static NOINLINE void fault_uaf_read(hk_guard *g) {
    volatile unsigned char *p = hk_guard_alloc(g, 100);
    hk_guard_free(g, (void *)(uintptr_t)p);
    sink = p[10];
}
static NOINLINE void fault_double_free(hk_guard *g) {
    void *p = hk_guard_alloc(g, 10);
    hk_guard_free(g, p);
    hk_guard_free(g, p);
}
static NOINLINE void fault_uninit_pointer(hk_guard *g) {
    struct node {
        struct node *next;
        int v;
    } *n = hk_guard_alloc(g, sizeof *n);
    struct node *next = *(struct node *volatile *)&n->next; /* never written: 0xcdcd... */
    sink = (unsigned char)next->v;
}
static NOINLINE void fault_clean(hk_guard *g) {
    for (int i = 0; i < 100; i++) hk_guard_free(g, hk_guard_alloc(g, (size_t)i * 10));
}

int main(int argc, char **argv) {
    static const struct {
        const char *name;
        void (*fn)(hk_guard *);
        hk_guard_side side;
        uint32_t flags;
    } cases[] = {
        {"overflow_write", fault_overflow_write, HK_GUARD_SIDE_END, 0},
        {"overflow_read", fault_overflow_read, HK_GUARD_SIDE_END, 0},
        {"underflow_write", fault_underflow_write, HK_GUARD_SIDE_START, 0},
        {"uaf_read", fault_uaf_read, HK_GUARD_SIDE_END, 0},
        {"double_free", fault_double_free, HK_GUARD_SIDE_END, HK_GUARD_ABORT},
        {"uninit_pointer", fault_uninit_pointer, HK_GUARD_SIDE_END, 0},
        {"clean", fault_clean, HK_GUARD_SIDE_END, 0},
    };
    if (argc != 2) {
        fprintf(stderr, "usage: fault_exit_prog <case>\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(argv[1], cases[i].name) != 0) continue;
        hk_guard_desc d;
        memset(&d, 0, sizeof d);
        d.reserve = (size_t)1 << 28;
        d.flags = HK_GUARD_FAULT_HANDLER | HK_GUARD_REPORT | HK_FLAG_QUIET | cases[i].flags;
        d.side = cases[i].side;
        hk_guard *g = hk_guard_create(&d);
        if (!g) {
            fprintf(stderr, "cannot create the guard heap\n");
            return 2;
        }
        cases[i].fn(g);
        fflush(stderr);
        printf("survived %s\n", cases[i].name);
        hk_guard_destroy(g);
        return 0;
    }
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
