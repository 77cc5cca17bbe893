/* Bug (not a heap bug): a 199-byte strcpy into char[16] smashes the stack
 * (no stack protector), then malloc is called on the smashed stack and the
 * function returns through the damaged return address. The guard's stack
 * capture must not fault; the crash is reported once, with this program's
 * frame, and the program dies of the signal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline, optimize("no-stack-protector"))) void smash_buffer(const char *src) {
    char buf[16];
    strcpy(buf, src);
    void *p = malloc(10); /* a stack capture on a smashed stack */
    free(p);
}
int main(void) {
    char big[200];
    memset(big, 'A', sizeof big - 1);
    big[sizeof big - 1] = 0;
    smash_buffer(big);
    puts("not reached");
    return 0;
}
