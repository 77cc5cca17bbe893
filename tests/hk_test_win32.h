/*
 * tests/hk_test_win32.h - the few POSIX calls the tests use, for the
 * Windows build (MinGW-w64; included by hk_test.h on _WIN32 only):
 * open_memstream and fmemopen (a temporary file read back at fclose),
 * getrusage (page faults only: GetProcessMemoryInfo), setenv/unsetenv
 * (_putenv_s), pipe (_pipe), aligned_alloc (_aligned_malloc: its blocks
 * go to _aligned_free; the tests only pass it as a function pointer).
 * Test code, not library code: the library's host layer is src/os_win32*.c.
 */
#ifndef HK_TEST_WIN32_H
#define HK_TEST_WIN32_H
#ifdef _WIN32

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN 1
#endif
#ifndef NOMINMAX
#define NOMINMAX 1
#endif
#include <windows.h>

#include <psapi.h>

#include <fcntl.h>
#include <io.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* open_memstream: at most 16 open at once (the tests use one at a time) */
typedef struct hkt_memstream {
    FILE *f;
    char **buf; /* open_memstream: set at fclose */
    size_t *len;
    char *fixed; /* fmemopen: the caller's buffer, filled at fclose */
    size_t cap;
} hkt_memstream;
static hkt_memstream hkt_memstreams[16];

static inline FILE *hkt_open_memstream(char **buf, size_t *len) {
    for (int i = 0; i < 16; i++)
        if (!hkt_memstreams[i].f) {
            FILE *f = tmpfile();
            if (!f) return NULL;
            hkt_memstreams[i].f = f;
            hkt_memstreams[i].buf = buf;
            hkt_memstreams[i].len = len;
            hkt_memstreams[i].fixed = NULL;
            *buf = NULL;
            *len = 0;
            return f;
        }
    return NULL;
}

static inline int hkt_fclose(FILE *f) {
    for (int i = 0; i < 16; i++)
        if (f && hkt_memstreams[i].f == f) {
            hkt_memstreams[i].f = NULL;
            long n = (fflush(f), ftell(f));
            char *b = (char *)malloc(n > 0 ? (size_t)n + 1 : 1);
            size_t got = 0;
            if (b && n > 0 && fseek(f, 0, SEEK_SET) == 0) got = fread(b, 1, (size_t)n, f);
            if (b) b[got] = 0;
            if (hkt_memstreams[i].fixed) {
                size_t m = b ? (got < hkt_memstreams[i].cap ? got : hkt_memstreams[i].cap - 1) : 0;
                if (b) memcpy(hkt_memstreams[i].fixed, b, m);
                hkt_memstreams[i].fixed[m] = 0;
                free(b);
            } else {
                *hkt_memstreams[i].buf = b;
                *hkt_memstreams[i].len = got;
            }
            break;
        }
    return fclose(f);
}
/* fmemopen for writing ("w"): the text lands in buf at fclose */
static inline FILE *hkt_fmemopen(void *buf, size_t size, const char *mode) {
    static char *unused_buf;
    static size_t unused_len;
    (void)mode;
    if (!buf || size == 0) return NULL;
    FILE *f = hkt_open_memstream(&unused_buf, &unused_len);
    for (int i = 0; f && i < 16; i++)
        if (hkt_memstreams[i].f == f) {
            hkt_memstreams[i].fixed = (char *)buf;
            hkt_memstreams[i].cap = size;
        }
    return f;
}
#define fmemopen       hkt_fmemopen
#define open_memstream hkt_open_memstream
#define fclose         hkt_fclose

/* getrusage: the page faults only (Windows counts no minor/major split) */
struct rusage {
    long ru_minflt, ru_majflt;
};
#define RUSAGE_SELF 0
static inline int hkt_getrusage(int who, struct rusage *ru) {
    PROCESS_MEMORY_COUNTERS pmc;
    (void)who;
    memset(ru, 0, sizeof *ru);
    if (!K32GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc)) return -1;
    ru->ru_minflt = (long)pmc.PageFaultCount;
    return 0;
}
#define getrusage hkt_getrusage

static inline int hkt_setenv(const char *name, const char *value, int overwrite) {
    if (!overwrite && getenv(name)) return 0;
    return _putenv_s(name, value) == 0 ? 0 : -1;
}
static inline int hkt_unsetenv(const char *name) { return _putenv_s(name, "") == 0 ? 0 : -1; }
#define setenv   hkt_setenv
#define unsetenv hkt_unsetenv

static inline int hkt_pipe(int fds[2]) { return _pipe(fds, 1 << 16, _O_BINARY); }
#define pipe hkt_pipe
/* read() takes and returns int there */
static inline long hkt_read(int fd, void *buf, size_t n) {
    return _read(fd, buf, n > 0x7fffffffu ? 0x7fffffffu : (unsigned)n);
}
#define read hkt_read

static inline void *hkt_aligned_alloc(size_t align, size_t size) { return _aligned_malloc(size, align); }
#define aligned_alloc hkt_aligned_alloc

#endif /* _WIN32 */
#endif /* HK_TEST_WIN32_H */
