/* Correct: a child forked while the parent holds blocks exits without
 * freeing them (they are the parent's); the parent frees everything. Both
 * must exit 0. Also allocates in the child. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    char *held[100];
    for (int i = 0; i < 100; i++) {
        held[i] = malloc(50);
        memset(held[i], i, 50);
    }
    pid_t pid = fork();
    if (pid == 0) {
        char *c = malloc(10);
        strcpy(c, "child");
        free(c);
        exit(held[5][0] == 5 ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    for (int i = 0; i < 100; i++) free(held[i]);
    printf("ok_fork done %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
