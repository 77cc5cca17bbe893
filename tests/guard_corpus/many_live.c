/* Correct: 100,000 live blocks at once (more than vm.max_map_count allows
 * to guard one by one), all written, checked and freed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define N 100000
int main(void) {
    static char *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = malloc(24);
        if (!p[i]) return 1;
        memset(p[i], i & 0x7f, 24);
    }
    int ok = 0;
    for (int i = 0; i < N; i++) ok += p[i][23] == (char)(i & 0x7f);
    for (int i = 0; i < N; i++) free(p[i]);
    printf("many_live done %d\n", ok);
    return 0;
}
