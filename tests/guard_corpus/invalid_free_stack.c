/* Bug: frees a stack buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) void free_stack_buffer(void) {
    char buf[64];
    memset(buf, 0, sizeof buf);
    free(buf + 16);
}
int main(void) {
    free_stack_buffer();
    puts("not reached");
    return 0;
}
