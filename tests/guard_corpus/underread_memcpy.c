/* Bug: the pattern of NIST Juliet's CWE-127 "buffer under-read" cases: a
 * pointer set 8 bytes before a 100-byte block, then 100 bytes copied from
 * it by the C library (memcpy: vector loads inside libc). With the guard
 * page after the block the first 8 bytes read are padding; only the run
 * with the guard page before it sees the read (the default runs both). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) void copy_from(char *dst, const char *src) { memcpy(dst, src, 100); }
int main(void) {
    char *buf = malloc(100);
    memset(buf, 'A', 99);
    buf[99] = 0;
    char *data = buf - 8; /* the flaw */
    char dst[100];
    copy_from(dst, data);
    dst[99] = 0;
    printf("%zu\n", strlen(dst));
    free(buf);
    return 0;
}
