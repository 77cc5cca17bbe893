/* Correct: uses stdio (whose buffers the C library keeps to the end) and
 * frees every block it allocates: no report, even with --leaks-all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
    char *s = malloc(32);
    strcpy(s, "ok_stdio");
    printf("%s %d\n", s, 42);
    fprintf(stderr, "ok_stdio err\n");
    FILE *f = tmpfile();
    if (f) {
        fputs("x", f);
        fclose(f);
    }
    free(s);
    puts("ok_stdio done");
    return 0;
}
