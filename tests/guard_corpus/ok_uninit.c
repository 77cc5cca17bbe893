/* Correct twin of uninit_read.c. */
#include <stdio.h>
#include <stdlib.h>
struct item {
    struct item *next;
    int value;
};
__attribute__((noinline)) int follow(const struct item *it) {
    int n = 0;
    for (; it; it = it->next) n += it->value;
    return n;
}
int main(void) {
    struct item *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    a->value = 1;
    a->next = b;
    b->value = 2;
    b->next = NULL;
    printf("ok_uninit done %d\n", follow(a));
    free(a);
    free(b);
    return 0;
}
