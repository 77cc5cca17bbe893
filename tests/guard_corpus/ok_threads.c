/* Correct: four threads allocating, handing blocks over and freeing. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void *work(void *arg) {
    unsigned seed = (unsigned)(size_t)arg;
    void *live[64] = {0};
    for (int i = 0; i < 20000; i++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 10) % 64);
        free(live[k]);
        size_t n = (seed >> 16) % 512 + 1;
        live[k] = malloc(n);
        memset(live[k], k, n);
    }
    for (int k = 0; k < 64; k++) free(live[k]);
    return malloc(16); /* freed by main */
}
int main(void) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, work, (void *)(size_t)(i + 1));
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        free(r);
    }
    puts("ok_threads done");
    return 0;
}
