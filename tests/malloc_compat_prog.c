/*
 * tests/malloc_compat_prog.c - prints, one line per case, what the process's
 * malloc does at the edges of every entry point: NULL or not, errno on
 * failure, the alignment and usable size it gave, posix_memalign's return
 * and whether it touched *out, whether a failed realloc kept the old block.
 * Run once on the C library and once under LD_PRELOAD=libheapkit-malloc.so
 * (tests/malloc_compat.sh): the two outputs must be identical, so the
 * preload behaves like this machine's glibc, whatever its version does.
 * Addresses are never printed, only facts that do not depend on them.
 * Built with -fno-builtin: the compiler must not assume what a call does
 * to errno (GCC takes posix_memalign to leave it alone; glibc sets it).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The alignment a non-NULL result must have: the request rounded up to a
 * power of two (glibc rounds), at least 16 (every result of malloc has it). */
static size_t want_align(size_t a) {
    size_t w = 16;
    while (w < a && w < ((size_t)1 << 40)) w <<= 1;
    return w;
}

/* One result: "NULL errno=E" or "ok aligned usable" (aligned: to
 * want_align(align); usable: malloc_usable_size >= n). Frees it. */
static void show(const char *what, void *p, int err, size_t align, size_t n) {
    if (!p) {
        printf("%-34s NULL errno=%s\n", what, err == ENOMEM ? "ENOMEM" : err == EINVAL ? "EINVAL" : "other");
        return;
    }
    size_t w = want_align(align);
    int aligned = ((uintptr_t)p % w) == 0;
    size_t u = malloc_usable_size(p);
    int usable = u >= n;
    memset(p, 0xab, u < n ? u : n);
    printf("%-34s ok%s%s\n", what, aligned ? "" : " MISALIGNED", usable ? "" : " SHORT");
    free(p);
}

#define CASE(label, call, align, n)                                                                          \
    do {                                                                                                     \
        errno = 0;                                                                                           \
        void *p_ = (call);                                                                                   \
        show(label, p_, errno, align, n);                                                                    \
    } while (0)

static void pm(const char *label, size_t align, size_t n) {
    void *out = (void *)(uintptr_t)0x1234;
    errno = 4321;
    int r = posix_memalign(&out, align, n);
    const char *rs = r == 0 ? "0" : r == EINVAL ? "EINVAL" : r == ENOMEM ? "ENOMEM" : "other";
    if (r == 0) {
        int aligned = ((uintptr_t)out % want_align(align)) == 0;
        printf("%-34s ret=%s%s errno_kept=%d\n", label, rs, aligned ? "" : " MISALIGNED", errno == 4321);
        free(out);
    } else {
        printf("%-34s ret=%s out_kept=%d errno=%s\n", label, rs, out == (void *)(uintptr_t)0x1234,
               errno == 4321     ? "kept"
               : errno == ENOMEM ? "ENOMEM"
                                 : "other");
    }
}

