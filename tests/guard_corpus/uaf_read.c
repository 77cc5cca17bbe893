/* Bug: reads a list node after it was freed. */
#include <stdio.h>
#include <stdlib.h>
struct node {
    struct node *next;
    int value;
};
__attribute__((noinline)) struct node *new_node(int v) {
    struct node *n = malloc(sizeof *n);
    n->next = NULL;
    n->value = v;
    return n;
}
__attribute__((noinline)) void drop_node(struct node *n) { free(n); }
__attribute__((noinline)) int read_after_free(const struct node *n) { return n->value; }
int main(void) {
    struct node *n = new_node(7);
    drop_node(n);
    printf("%d\n", read_after_free(n));
    return 0;
}
