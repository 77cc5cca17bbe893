/* Bug: Juliet's CWE-401 shape: a block allocated in a loop and its pointer
 * overwritten at the next turn; only the last one is freed, so four
 * 100-byte blocks leak. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) char *make_line(int i) {
    char *p = malloc(100);
    snprintf(p, 100, "line %d", i);
    return p;
}
/* Overwrites the dead stack frames so no stale copy keeps the blocks reachable. */
__attribute__((noinline)) void scrub_stack(void) {
    volatile char junk[16384];
    memset((char *)junk, 0, sizeof junk);
}
int main(void) {
    char *line = NULL;
    for (int i = 0; i < 5; i++) line = make_line(i); /* the flaw: the previous line is lost */
    puts(line);
    free(line);
    scrub_stack();
    return 0;
}
