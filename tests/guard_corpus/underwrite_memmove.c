/* Bug: the pattern of Juliet's CWE-124 "buffer underwrite" cases: a pointer
 * 8 bytes before a 100-byte block, then 100 bytes moved to it (memmove in
 * libc). The run with the guard page before the block faults at the first
 * byte; the other finds the padding damaged when the block is freed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) void move_into(char *dst, const char *src) { memmove(dst, src, 100); }
int main(void) {
    char *buf = malloc(100);
    char src[100];
    memset(src, 'C', sizeof src);
    char *data = buf - 8; /* the flaw */
    move_into(data, src);
    printf("%c\n", buf[0]);
    free(buf);
    return 0;
}
