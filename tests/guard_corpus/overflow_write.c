/* Bug: writes one byte past the end of a 32-byte block (the end is aligned,
 * so the write hits the guard page at once). */
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) char *make_buffer(size_t n) { return malloc(n); }
__attribute__((noinline)) void fill_past_end(char *p, size_t n) {
    for (size_t i = 0; i <= n; i++) p[i] = 'x'; /* i == n is one too far */
}
int main(void) {
    char *p = make_buffer(32);
    fill_past_end(p, 32);
    free(p);
    puts("not reached");
    return 0;
}
