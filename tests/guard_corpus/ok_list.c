/* Correct: a linked list built, walked and freed. */
#include <stdio.h>
#include <stdlib.h>
struct node {
    struct node *next;
    char payload[24];
    int v;
};
int main(void) {
    struct node *head = NULL;
    for (int i = 0; i < 20000; i++) {
        struct node *n = malloc(sizeof *n);
        n->v = i;
        n->next = head;
        head = n;
    }
    long sum = 0;
    while (head) {
        struct node *n = head;
        head = n->next;
        sum += n->v;
        free(n);
    }
    printf("ok_list done %ld\n", sum);
    return 0;
}
