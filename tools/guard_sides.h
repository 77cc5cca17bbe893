/* tools/guard_sides.h - `heapkit guard --sides both` (tools/guard_sides.c). */
#ifndef HEAPKIT_TOOLS_GUARD_SIDES_H
#define HEAPKIT_TOOLS_GUARD_SIDES_H

/* Runs argv (LD_PRELOAD already set) twice, trailing then leading guard,
 * with the same arguments, environment and standard input, prints the
 * union of the reports (each once) on stderr and returns the exit status:
 * non-zero when either run reported. */
int hk_guard_sides_both(char **argv);

#endif
