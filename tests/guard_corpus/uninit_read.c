/* Bug: follows a pointer field that was never initialized. glibc's fresh
 * memory is often zero, hiding it; the guard heap fills it with 0xcd. */
#include <stdio.h>
#include <stdlib.h>
struct item {
    struct item *next;
    int value;
};
__attribute__((noinline)) int follow_uninit(const struct item *it) {
    int n = 0;
    while (it) {
        n += it->value;
        it = it->next; /* next was never set */
    }
    return n;
}
int main(void) {
    struct item *it = malloc(sizeof *it);
    it->value = 1; /* forgot it->next = NULL */
    printf("%d\n", follow_uninit(it));
    free(it);
    return 0;
}
