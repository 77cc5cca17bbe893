/* Bug: writes the byte before a block. --side start faults at once; the
 * default placement finds the damaged padding when the block is freed. */
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) void write_before_start(char *p) { p[-1] = 1; }
__attribute__((noinline)) void discard_buffer(char *p) { free(p); }
int main(void) {
    char *p = malloc(32);
    write_before_start(p);
    discard_buffer(p);
    puts("freed");
    return 0;
}
