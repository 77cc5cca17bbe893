/* Bug: Juliet's CWE-127 loop variant on wide characters: a pointer 8
 * elements (32 bytes) before a block of 100 wchar_t, read element by
 * element. The block's size (400) is a multiple of 16, so the trailing run
 * places it 16-aligned and the 32 bytes before it are padding there. */
#include <stdio.h>
#include <stdlib.h>
#include <wchar.h>
__attribute__((noinline)) void copy_wide(wchar_t *dst, const wchar_t *src) {
    for (size_t i = 0; i < 100; i++) dst[i] = src[i];
}
int main(void) {
    wchar_t *buf = malloc(100 * sizeof *buf);
    wmemset(buf, L'A', 99);
    buf[99] = L'\0';
    wchar_t *data = buf - 8; /* the flaw */
    wchar_t dst[100];
    copy_wide(dst, data);
    dst[99] = L'\0';
    printf("%zu\n", wcslen(dst));
    free(buf);
    return 0;
}
