/*
 * bench/pair_loop.c - the malloc/free pair loop of issue 35, counted by
 * bench/pair_icount.sh under callgrind: 1000 live blocks; each step frees
 * one (picked by a random number) and mallocs a block of 16..515 bytes in
 * its place, writing its first byte. It calls the process's malloc and
 * free, so any allocator is measured by preloading it. No heapkit code is
 * linked in.
 *
 *   heapkit-pair-loop PAIRS
 */
#include <stdio.h>
#include <stdlib.h>

#define LIVE 1000u

static void *slots[LIVE];

/* The measured loop: not inlined, so that its code is the same for every
 * allocator. */
__attribute__((noinline)) static unsigned long pairs(unsigned long n, unsigned long rnd) {
    unsigned long sum = 0;
    for (unsigned long k = 0; k < n; k++) {
        rnd = rnd * 6364136223846793005ul + 1442695040888963407ul;
        unsigned i = (unsigned)(rnd >> 33) % LIVE;
        free(slots[i]);
        char *p = malloc(16u + (unsigned)(rnd >> 20) % 500u);
        if (!p) abort();
        p[0] = (char)k;
        sum += (unsigned char)p[0];
        slots[i] = p;
    }
    return sum;
}

int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000ul;
    for (unsigned i = 0; i < LIVE; i++) {
        slots[i] = malloc(16u + i % 500u);
        if (!slots[i]) return 1;
    }
    unsigned long sum = pairs(n, 12345);
    for (unsigned i = 0; i < LIVE; i++) free(slots[i]);
    printf("%lu\n", sum);
    return 0;
}
