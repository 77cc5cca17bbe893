/* Bug: frees a global array. */
#include <stdio.h>
#include <stdlib.h>
static long table[32] = {1, 2, 3};
__attribute__((noinline)) void free_global_table(void) { free(&table[4]); }
int main(void) {
    free_global_table();
    puts("not reached");
    return 0;
}
