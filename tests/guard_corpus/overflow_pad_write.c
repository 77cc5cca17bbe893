/* Bug: a 13-byte name buffer gets its terminator at [13]. The block is
 * aligned only as its size needs (to 1), so it ends on the guard page and
 * the write faults; with --align-all (16-byte alignment) the byte lands in
 * padding and is caught when the block is freed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) char *make_record(void) { return malloc(13); }
__attribute__((noinline)) void terminate_record(char *r) {
    memcpy(r, "ABCDEFGHIJKLM", 13);
    r[13] = 0; /* one past the end */
}
__attribute__((noinline)) void release_record(char *r) { free(r); }
int main(void) {
    char *r = make_record();
    terminate_record(r);
    release_record(r);
    puts("freed");
    return 0;
}
