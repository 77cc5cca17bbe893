/*
 * bench/bounds_lib.c - the library compiled into heapkit-bounds without its
 * Valgrind announcements (HK_NO_VALGRIND; see bench/bounds_main.c), from
 * the unity build src/all.c so that the sources are listed once.
 */
#define HK_NO_VALGRIND 1
#include "all.c"
