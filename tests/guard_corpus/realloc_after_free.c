/* Bug: grows a buffer that was already freed. */
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) char *grow_freed(char *p) { return realloc(p, 200); }
int main(void) {
    char *p = malloc(100);
    free(p);
    char *q = grow_freed(p);
    printf("%p\n", (void *)q);
    return 0;
}
