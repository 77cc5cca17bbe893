/* Bug: reads the element before an array (run with --side start). */
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long read_before_start(const long *v) { return v[-1]; }
int main(void) {
    long *v = malloc(8 * sizeof *v);
    for (int i = 0; i < 8; i++) v[i] = i;
    printf("%ld\n", read_before_start(v));
    free(v);
    return 0;
}
