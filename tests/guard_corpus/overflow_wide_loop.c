/* Bug: Juliet's CWE-122 loop variant on wide characters: a block of 50
 * wchar_t filled with 100 elements, one at a time. The write of element 50
 * is the first past the end and faults. */
#include <stdio.h>
#include <stdlib.h>
#include <wchar.h>
__attribute__((noinline)) void fill_wide(wchar_t *d, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = L'A';
}
int main(void) {
    wchar_t *d = malloc(50 * sizeof *d);
    fill_wide(d, 100);
    printf("%lc\n", (wint_t)d[0]);
    free(d);
    return 0;
}
