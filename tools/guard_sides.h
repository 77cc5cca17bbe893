/* tools/guard_sides.h - both sides of every block (tools/guard_sides.c). */
#ifndef HEAPKIT_TOOLS_GUARD_SIDES_H
#define HEAPKIT_TOOLS_GUARD_SIDES_H

/* Runs argv (LD_PRELOAD already set) twice, trailing and leading guard,
 * with the same arguments, environment and standard input (side by side
 * when the second run can be isolated, else one after the other), prints
 * the union of the reports (each once) on stderr and returns the exit
 * status: non-zero when either run reported. by_default: the plain
 * `heapkit guard` (the second run's standard error discarded, no summary
 * line); else `--sides both`. */
int hk_guard_sides_both(char **argv, int by_default);

#endif
