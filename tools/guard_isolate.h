/* tools/guard_isolate.h - the isolation of `heapkit guard`'s second run
 * (tools/guard_isolate.c), shared by the tool (a second run it starts
 * itself) and the preload (a second run forked from the first run's start,
 * shim/guard_twin.c). Linux only. */
#ifndef HEAPKIT_TOOLS_GUARD_ISOLATE_H
#define HEAPKIT_TOOLS_GUARD_ISOLATE_H

#if defined(__GNUC__)
#define HK__ISO_HIDDEN __attribute__((visibility("hidden")))
#else
#define HK__ISO_HIDDEN
#endif

/* In the process that is to become the second run (single-threaded: the
 * user namespace needs it): a mount namespace (and a user namespace when
 * not root) where the working directory and /tmp are overlays whose upper
 * layers are on a tmpfs mounted over `stage` in that namespace (in `stage`
 * itself, on /dev/shm, if the tmpfs is refused), every other
 * mount is read-only (writes fail with EROFS instead of happening twice)
 * but `dir` (the logs, a bind mount of its own), and no network (a seccomp
 * filter: no internet or packet socket, connect, bind, sendto with an
 * address, io_uring). Returns 'i' when isolated, else why not: 'd'
 * disabled (HEAPKIT_GUARD_ISOLATE=0), 'n' no namespaces, 'o' no overlay,
 * 'r' no read-only remount, 'f' no seccomp filter (the caller must then
 * not run the program as the isolated second run). A few hundred
 * microseconds of system calls; allocates nothing. */
HK__ISO_HIDDEN char hk__iso_isolate(const char *dir, const char *stage);

/* Sets the second run's variables, which its own children inherit: the
 * guard page before each block (HEAPKIT_GUARD_SIDE=start), its log, no
 * leak check, no quarantine, fast reuse; and takes away the display, the
 * session bus and the sound server's directory, so that a graphical
 * program's second run ends at start-up instead of opening a second
 * window. Used by the tool's second run and by the one forked from the
 * first run (shim/guard_twin.c). */
HK__ISO_HIDDEN void hk__iso_second_env(const char *log);

/* Sets the variable "NAME=value" `text` names, pointing its environ
 * entry at `text` (which must live as long as the process) when it has
 * one: no allocation (putenv when the name is absent). */
HK__ISO_HIDDEN void hk__iso_put(const char *text);

/* Marks every descriptor from `from` on close-on-exec. */
HK__ISO_HIDDEN void hk__iso_cloexec_from(int from);

#endif