int main(void) {
    const size_t huge = SIZE_MAX - 4096, half = SIZE_MAX / 2 + 1, page = (size_t)sysconf(_SC_PAGESIZE);
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* memalign: 0, non powers of two (rounded up), large, absurd */
    CASE("memalign(0, 10)", memalign(0, 10), 0, 10);
    CASE("memalign(1, 10)", memalign(1, 10), 1, 10);
    CASE("memalign(3, 10)", memalign(3, 10), 3, 10);
    CASE("memalign(8, 10)", memalign(8, 10), 8, 10);
    CASE("memalign(24, 10)", memalign(24, 10), 24, 10);
    CASE("memalign(48, 100)", memalign(48, 100), 48, 100);
    CASE("memalign(4097, 10)", memalign(4097, 10), 4097, 10);
    CASE("memalign(65536, 0)", memalign(65536, 0), 65536, 0);
    CASE("memalign(half, 10)", memalign(half, 10), half, 10);
    CASE("memalign(half+1, 10)", memalign(half + 1, 10), half + 1, 10);
    CASE("memalign(SIZE_MAX, 10)", memalign(SIZE_MAX, 10), SIZE_MAX, 10);
    CASE("memalign(64, huge)", memalign(64, huge), 64, 0);
    CASE("memalign(4096, half)", memalign(4096, half), 4096, 0);

    /* aligned_alloc: the same questions */
    CASE("aligned_alloc(0, 10)", aligned_alloc(0, 10), 0, 10);
    CASE("aligned_alloc(3, 10)", aligned_alloc(3, 10), 3, 10);
    CASE("aligned_alloc(24, 48)", aligned_alloc(24, 48), 24, 48);
    CASE("aligned_alloc(256, 512)", aligned_alloc(256, 512), 256, 512);
    CASE("aligned_alloc(64, 10)", aligned_alloc(64, 10), 64, 10); /* size not a multiple */
    CASE("aligned_alloc(half+1, 10)", aligned_alloc(half + 1, 10), half + 1, 10);
    CASE("aligned_alloc(64, huge)", aligned_alloc(64, huge), 64, 0);

    /* posix_memalign */
    pm("posix_memalign(0, 10)", 0, 10);
    pm("posix_memalign(3, 10)", 3, 10);
    pm("posix_memalign(4, 10)", 4, 10);
    pm("posix_memalign(8, 10)", 8, 10);
    pm("posix_memalign(24, 10)", 24, 10);
    pm("posix_memalign(4096, 0)", 4096, 0);
    pm("posix_memalign(64, huge)", 64, huge);
    pm("posix_memalign(half, 10)", half, 10);

    /* valloc, pvalloc */
    CASE("valloc(0)", valloc(0), page, 0);
    CASE("valloc(10)", valloc(10), page, 10);
    CASE("valloc(huge)", valloc(huge), page, 0);
    /* glibc 2.36 rounds with the mask -(page - 1): pvalloc(0) gives a small
     * block and pvalloc(10) page + 1 bytes; heapkit gives whole pages. Both
     * are page-aligned and hold what was asked: that is what is compared. */
    CASE("pvalloc(0)", pvalloc(0), page, 0);
    CASE("pvalloc(10)", pvalloc(10), page, 10);
    CASE("pvalloc(huge)", pvalloc(huge), page, 0);

    /* malloc, calloc, realloc at the edges */
    CASE("malloc(0)", malloc(0), 16, 0);
    CASE("malloc(huge)", malloc(huge), 16, 0);
    CASE("malloc(SIZE_MAX)", malloc(SIZE_MAX), 16, 0);
    CASE("malloc(half)", malloc(half), 16, 0);
    CASE("calloc(0, 0)", calloc(0, 0), 16, 0);
    CASE("calloc(half, 2)", calloc(half, 2), 16, 0);
    CASE("calloc(1, huge)", calloc(1, huge), 16, 0);
    CASE("calloc(SIZE_MAX, SIZE_MAX)", calloc(SIZE_MAX, SIZE_MAX), 16, 0);
    CASE("realloc(NULL, 10)", realloc(NULL, 10), 16, 10);
    CASE("realloc(NULL, huge)", realloc(NULL, huge), 16, 0);
    CASE("reallocarray(NULL, half, 2)", reallocarray(NULL, half, 2), 16, 0);
    {
        unsigned char *old = malloc(100);
        memset(old, 0x5c, 100);
        const size_t sizes[] = {huge, SIZE_MAX, half};
        const char *names[] = {"huge", "SIZE_MAX", "half"};
        for (int i = 0; i < 3; i++) {
            errno = 0;
            void *q = realloc(old, sizes[i]);
            int kept = 1;
            for (int k = 0; k < 100; k++) kept &= old[k] == 0x5c;
            printf("realloc(p, %-8s)                 %s errno=%s old_kept=%d\n", names[i], q ? "ok" : "NULL",
                   errno == ENOMEM ? "ENOMEM"
                   : errno == 0    ? "0"
                                   : "other",
                   kept);
            if (q) old = q;
        }
        errno = 0;
        void *r = reallocarray(old, half, 2);
        printf("reallocarray(p, half, 2)           %s errno=%s\n", r ? "ok" : "NULL",
               errno == ENOMEM ? "ENOMEM" : "other");
        /* realloc(p, 0): glibc frees p and returns NULL */
        errno = 0;
        void *z = realloc(old, 0);
        printf("realloc(p, 0)                      %s errno=%s\n", z ? "ok" : "NULL",
               errno == 0 ? "0" : "set");
        free(z);
    }

    /* malloc_usable_size */
    printf("malloc_usable_size(NULL)           %zu\n", malloc_usable_size(NULL));
    {
        void *p = malloc(100);
        size_t u = malloc_usable_size(p);
        printf("malloc_usable_size(malloc(100))    %s\n", u >= 100 && u < 100 + 4096 ? "ok" : "bad");
        void *q = realloc(p, u); /* the usable size is usable */
        printf("realloc to the usable size         %s\n", q ? "ok" : "NULL");
        free(q);
    }
    printf("done\n");
    return 0;
}
