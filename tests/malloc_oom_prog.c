/*
 * tests/malloc_oom_prog.c - a small malloc workload for the out-of-memory
 * sweep of libheapkit-malloc.so (tests/malloc_oom.sh runs it under the
 * preload with HEAPKIT_FAIL_AFTER=N for N = 1, 2, ..., once and
 * persistently). Every call that returns NULL must set errno to ENOMEM;
 * a failed realloc must keep the old block; every live block must keep
 * its contents after every call. With a one-shot failure (argv[1] "once")
 * memory is available again right after: the failed call, retried, must
 * succeed. Prints "oom prog ok: F failed calls" (with write(2): stdio's
 * buffers come from malloc) and exits 0; exits 1 on any broken rule.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NB 40

static unsigned char *blk[NB];
static size_t len[NB];
static int failed_calls;
static int once;

static void say(const char *s) {
    size_t n = strlen(s);
    while (n) {
        ssize_t w = write(1, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

static void die(const char *why, int i) {
    char line[160];
    snprintf(line, sizeof line, "FAIL: %s (block %d)\n", why, i);
    say(line);
    exit(1);
}

static void paint(int i) {
    for (size_t k = 0; k < len[i]; k++) blk[i][k] = (unsigned char)(i * 31 + k);
}

static void verify_all(void) {
    for (int i = 0; i < NB; i++)
        if (blk[i]) {
            size_t step = len[i] > 4096 ? 509 : 1; /* large blocks: a sample of their bytes */
            for (size_t k = 0; k < len[i]; k += step)
                if (blk[i][k] != (unsigned char)(i * 31 + k)) die("block contents changed", i);
        }
}

/* A call returned NULL: it must say ENOMEM. Returns 1 when the caller
 * should retry (one-shot mode: memory is back). */
static int failed(int err, int i) {
    if (err != ENOMEM) die("NULL without errno ENOMEM", i);
    failed_calls++;
    return once;
}

static size_t size_for(int i) {
    static const size_t sizes[] = {24, 200, 4000, 70000, 3 << 19, 100, 1500, 300000, 9, 6 << 20};
    return sizes[i % 10] + (size_t)i;
}

int main(int argc, char **argv) {
    once = argc > 1 && strcmp(argv[1], "once") == 0;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < NB; i++) {
            if (blk[i] && (i + round) % 3 == 0 && len[i] < (2u << 20)) { /* grow it */
                size_t n = len[i] * 2 + 100;
                errno = 0;
                unsigned char *q = realloc(blk[i], n);
                if (!q) {
                    int retry = failed(errno, i);
                    verify_all(); /* the old block is kept */
                    if (retry && !(q = realloc(blk[i], n))) die("realloc failed again with memory back", i);
                }
                if (q) {
                    blk[i] = q;
                    for (size_t k = len[i]; k < n; k++) q[k] = (unsigned char)(i * 31 + k);
                    len[i] = n;
                }
            } else if (blk[i] && (i + round) % 3 == 1) {
                free(blk[i]);
                blk[i] = NULL;
            } else if (!blk[i]) {
                size_t n = size_for(i + round);
                errno = 0;
                unsigned char *p = (i % 4 == 0) ? calloc(1, n) : malloc(n);
                if (!p && failed(errno, i) && !(p = malloc(n)))
                    die("malloc failed again with memory back", i);
                if (p && i % 4 == 0 && n > 0 && (p[0] != 0 || p[n - 1] != 0))
                    die("calloc memory not zero", i);
                if (p) {
                    blk[i] = p;
                    len[i] = n;
                    paint(i);
                }
            }
            verify_all();
        }
    }
    for (int i = 0; i < NB; i++) free(blk[i]);
    char line[80];
    snprintf(line, sizeof line, "oom prog ok: %d failed calls\n", failed_calls);
    say(line);
    return 0;
}
