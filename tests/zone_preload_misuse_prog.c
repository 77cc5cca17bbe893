/* Misuse under LD_PRELOAD=libheapkit-malloc.so (CTest zone_preload_misuse):
 * a double free, a free of an interior pointer, a free of a static array,
 * a double free across two threads, and a realloc of a freed block. Each
 * is reported on stderr ("heapkit: zone 'malloc': ...") and ignored; the
 * program goes on, its other blocks intact, and prints "misuse ok". The
 * pointers go through volatile variables so that the compiler does not see
 * (and warn about) the misuse it is made to commit. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_fail;
#define EXPECT(c)                                                                                            \
    do {                                                                                                     \
        if (!(c)) {                                                                                          \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                                     \
            g_fail = 1;                                                                                      \
        }                                                                                                    \
    } while (0)

static void *free_in_thread(void *p) {
    free(p);
    return NULL;
}

int main(void) {
    enum { N = 64 };
    unsigned char *keep[N];
    for (int i = 0; i < N; i++) {
        keep[i] = malloc((size_t)(8 + i * 13));
        EXPECT(keep[i] != NULL);
        if (keep[i]) memset(keep[i], i, (size_t)(8 + i * 13));
    }
    void *volatile a = malloc(40);
    free(a);
    free(a); /* double free */
    char *volatile b = malloc(100);
    free(b + 24); /* interior pointer */
    static char not_ours[64] __attribute__((aligned(16)));
    char *volatile c = not_ours;
    free(c); /* foreign */
    void *volatile d = malloc(72);
    pthread_t t;
    EXPECT(pthread_create(&t, NULL, free_in_thread, d) == 0);
    pthread_join(t, NULL);
    free(d); /* freed by the other thread already */
    void *volatile e = malloc(300);
    free(e);
    void *volatile r = realloc(e, 600); /* realloc of a freed block */
    EXPECT(r == NULL);
    /* the heap goes on: every other block intact, new blocks usable */
    for (int i = 0; i < N; i++)
        for (int k = 0; k < 8 + i * 13; k++)
            if (keep[i][k] != (unsigned char)i) {
                EXPECT(keep[i][k] == (unsigned char)i);
                break;
            }
    for (int round = 0; round < 1000; round++) {
        void *q = malloc((size_t)(round % 1500));
        EXPECT(q != NULL);
        free(q);
    }
    free(b);
    for (int i = 0; i < N; i++) free(keep[i]);
    if (!g_fail) printf("misuse ok\n");
    return g_fail;
}
