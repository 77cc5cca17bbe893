/* Bug: a 50-byte block asked with 64-byte alignment (posix_memalign) gets
 * two bytes written past its end. The alignment asked for is kept, so the
 * block ends 14 bytes before the guard page: the bytes land in padding and
 * are found when the block is freed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) char *make_aligned(void) {
    void *p = NULL;
    return posix_memalign(&p, 64, 50) == 0 ? p : NULL;
}
__attribute__((noinline)) void fill_aligned(char *p) { memset(p, 'x', 52); }
int main(void) {
    char *p = make_aligned();
    if (!p || ((unsigned long)p & 63) != 0) return 2;
    fill_aligned(p);
    free(p);
    puts("overflow_aligned_pad freed");
    return 0;
}
