/* Bug: frees the same block twice. */
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) void free_twice(void *p) {
    free(p);
    free(p);
}
int main(void) {
    void *p = malloc(40);
    free_twice(p);
    puts("still running after the double free");
    return 0;
}
