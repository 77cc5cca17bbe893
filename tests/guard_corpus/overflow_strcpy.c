/* Bug: the classic off-by-one string copy: malloc(strlen(s)) leaves no
 * room for the terminator, which strcpy writes one byte past the end of
 * the 11-byte block (inside the C library's string code). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) char *copy_name(const char *s) {
    char *d = malloc(strlen(s)); /* should be strlen(s) + 1 */
    strcpy(d, s);
    return d;
}
int main(int argc, char **argv) {
    (void)argv;
    char *d = copy_name(argc > 5 ? "x" : "hello world");
    puts(d);
    free(d);
    return 0;
}
