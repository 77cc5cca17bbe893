/* Correct: every allocation entry point, used within bounds, all freed. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
    void *blocks[500];
    unsigned seed = 1;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 500; i++) {
            seed = seed * 1103515245u + 12345u;
            size_t n = (seed >> 8) % 3000;
            blocks[i] = (i % 7 == 0) ? calloc(1, n) : malloc(n);
            if (n && !blocks[i]) return 1;
            memset(blocks[i], i & 0xff, n);
            if (malloc_usable_size(blocks[i]) < n) return 2;
        }
        for (int i = 0; i < 500; i += 3) {
            blocks[i] = realloc(blocks[i], 100 + (size_t)i);
            memset(blocks[i], 1, 100 + (size_t)i);
        }
        for (int i = 0; i < 500; i++) free(blocks[i]);
    }
    void *a = NULL;
    if (posix_memalign(&a, 64, 200) || ((uintptr_t)a & 63)) return 3;
    memset(a, 0, 200);
    free(a);
    void *b = aligned_alloc(4096, 4096);
    if (!b || ((uintptr_t)b & 4095)) return 4;
    memset(b, 0, 4096);
    free(b);
    void *c = memalign(32, 10);
    memset(c, 0, 10);
    free(c);
    char *s = strdup("hello guard");
    printf("%s\n", s);
    free(s);
    free(malloc(0));
    free(NULL);
    puts("ok_basic done");
    return 0;
}
