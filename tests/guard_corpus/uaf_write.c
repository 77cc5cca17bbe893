/* Bug: writes through a dangling pointer. */
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) void write_after_free(int *p) { p[3] = 42; }
int main(void) {
    int *p = calloc(10, sizeof *p);
    free(p);
    write_after_free(p);
    puts("not reached");
    return 0;
}
