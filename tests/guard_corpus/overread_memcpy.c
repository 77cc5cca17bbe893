/* Bug: the pattern of NIST Juliet's CWE-126 "buffer over-read" cases: 100
 * bytes copied out of a 50-byte block (the source is the smaller buffer),
 * by the C library's memcpy. The block ends on the trailing guard page, so
 * the first run faults inside libc; valgrind and ASan see it too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) void copy_out(char *dst, const char *src) { memcpy(dst, src, 100); }
int main(void) {
    char *small = malloc(50);
    memset(small, 'B', 50);
    char dst[100];
    copy_out(dst, small);
    printf("%c\n", dst[0]);
    free(small);
    return 0;
}
