/*
 * tools/symbols.h - names for the code addresses of a trace's stacks:
 * function and file:line from addr2line (binutils) on the module the
 * trace's maps place the address in, or "module+0xoffset" without it.
 */
#ifndef HEAPKIT_TOOLS_SYMBOLS_H
#define HEAPKIT_TOOLS_SYMBOLS_H

#include "trace.h"

typedef struct hks_entry {
    uint64_t addr;
    char func[160];  /* function, or "module+0xoff" */
    char where[240]; /* file:line, or the module's path */
    int lib;         /* in the C/C++ runtime or the recorder: not the program's own site */
} hks_entry;

typedef struct hks {
    hks_entry *e;
    size_t n;
} hks;

/* Resolves the addresses (any order, duplicates allowed). Runs addr2line
 * once per module for up to 256 addresses at a time. */
void hks_resolve(hks *s, const hkt_trace *t, const uint64_t *addrs, size_t n);
const hks_entry *hks_find(const hks *s, uint64_t addr);
void hks_free(hks *s);

/* The frame that names a stack's allocation site: the first one outside the
 * runtime libraries (or the first frame). NULL for an empty stack. */
const hks_entry *hks_site(const hks *s, const hkt_trace *t, uint32_t stack);

#endif /* HEAPKIT_TOOLS_SYMBOLS_H */
