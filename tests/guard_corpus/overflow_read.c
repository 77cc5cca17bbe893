/* Bug: reads one element past the end of a 64-byte array. */
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) int sum_one_too_many(const int *v, int n) {
    int s = 0;
    for (int i = 0; i <= n; i++) s += v[i];
    return s;
}
int main(void) {
    int *v = malloc(16 * sizeof *v);
    for (int i = 0; i < 16; i++) v[i] = i;
    printf("%d\n", sum_one_too_many(v, 16));
    free(v);
    return 0;
}
