/* Bug: frees a pointer into the middle of a block. */
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) void free_interior(char *p) { free(p + 8); }
int main(void) {
    char *p = malloc(64);
    free_interior(p);
    puts("not reached");
    return 0;
}
