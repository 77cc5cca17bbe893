/* Links against src/all.c alone: the drop-in unity build must be complete. */
#include "heapkit/heapkit.h"
#include "heapkit/hunk.h"

int main(void) {
    hk_hunk *h = hk_hunk_create(&(hk_hunk_desc){.size = 1u << 16});
    void *p = h ? hk_hunk_alloc(h, 64, "unity") : 0;
    int ok = p && hk_hunk_check(h) == HK_OK && hk_version() == HK_VERSION;
    hk_hunk_destroy(h);
    return ok ? 0 : 1;
}
