/* shim/guard_twin.h - the second run of `heapkit guard`, forked from the
 * first run's start (shim/guard_twin.c). Linux only. */
#ifndef HEAPKIT_SHIM_GUARD_TWIN_H
#define HEAPKIT_SHIM_GUARD_TWIN_H

#include "heapkit/guard.h"

/* Called once, from the preload's constructor, with the heap, the
 * descriptor its reports go to (HEAPKIT_GUARD_LOG's) and the environment
 * the program was started with. When HEAPKIT_GUARD_TWIN (set by the tool
 * for the first run) asks for it and the process can be forked safely
 * (one thread, the environment not yet rebuilt), forks the second run as
 * a child of the tool, tells the tool its pid, and returns 0 in the first
 * run, 1 in the second (isolated, its heap against the leading guard,
 * reports to its own log: the caller turns its leak check off). Otherwise
 * tells the tool to start the second run itself and returns 0. The
 * variable is spent either way: the program's own children never fork. */
__attribute__((visibility("hidden"))) int hk__twin_start(hk_guard *g, int log_fd, char **envp);

#endif
