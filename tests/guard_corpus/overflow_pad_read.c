/* Bug: reads the byte after a 13-byte block (hidden in padding unless --exact). */
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
