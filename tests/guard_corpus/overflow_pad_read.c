/* Bug: reads the byte after a 13-byte block. Faults by default (the block
 * ends on the guard page); with --align-all the read lands in padding and
 * nothing can see it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) int peek_past_name(const char *s) { return s[13]; }
int main(void) {
    char *s = malloc(13);
    memcpy(s, "ABCDEFGHIJKLM", 13);
    printf("%d\n", peek_past_name(s));
    free(s);
    return 0;
}
