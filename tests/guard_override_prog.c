/* tests/guard_override_prog.c - a program whose plain malloc/free go to the
 * guard heap through heapkit/guard_override.h (the whole file compiled with
 * HK_GUARD_OVERRIDE, the default flags: report and stop). Writes one byte
 * past a 32-byte block: the run must end with the guard's report and a
 * non-zero status (tests/fault_exit.cmake). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HK_GUARD_OVERRIDE_IMPLEMENT 1
#include "heapkit/guard_override.h"

#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline))
#endif
static void
write_one_past(char *name) {
    ((volatile char *)name)[32] = '!';
}

int main(int argc, char **argv) {
    (void)argv;
    char *name = malloc(32);
    if (!name) return 2;
    strcpy(name, "an ordinary name");
    if (argc > 1) write_one_past(name);
    printf("%s\n", name);
    free(name);
    printf("survived\n");
    return 0;
}
