/* Run under LD_PRELOAD=libheapkit-malloc.so by CTest (zone_preload_c): exercises
 * every malloc entry point of the zone shim, errno on failure, threads and
 * fork. Prints "preload ok" and exits 0 when everything holds. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int g_fail;
#define EXPECT(c)                                                                                            \
    do {                                                                                                     \
        if (!(c)) {                                                                                          \
            fprintf(stderr, "FAIL line %d: %s\n", __LINE__, #c);                                             \
            g_fail = 1;                                                                                      \
        }                                                                                                    \
    } while (0)

static void *worker(void *arg) {
    uintptr_t seed = (uintptr_t)arg * 2654435761u + 1;
    void *slots[64] = {0};
    for (int i = 0; i < 200000; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)((seed >> 33) % 64);
        size_t n = (size_t)((seed >> 40) % 2000);
        if (slots[k]) {
            if (((unsigned char *)slots[k])[0] != (unsigned char)k) return (void *)1;
            if (seed & 1) {
                free(slots[k]);
                slots[k] = NULL;
                continue;
            }
            slots[k] = realloc(slots[k], n + 1);
        } else {
            slots[k] = malloc(n + 1);
        }
        if (!slots[k]) return (void *)1;
        ((unsigned char *)slots[k])[0] = (unsigned char)k;
    }
    for (int k = 0; k < 64; k++) free(slots[k]);
    return NULL;
}

int main(void) {
    /* The preload is active: malloc resolves into libheapkit-malloc.so, and
     * the zone's API stays hidden inside it (the library exports only the
     * malloc family, so it cannot collide with a libheapkit.so the program
     * links itself). */
    Dl_info info;
    void *sym = dlsym(RTLD_DEFAULT, "malloc");
    EXPECT(sym != NULL && dladdr(sym, &info) != 0 && info.dli_fname &&
           strstr(info.dli_fname, "heapkit-malloc"));
    EXPECT(dlsym(RTLD_DEFAULT, "hk_zone_create") == NULL);

    char *p = malloc(100);
    EXPECT(p && ((uintptr_t)p & 15) == 0);
    memset(p, 1, 100);
    EXPECT(malloc_usable_size(p) >= 100);
    EXPECT(malloc_usable_size(NULL) == 0);
    p = realloc(p, 10000);
    EXPECT(p && p[99] == 1);
    free(p);
    free(NULL);

    int *c = calloc(1000, sizeof(int));
    EXPECT(c != NULL);
    for (int i = 0; c && i < 1000; i++) EXPECT(c[i] == 0);
    free(c);

    /* volatile: keep the compiler from judging the sizes at compile time */
    volatile size_t huge = SIZE_MAX, half = SIZE_MAX / 2, near = SIZE_MAX - 100;
    errno = 0;
    EXPECT(malloc(huge) == NULL && errno == ENOMEM);
    errno = 0;
    EXPECT(malloc(half) == NULL && errno == ENOMEM);
    errno = 0;
    EXPECT(calloc(half, 4) == NULL && errno == ENOMEM);
    errno = 0;
    void *r = malloc(10);
    EXPECT(realloc(r, near) == NULL && errno == ENOMEM);
    free(r); /* still valid after the failed realloc */
    errno = 0;
    EXPECT(reallocarray(NULL, half, 3) == NULL && errno == ENOMEM);
    void *ra = reallocarray(NULL, 10, 10);
    EXPECT(ra != NULL);
    free(ra);

    void *m = NULL;
    EXPECT(posix_memalign(&m, 3, 10) == EINVAL);
    EXPECT(posix_memalign(&m, 4, 10) == EINVAL); /* not a multiple of sizeof(void*) */
    EXPECT(posix_memalign(&m, 4096, 10) == 0 && ((uintptr_t)m & 4095) == 0);
    free(m);
    EXPECT(posix_memalign(&m, 64, half) == ENOMEM);
    void *a = aligned_alloc(256, 512);
    EXPECT(a && ((uintptr_t)a & 255) == 0);
    a = realloc(a, 100000);
    EXPECT(a && ((uintptr_t)a & 255) == 0); /* alignment kept across realloc */
    free(a);
    errno = 0;
    void *a24 =
        aligned_alloc(24, 48); /* glibc rounds 24 up to 32 (tests/malloc_compat.sh checks every edge) */
    EXPECT(a24 && ((uintptr_t)a24 & 31) == 0);
    free(a24);
    void *ma = memalign(128, 5);
    EXPECT(ma && ((uintptr_t)ma & 127) == 0);
    free(ma);
    long page = sysconf(_SC_PAGESIZE);
    void *v = valloc(10);
    EXPECT(v && ((uintptr_t)v % (uintptr_t)page) == 0);
    free(v);
    void *pv = pvalloc(10);
    EXPECT(pv && ((uintptr_t)pv % (uintptr_t)page) == 0 && malloc_usable_size(pv) >= (size_t)page);
    free(pv);

    /* a big block gets its own region and goes back */
    char *big = malloc((size_t)300 << 20);
    EXPECT(big != NULL);
    if (big) {
        big[0] = 1;
        big[((size_t)300 << 20) - 1] = 2;
    }
    free(big);

    /* a pointer that is not ours: reported and ignored */
    static char not_ours[64] __attribute__((aligned(16)));
    char *volatile foreign = not_ours + 16;
    free(foreign);

    pthread_t th[4];
    for (uintptr_t i = 0; i < 4; i++) EXPECT(pthread_create(&th[i], NULL, worker, (void *)i) == 0);
    /* fork while the workers run: the child's heap must be usable */
    for (int f = 0; f < 20; f++) {
        pid_t pid = fork();
        if (pid == 0) {
            void *q[100];
            for (int i = 0; i < 100; i++) q[i] = malloc((size_t)i * 10 + 1);
            for (int i = 0; i < 100; i++) free(q[i]);
            _exit(0);
        }
        int st = 0;
        EXPECT(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    for (int i = 0; i < 4; i++) {
        void *ret = (void *)1;
        EXPECT(pthread_join(th[i], &ret) == 0 && ret == NULL);
    }
    if (!g_fail) printf("preload ok\n");
    return g_fail;
}
