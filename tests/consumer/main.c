/* A program outside the heapkit tree, built against an installed heapkit. */
#include <heapkit/heapkit.h>
#include <heapkit/hunk.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    hk_hunk *h = hk_hunk_create(&(hk_hunk_desc){.size = 1 << 20});
    if (!h) return 1;
    char *p = hk_hunk_alloc(h, 100, "consumer");
    if (!p) return 2;
    strcpy(p, "installed heapkit works");
    int ok = hk_hunk_check(h) == HK_OK;
    hk_hunk_destroy(h);
    printf("%s (version %d)\n", ok ? "ok" : "check failed", hk_version());
    return ok ? 0 : 3;
}
