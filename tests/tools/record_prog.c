/*
 * tests/tools/record_prog.c - a program whose allocations are known, for the
 * record/replay round trip (tests/tools/roundtrip_check.c knows them too).
 * Its blocks have sizes no C library picks for itself:
 *   phase A   malloc(40000 + i), i < 100; the even ones freed (50 live)
 *   calloc(7, 1111)                                        (live at the end)
 *   malloc(50001), realloc to 50002, freed
 *   posix_memalign(256, 30001) freed; aligned_alloc(64, 30016) (live)
 *   4 threads: 200 x malloc(20000 + 10 t + j % 10), all freed but a last
 *             malloc(21000 + t)                                 (live)
 *   malloc(60001) in main, freed by thread 1
 * Then it ends as argv[1] says: exit (normal), _exit, kill (SIGKILL itself
 * right after phase A), fork (a child allocates 70001 and exits).
 */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile g_handoff;
static void *g_keep[64];
static int g_nkeep;

__attribute__((noinline)) static void phase_a(void) {
    void *p[100];
    for (int i = 0; i < 100; i++) {
        p[i] = malloc(40000 + (size_t)i);
        memset(p[i], 1, 16);
    }
    for (int i = 0; i < 100; i += 2) free(p[i]);
    for (int i = 1; i < 100; i += 2) g_keep[g_nkeep++ % 64] = p[i];
}

static void *worker(void *arg) {
    int t = (int)(long)arg;
    for (int j = 0; j < 200; j++) {
        void *q = malloc(20000 + 10 * (size_t)t + (size_t)(j % 10));
        free(q);
    }
    if (t == 1) {
        while (!g_handoff) sched_yield();
        free(g_handoff);
    }
    return malloc(21000 + (size_t)t);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "exit";
    phase_a();
    if (!strcmp(mode, "kill")) raise(SIGKILL);
    void *c = calloc(7, 1111);
    void *r = malloc(50001);
    r = realloc(r, 50002);
    free(r);
    void *a = NULL;
    if (posix_memalign(&a, 256, 30001) != 0) return 1;
    free(a);
    void *al = aligned_alloc(64, 30016);
    pthread_t th[4];
    for (long t = 0; t < 4; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    g_handoff = malloc(60001);
    void *left[4];
    for (int t = 0; t < 4; t++) pthread_join(th[t], &left[t]);
    printf("record_prog %s %p %p %p\n", mode, c, al, left[0]);
    fflush(stdout);
    if (!strcmp(mode, "fork")) {
        pid_t pid = fork();
        if (pid == 0) {
            void *x = malloc(70001);
            printf("child %p\n", x);
            exit(0);
        }
        int st;
        waitpid(pid, &st, 0);
    }
    if (!strcmp(mode, "_exit")) _exit(0);
    return 0;
}
