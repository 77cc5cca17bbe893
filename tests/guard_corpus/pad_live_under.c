/* Bug: writes 8 bytes before a block that stays live to the end (it is
 * never freed, so only the exit-time check can see the damage). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static char *kept;
__attribute__((noinline)) char *make_label(void) { return malloc(100); }
__attribute__((noinline)) void stamp_label(char *p) { memset(p - 8, 'C', 50); }
int main(void) {
    kept = make_label();
    stamp_label(kept);
    puts("pad_live_under done");
    return 0;
}
