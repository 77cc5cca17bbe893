/* Bug: Juliet's CWE-415 shape across functions: a source frees the block on
 * an error path and returns it, the caller's sink frees it again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) char *source(int fail) {
    char *p = malloc(64);
    strcpy(p, "record");
    if (fail) free(p); /* the error path forgets to return NULL */
    return p;
}
__attribute__((noinline)) void sink(char *p) { free(p); }
int main(int argc, char **argv) {
    (void)argv;
    char *p = source(argc > 0);
    sink(p);
    puts("double_free_sink done");
    return 0;
}
