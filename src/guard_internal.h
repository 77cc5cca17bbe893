/*
 * src/guard_internal.h - between the guard heap (guard.c, the algorithm) and
 * its host glue (guard_posix.c: signals, /proc, fork/exec of addr2line,
 * raw writes). Not part of the public API.
 */
#ifndef HEAPKIT_GUARD_INTERNAL_H
#define HEAPKIT_GUARD_INTERNAL_H

#include "heapkit/guard.h"

#include <stddef.h>
#include <stdint.h>

/* What the fault handler knows about one SIGSEGV/SIGBUS. */
#define HK__GUARD_ACCESS_UNKNOWN 0
#define HK__GUARD_ACCESS_READ    1
#define HK__GUARD_ACCESS_WRITE   2
#define HK__GUARD_NREGS          16
typedef struct hk__guard_fault {
    void *addr; /* si_addr */
    void *pc;   /* faulting instruction, or NULL */
    int signo;
    int code;   /* si_code */
    int access; /* HK__GUARD_ACCESS_* */
    int nregs;
    uintptr_t regs[HK__GUARD_NREGS];
    const char *regnames[HK__GUARD_NREGS];
    void *frames[HK_GUARD_MAX_FRAMES + 24]; /* stack at the fault, faulting frame first */
    int nframes;
} hk__guard_fault;

/* guard.c: called by the handler. Reports and aborts when the fault is a
 * guard heap's; returns otherwise. Async-signal context. */
void hk__guard_on_fault(const hk__guard_fault *f);

/* ---- guard_posix.c ------------------------------------------------------ */

/* Installs the SIGSEGV/SIGBUS handler once per process (and an alternate
 * signal stack for the calling thread). Returns 0 on success. */
int hk__guard_os_install_fault_handler(void);

/* Writes all of buf to fd with write(2), retrying on EINTR. Async-signal-safe. */
void hk__guard_os_write(int fd, const char *buf, size_t n);

/* Restores the default SIGABRT action and aborts. */
void hk__guard_os_abort(void) __attribute__((noreturn));

int hk__guard_os_getpid(void);

/* Gives the pages of [p, p+n) back to the OS and makes the range
 * inaccessible in one call (mmap MAP_FIXED over it, with the reservation's
 * flags so the kernel can merge it with its neighbours). Fresh pages read as
 * zero when made accessible again. */
hk_result hk__guard_os_discard(void *p, size_t n);

/* Maps fresh pages over [p, p+n) (read/write when rw, else inaccessible) as
 * a mapping of its own: flags that differ from the reservation's, so the
 * kernel never merges it with its neighbours and later mprotect calls on
 * exactly this range change one mapping instead of splitting and merging
 * (about half the cost). */
hk_result hk__guard_os_map_own(void *p, size_t n, int rw);

/* mincore(): one byte per page of [p, p+n) into vec, bit 0 = resident.
 * Returns 0 on success. */
int hk__guard_os_resident(void *p, size_t n, unsigned char *vec);

/* vm.max_map_count (65530 when unknown) and the current mapping count of the
 * process (lines of /proc/self/maps; 0 when unknown). No malloc. */
size_t hk__guard_os_max_map_count(void);
size_t hk__guard_os_map_count(void);

/* True when n bytes at p can be read without faulting (probe via
 * process_vm_readv; no signal). */
int hk__guard_os_readable(const void *p, size_t n);

/* Calls fn for each private writable mapping of the process (lo < hi),
 * except device mappings, [vvar] and [vsyscall]. No malloc. Returns the
 * number of ranges, or -1 when /proc/self/maps cannot be read. */
typedef void (*hk__guard_range_fn)(uintptr_t lo, uintptr_t hi, void *user);
int hk__guard_os_writable_ranges(hk__guard_range_fn fn, void *user);

/* Runs fn(arg); if it faults (SIGSEGV/SIGBUS) in this thread, returns -1
 * instead of crashing (the handler must be installed), else 0. */
int hk__guard_os_protected_call(void (*fn)(void *arg), void *arg);

/* Full path of `addr2line` on PATH (or ""), looked up once. */
const char *hk__guard_os_addr2line_path(void);

/* Runs `addr2line -f -C -e module addr...` with LD_PRELOAD removed from its
 * environment, its output in out (NUL-terminated). Returns the bytes read,
 * or -1. Uses fork/execve/pipe only: callable after a fault. */
long hk__guard_os_addr2line(const char *tool, const char *module, const uintptr_t *addrs, int n, char *out,
                            size_t outn);

/* Captures the current stack like hk_os_stack_capture but safe to call from
 * the signal handler once hk_os_stack_init ran. */
int hk__guard_os_backtrace(void **frames, int max);

/* Captures the caller's stack for allocation/free traces: [a pc in the
 * caller, its return address, ...], the first `skip` dropped, at most max.
 * Fast: return addresses are found with frame sizes learned per return
 * address from earlier exact (DWARF) unwinds; unknown or varying sites
 * (alloca, signal frames, another stack) unwind exactly. Thread-safe. */
int hk__guard_os_stack(void **frames, int max, int skip);

/* Main program's load base (for telling our own shared module apart). */
uintptr_t hk__guard_os_main_base(void);

#endif /* HEAPKIT_GUARD_INTERNAL_H */
