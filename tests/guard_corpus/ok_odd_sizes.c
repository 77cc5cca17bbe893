/* Correct: blocks of every size from 1 to 200 bytes (placed at the
 * alignment their size allows, so odd-sized ones start at odd addresses),
 * headers with an odd-sized tail (a flexible array member) and a struct
 * array, each used up to its last byte and no further, all freed. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct rec {
    uint32_t len;
    uint16_t tag;
    char text[];
};
struct pair {
    uint64_t a;
    uint32_t b;
};
int main(void) {
    unsigned long sum = 0;
    for (size_t n = 1; n <= 200; n++) {
        unsigned char *p = malloc(n);
        memset(p, (int)n, n);
        sum += p[0] + p[n - 1];
        free(p);
    }
    for (size_t len = 1; len <= 40; len += 3) {
        struct rec *r = malloc(offsetof(struct rec, text) + len);
        r->len = (uint32_t)len;
        r->tag = 7;
        memset(r->text, 'r', len);
        sum += r->len + r->tag + (unsigned char)r->text[len - 1];
        free(r);
    }
    struct pair *pa = calloc(5, sizeof *pa);
    for (int i = 0; i < 5; i++) pa[i].a = (uint64_t)i, pa[i].b = (uint32_t)i;
    sum += pa[4].a + pa[4].b;
    free(pa);
    char *s = strdup("odd-sized string");
    sum += strlen(s);
    free(s);
    printf("ok_odd_sizes done %lu\n", sum);
    return 0;
}
