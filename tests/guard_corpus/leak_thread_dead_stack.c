/* Bug: a 72-byte block is leaked by a thread that then blocks for good;
 * the only copy of its pointer stays in a dead frame of that thread's
 * stack. At exit the leak scan stops the thread and reads its stack from
 * its stack pointer up only: the block is definitely lost. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static volatile int parked;
__attribute__((noinline)) void thread_leaves_pointer(void) {
    volatile char *slots[8192]; /* 64 KiB frame: the copy sits at its bottom */
    slots[0] = malloc(72);
    slots[0][0] = 1;
    slots[1] = 0;
}
static void *worker(void *arg) {
    (void)arg;
    thread_leaves_pointer();
    parked = 1;
    for (;;) pause();
    return NULL;
}
int main(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) return 2;
    while (!parked) usleep(1000);
    usleep(10000);
    puts("leak_thread_dead_stack done");
    return 0; /* exit with the worker still parked */
}
