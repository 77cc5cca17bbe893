/*
 * bench/guard_workload.c - allocation-heavy programs for the `guard` bench
 * suite. The suite runs this one binary under plain glibc, `heapkit guard`,
 * Electric Fence, DUMA and Valgrind and compares wall time and peak RSS.
 *
 *   guard_workload mixed N   N mixed-size allocations (8 B..4 KiB, skewed small),
 *                            random frees, 1,000 live at most, some reallocs
 *   guard_workload churn N   N short-lived small blocks (ring of 16 live)
 *   guard_workload live N    N live 64-byte blocks at once, then all freed
 *   guard_workload strings N a growing string table: strdup, realloc, lookups
 *
 * Prints a checksum so the work cannot be optimized away, and its peak RSS
 * (VmHWM) for the suite.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "proc_mem.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_rand(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1Dull;
}

static size_t mixed_size(void) {
    uint64_t r = next_rand();
    switch (r & 7) {
    case 0:
    case 1:
    case 2:
    case 3: return 8 + (size_t)(r >> 8) % 56; /* small */
    case 4:
    case 5: return 64 + (size_t)(r >> 8) % 448; /* medium */
    case 6: return 512 + (size_t)(r >> 8) % 1536;
    default: return 2048 + (size_t)(r >> 8) % 2048; /* up to 4 KiB */
    }
}

static uint64_t work_mixed(long n) {
    enum { LIVE = 1000 };
    static unsigned char *live[LIVE];
    static size_t sizes[LIVE];
    uint64_t sum = 0;
    for (long i = 0; i < n; i++) {
        size_t k = (size_t)(next_rand() % LIVE);
        if (live[k] && (next_rand() & 3) == 0) {
            size_t ns = mixed_size();
            unsigned char *q = realloc(live[k], ns);
            if (!q) return 0;
            live[k] = q;
            sizes[k] = ns;
            q[ns - 1] = (unsigned char)i;
            continue;
        }
        free(live[k]);
        sizes[k] = mixed_size();
        live[k] = malloc(sizes[k]);
        if (!live[k]) return 0;
        memset(live[k], (int)(i & 0xff), sizes[k] < 64 ? sizes[k] : 64);
        sum += live[k][0];
    }
    for (size_t k = 0; k < LIVE; k++) free(live[k]);
    return sum;
}

static uint64_t work_churn(long n) {
    void *ring[16] = {0};
    uint64_t sum = 0;
    for (long i = 0; i < n; i++) {
        size_t k = (size_t)i & 15;
        free(ring[k]);
        size_t sz = 1 + (size_t)(next_rand() % 256);
        unsigned char *p = malloc(sz);
        if (!p) return 0;
        p[0] = (unsigned char)i;
        p[sz - 1] = 1;
        sum += p[0];
        ring[k] = p;
    }
    for (int k = 0; k < 16; k++) free(ring[k]);
    return sum;
}

static uint64_t work_live(long n) {
    unsigned char **v = malloc((size_t)n * sizeof *v);
    if (!v) return 0;
    uint64_t sum = 0;
    for (long i = 0; i < n; i++) {
        v[i] = malloc(64);
        if (!v[i]) return 0;
        memset(v[i], (int)(i & 0xff), 64);
    }
    for (long i = 0; i < n; i++) sum += v[i][63];
    for (long i = 0; i < n; i++) free(v[i]);
    free(v);
    return sum;
}

static uint64_t work_strings(long n) {
    size_t cap = 16, len = 0;
    char **tab = malloc(cap * sizeof *tab);
    uint64_t sum = 0;
    char buf[64];
    for (long i = 0; i < n; i++) {
        if (len == cap) {
            cap *= 2;
            char **t = realloc(tab, cap * sizeof *tab);
            if (!t) return 0;
            tab = t;
        }
        int w = snprintf(buf, sizeof buf, "key-%ld-%llu", i, (unsigned long long)(next_rand() % 100000));
        char *s = malloc((size_t)w + 1);
        if (!s) return 0;
        memcpy(s, buf, (size_t)w + 1);
        tab[len++] = s;
        if ((i & 7) == 0 && len > 1) { /* replace a random one */
            size_t k = (size_t)(next_rand() % len);
            free(tab[k]);
            tab[k] = tab[--len];
        }
    }
    for (size_t k = 0; k < len; k++) {
        sum += (unsigned char)tab[k][4];
        free(tab[k]);
    }
    free(tab);
    return sum;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: guard_workload mixed|churn|live|strings N\n");
        return 2;
    }
    long n = atol(argv[2]);
    uint64_t sum;
    if (strcmp(argv[1], "mixed") == 0)
        sum = work_mixed(n);
    else if (strcmp(argv[1], "churn") == 0)
        sum = work_churn(n);
    else if (strcmp(argv[1], "live") == 0)
        sum = work_live(n);
    else if (strcmp(argv[1], "strings") == 0)
        sum = work_strings(n);
    else {
        fprintf(stderr, "unknown workload %s\n", argv[1]);
        return 2;
    }
    printf("%s %ld checksum %llu\n", argv[1], n, (unsigned long long)sum);
    /* Peak RSS of this program since its exec (wait4's ru_maxrss would also
     * count the forking parent's memory, which exec records as ours). */
    long hwm = hkb_proc_kib("VmHWM:");
    if (hwm >= 0) printf("vmhwm_kb %ld\n", hwm);
    return 0;
}
