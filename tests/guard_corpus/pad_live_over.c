/* Bug: writes two bytes past the end of a block that stays live. By
 * default the 50-byte block ends on the guard page and the first write
 * faults; with --align-all the bytes land in the padding before the guard
 * page (no fault) and are reported at exit. */
#include <stdio.h>
#include <stdlib.h>
static char *kept;
__attribute__((noinline)) char *make_pair(void) { return malloc(50); }
__attribute__((noinline)) void overrun_pair(char *p) {
    p[50] = 1;
    p[51] = 2;
}
int main(void) {
    kept = make_pair();
    overrun_pair(kept);
    puts("pad_live_over done");
    return 0;
}
