/* Bug: a 64-byte block is leaked; a copy of its pointer stays behind in a
 * dead stack frame (deep below main's, far past what any scrub clears).
 * Nothing live points to it: it is definitely lost, on every run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) void leave_pointer_behind(void) {
    volatile char *slots[8192]; /* 64 KiB frame: the copy sits at its bottom */
    slots[0] = malloc(64);
    slots[0][0] = 1;
    slots[1] = 0;
}
int main(void) {
    leave_pointer_behind();
    puts("leak_dead_stack done");
    return 0;
}
