/* Bug: reads the element at an index taken from standard input ("-1":
 * before the array). Only a leading guard page sees it; `--sides both`
 * must replay the same input to its second run to find it. */
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long read_at(const long *v, int k) { return v[k]; }
int main(void) {
    int k = 0;
    if (scanf("%d", &k) != 1) return 2;
    long *v = malloc(6 * sizeof *v);
    for (int i = 0; i < 6; i++) v[i] = i;
    printf("%ld\n", read_at(v, k));
    free(v);
    return 0;
}
