/* Bug: three 32-byte blocks are allocated and their pointers dropped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) void leaky_alloc(void) {
    volatile char *p = malloc(32);
    p[0] = 1;
    p = NULL;
}
/* Overwrites the dead stack frames so no stale copy keeps the blocks reachable. */
__attribute__((noinline)) void scrub_stack(void) {
    volatile char junk[16384];
    memset((char *)junk, 0, sizeof junk);
}
static char *kept; /* still referenced at exit: not a leak */
int main(void) {
    for (int i = 0; i < 3; i++) leaky_alloc();
    kept = malloc(100);
    scrub_stack();
    strcpy(kept, "leak done");
    puts(kept);
    return 0;
}
