/* Bug: keeps using the old pointer after realloc moved the block (the
 * block grows from 16 bytes to 64 KiB, so it cannot stay in place): the
 * old block was freed by realloc. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) int read_stale(const char *old) { return old[3]; }
int main(void) {
    char *p = malloc(16);
    memcpy(p, "abcdefghijklmno", 16);
    char *old = p;
    p = realloc(p, 65536);
    if (!p) return 2;
    printf("%d\n", read_stale(old));
    free(p);
    return 0;
}
