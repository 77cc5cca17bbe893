/*
 * bench/proc_mem.h - this process's memory as the kernel counts it, read
 * from /proc/self/status (Linux): the one reader used by the suites that
 * report resident memory (threads, zone, trim through rss_scenario.h) and
 * by the guard suite's workload program, which is not linked with the
 * harness (so the reader is header-only).
 */
#ifndef HEAPKIT_BENCH_PROC_MEM_H
#define HEAPKIT_BENCH_PROC_MEM_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of `key` ("VmRSS:", "VmHWM:", ...) in KiB, or -1 when the
 * file or the key is missing. O(lines of the file). */
static inline long hkb_proc_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl)) v = strtol(line + kl, NULL, 10);
    fclose(f);
    return v;
}

#endif /* HEAPKIT_BENCH_PROC_MEM_H */
