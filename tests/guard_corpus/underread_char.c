/* Bug: a one-byte under-read: the character before a 100-byte string is
 * read (a scan backwards from the start that goes one too far, Juliet's
 * CWE-127 on char). Only the run with the guard page before the block sees
 * it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) size_t trailing_spaces_before(const char *s, size_t i) {
    size_t n = 0;
    while (s[i - 1] == ' ') { /* no check for i == 0 */
        n++;
        i--;
    }
    return n;
}
int main(void) {
    char *s = malloc(100);
    memset(s, ' ', 99);
    s[99] = 0;
    printf("%zu\n", trailing_spaces_before(s, 99) > 0);
    free(s);
    return 0;
}
