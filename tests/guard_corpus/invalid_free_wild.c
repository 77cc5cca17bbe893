/* Bug: frees a wild pointer: an address in an unmapped page, with the 16
 * bytes below it on the same page (issue 21: the guard heap used to crash
 * reading a header there). Reported as a foreign pointer, never a crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) void free_wild(void) { free((void *)(uintptr_t)0x12345670u); }
int main(void) {
    free_wild();
    puts("invalid_free_wild still running");
    return 0;
}
