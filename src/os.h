/*
 * src/os.h - the host layer: everything heapkit asks of the operating system,
 * behind one private interface. Not part of the public API (the functions
 * have hidden visibility: libheapkit.so does not export them); what users
 * need from it has a deliberate public name in heapkit.h (hk_page_size,
 * hk_now_ns).
 *
 * One copy of what does not depend on the OS, then one implementation per
 * host, each split by concept (src/CMakeLists.txt picks the host's files):
 *   os_common.c         the out-of-memory failure point, the x86-64
 *                       access-size decoder, the frame-pointer walk
 *   os_posix.c          pages, the clock, process helpers, /proc queries,
 *                       mutexes, thread exit (pthread key destructors)
 *   os_posix_stack.c    stack capture (one implementation, two speeds)
 *   os_posix_fault.c    the SIGSEGV/SIGBUS handler and its callbacks
 *   os_posix_symbols.c  symbolization: dladdr, then addr2line for file:line
 *   os_posix_world.c    stopping the other threads (hk_os_stop_world)
 *   os_win32.c          Windows: VirtualAlloc/VirtualProtect/VirtualFree
 *                       pages, QueryPerformanceCounter, SRWLOCK mutexes,
 *                       thread exit (FLS callbacks), process helpers
 *   os_win32_stack.c    RtlCaptureStackBackTrace
 *   os_win32_fault.c    the vectored exception handler and its callbacks
 *   os_win32_symbols.c  module + export lookup, COFF symbols, DbgHelp
 *   os_win32_world.c    stopping the other threads (SuspendThread)
 * Where the hosts differ, the comment of the function says so ("Windows:").
 * The host layer calls no allocator and names none: the guard heap, for
 * one, registers its fault callback here rather than being called by name.
 *
 * Unless noted, nothing here calls malloc (the guard heap may be the
 * process's malloc), and every function is thread-safe.
 */
#ifndef HEAPKIT_OS_H
#define HEAPKIT_OS_H

#include "heapkit/heapkit.h"

#if (defined(__GNUC__) || defined(__clang__)) && defined(_WIN32)
#define HK__HIDDEN   /* PE: heapkit.dll exports only what heapkit.def lists */
#define HK__NORETURN __attribute__((noreturn))
#elif defined(__GNUC__) || defined(__clang__)
#define HK__HIDDEN   __attribute__((visibility("hidden")))
#define HK__NORETURN __attribute__((noreturn))
#else
#define HK__HIDDEN
#define HK__NORETURN
#endif

/* ------------------------------------------------------------------------ */
/* Pages                                                                     */
/* ------------------------------------------------------------------------ */

typedef enum hk_prot { HK_PROT_NONE = 0, HK_PROT_READ = 1, HK_PROT_READ_WRITE = 3 } hk_prot;

/* Page size of the system (cached after the first call). */
HK__HIDDEN size_t hk_os_page_size(void);

/* The alignment of what hk_os_reserve and hk_os_alloc return: the page
 * size on POSIX, the allocation granularity (64 KiB) on Windows. */
HK__HIDDEN size_t hk_os_alloc_granularity(void);

/* Reserves `size` bytes of address space (rounded up to pages), inaccessible.
 * Returns NULL on failure (or when the failure point fires). */
HK__HIDDEN void *hk_os_reserve(size_t size);

/* Reserves `size` bytes of address space (rounded up to pages) readable and
 * writable at once, where the OS gives a page its memory at its first touch
 * and charges nothing before (Linux: MAP_NORESERVE under the default
 * overcommit policy): no commit is ever needed in it, so taking more of it
 * makes no system call (an mprotect takes the process's address-space lock
 * for writing and waits for the page faults of every other thread in the
 * same mapping). NULL where the OS has no such thing (Windows, or strict
 * overcommit accounting refusing the size) or when the failure point
 * fires: the caller then reserves and commits. Release with
 * hk_os_release. Thread-safe. */
HK__HIDDEN void *hk_os_reserve_rw(size_t size);

/* Makes [p, p+size) readable and writable (page-aligned range inside a
 * reservation). Fresh pages read as zero. HK_ERR_NOMEM when the OS (or the
 * failure point) refuses, HK_ERR_INVALID for a bad range. */
HK__HIDDEN hk_result hk_os_commit(void *p, size_t size);

/* Returns the pages' memory to the OS, keeping the reservation (the range
 * becomes inaccessible and reads as zero when committed again). */
HK__HIDDEN hk_result hk_os_decommit(void *p, size_t size);

/* Gives the physical pages of [p, p+size) back to the OS and keeps the
 * range accessible (readable and writable, like before): the next touch of
 * a page faults in a fresh zero page. The contents are lost. On POSIX
 * madvise(MADV_DONTNEED), which lowers the resident size at once
 * (MADV_FREE would leave the pages counted until the kernel needs them);
 * on Windows it would be a decommit followed by a commit of the same range.
 * Not an acquisition: the failure point never fires here. p page-aligned;
 * size is rounded up to pages. HK_ERR_INVALID for a bad range or when the
 * OS refuses (the pages then stay as they were). Thread-safe; O(pages). */
HK__HIDDEN hk_result hk_os_unback(void *p, size_t size);
/* Makes the OS calls behind hk_os_unback ready to run without the dynamic
 * linker's lazy binding, so that the first one inside an allocator
 * operation does not pay the symbol lookup (about 700 instructions on
 * Linux, counted by callgrind). Called when a heap that gives pages back is
 * made; harmless to repeat (once per process does the work). Thread-safe. */
HK__HIDDEN void hk_os_unback_prepare(void);

/* Changes the protection of a page-aligned range. */
HK__HIDDEN hk_result hk_os_protect(void *p, size_t size, hk_prot prot);

/* Releases a reservation made by hk_os_reserve or hk_os_alloc. Windows:
 * only a whole reservation from its base is released; a part of one is
 * decommitted (its memory goes back, its address space stays reserved). */
HK__HIDDEN void hk_os_release(void *p, size_t size);

/* Reserve + commit in one call: readable, writable, zeroed pages. NULL on
 * failure (or when the failure point fires). */
HK__HIDDEN void *hk_os_alloc(size_t size);

/* Faults in every page of [p, p+size) now (page-aligned start, readable and
 * writable pages), keeping their contents, so that later first writes to
 * them take no page fault: MADV_POPULATE_WRITE where the kernel has it
 * (Linux 5.14), else one read and write back per page. O(pages). Returns
 * HK_ERR_INVALID for a bad range, HK_ERR_NOMEM when the OS cannot back the
 * pages (some may have been faulted in). */
HK__HIDDEN hk_result hk_os_prefault(void *p, size_t size);

/* Gives the pages of [p, p+n) back to the OS and makes the range
 * inaccessible in one call (a fresh inaccessible mapping over it, with a
 * reservation's flags, so the kernel can merge it with its neighbours).
 * Fresh pages read as zero when made accessible again. */
HK__HIDDEN hk_result hk_os_discard(void *p, size_t n);

/* Maps fresh pages over [p, p+n) (read/write when rw, else inaccessible) as
 * a mapping of its own: flags that differ from a reservation's, so the
 * kernel never merges it with its neighbours and later protection changes
 * of exactly this range change one mapping instead of splitting and merging
 * (see docs/guard.md). */
HK__HIDDEN hk_result hk_os_map_own(void *p, size_t n, int rw);

/* Makes the pages of [p, p+n), inside a read/write mapping, fault on any
 * access without a mapping of their own (Linux 6.13+: MADV_GUARD_INSTALL;
 * their contents are dropped). O(pages). HK_ERR_UNSUPPORTED where the
 * system has no such thing (then nothing changed). */
HK__HIDDEN hk_result hk_os_guard_install(void *p, size_t n);

/* hk_os_guard_install on `count` ranges of n bytes each, at[0..count):
 * one system call for all of them where the system can (Linux 6.15+:
 * process_madvise on the calling process), else one per range. O(count *
 * pages). HK_OK when every range was installed; otherwise the first
 * failure's result (the ranges before it are installed, the rest may not
 * be). Thread-safe (no state but a flag remembering that the one-call
 * form is missing). */
HK__HIDDEN hk_result hk_os_guard_install_many(void *const *at, size_t count, size_t n);

/* One byte per page of [p, p+n) into vec, bit 0 = resident (mincore;
 * Windows: QueryWorkingSetEx, or committed where that cannot tell).
 * Returns 0 on success. */
HK__HIDDEN int hk_os_resident(void *p, size_t n, unsigned char *vec);

/* True when n bytes (at most 64 are probed) at p can be read without
 * faulting. Raises no signal. */
HK__HIDDEN int hk_os_readable(const void *p, size_t n);

/* ------------------------------------------------------------------------ */
/* Out-of-memory failure point (tests)                                       */
/* ------------------------------------------------------------------------ */

/* Arms the failure point: the n-th page acquisition from now (counting
 * hk_os_reserve, hk_os_alloc, hk_os_commit, hk_os_protect to an accessible
 * protection and hk_os_map_own of accessible pages, in any thread) fails
 * as if the OS had refused it. Once: the point then disarms itself;
 * persistent: every later acquisition fails too, until
 * hk_os_fail_after(0, ...) disarms it. For out-of-memory tests in the
 * manner of SQLite's: for N = 1, 2, ... run an operation with the N-th
 * acquisition failing, until it runs with no failure injected; each run
 * must fail cleanly. */
HK__HIDDEN void hk_os_fail_after(uint64_t n, bool persistent);

/* Arms the random failure point: from now on every page acquisition
 * fails with probability per_million / 1000000, drawn from a sequence
 * fixed by seed (the same seed and the same acquisitions in one thread
 * fail the same calls). per_million 0 disarms it; 1000000 fails them all.
 * Independent of hk_os_fail_after (an acquisition fails when either says
 * so). */
HK__HIDDEN void hk_os_fail_random(uint32_t per_million, uint64_t seed);

/* Number of acquisitions the failure point has refused so far. */
HK__HIDDEN uint64_t hk_os_fail_count(void);

/* For the host implementations: true when the page acquisition about to
 * be made must fail (and counts it). Two relaxed loads when disarmed. */
HK__HIDDEN bool hk_os_fail_now(void);

/* ------------------------------------------------------------------------ */
/* Clock, process                                                            */
/* ------------------------------------------------------------------------ */

/* Monotonic clock in nanoseconds. O(1). */
HK__HIDDEN uint64_t hk_os_now_ns(void);
/* A cheaper monotonic clock in nanoseconds, of coarse resolution (the
 * scheduler tick: 1-10 ms on Linux by kernel configuration, 4 ms on the
 * development machine; 10-16 ms on Windows), for timers that
 * are polled often and measured in tens of milliseconds (the zone's decay).
 * Not comparable with hk_os_now_ns. O(1): Linux CLOCK_MONOTONIC_COARSE
 * (about 3 ns against 21 for CLOCK_MONOTONIC on the development machine),
 * Windows GetTickCount64. */
HK__HIDDEN uint64_t hk_os_coarse_ns(void);

HK__HIDDEN int hk_os_getpid(void);

/* Writes all of buf to fd, retrying on EINTR. Async-signal-safe. */
HK__HIDDEN void hk_os_write(int fd, const char *buf, size_t n);

/* Restores the default SIGABRT action, unblocks it and aborts. Windows:
 * inside a fault callback, ends the callbacks and lets the exception go on
 * to the debugger or crash handler (hk_os_fault_register); elsewhere
 * breaks into an attached debugger, then ends the process with status 3
 * (the C runtime's abort status). */
HK__HIDDEN HK__NORETURN void hk_os_abort(void);

/* vm.max_map_count (65530 when unknown) and the current number of mappings
 * of the process (0 when unknown). */
HK__HIDDEN size_t hk_os_max_map_count(void);
HK__HIDDEN size_t hk_os_map_count(void);

/* Calls fn for each private writable mapping of the process (lo < hi),
 * except device mappings, [vvar] and [vsyscall]. Returns the number of
 * ranges, or -1 when the mappings cannot be read. Not reentrant (one
 * static line buffer): callers serialize. */
typedef void (*hk_os_range_fn)(uintptr_t lo, uintptr_t hi, void *user);
HK__HIDDEN int hk_os_writable_ranges(hk_os_range_fn fn, void *user);

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */

/* A mutex with no allocation: storage for the platform's mutex. */
typedef union hk_os_mutex {
    unsigned char storage[64];
    long long align_;
    void *align_p_;
} hk_os_mutex;
HK__HIDDEN void hk_os_mutex_init(hk_os_mutex *m);
HK__HIDDEN void hk_os_mutex_destroy(hk_os_mutex *m);
HK__HIDDEN void hk_os_mutex_lock(hk_os_mutex *m);
HK__HIDDEN void hk_os_mutex_unlock(hk_os_mutex *m);
/* The two above with the lock-hook signature (user = the hk_os_mutex *). */
HK__HIDDEN void hk_os_mutex_lock_hook(void *m);
HK__HIDDEN void hk_os_mutex_unlock_hook(void *m);

/* Makes fn run when the calling thread exits (once per thread, however
 * often this is called). Up to 8 distinct functions per process. Returns
 * HK_OK, or HK_ERR_NOMEM when the table is full. */
HK__HIDDEN hk_result hk_os_on_thread_exit(void (*fn)(void));
/* The slot of fn in a table of n functions filled from the front (its
 * existing slot, or the first empty one claimed with a compare-and-swap),
 * or -1 when the table is full. Lock-free; both hosts' thread-exit tables
 * use it (os_common.c). */
HK__HIDDEN int hk_os_fn_slot(void (**tab)(void), int n, void (*fn)(void));

/* ------------------------------------------------------------------------ */
/* Stopping the other threads (leak scans)                                   */
/* ------------------------------------------------------------------------ */

#define HK_OS_WORLD_MAX    512 /* threads stopped at most */
#define HK_OS_THREAD_NREGS 16
typedef struct hk_os_thread_state {
    long tid;
    uintptr_t sp;         /* stack pointer of the interrupted code: its live stack is [sp, top) */
    uintptr_t handler_sp; /* in the stop handler's frame, below sp and the saved registers */
    int nregs;            /* general registers in regs (0 where not known: they lie in
                             [handler_sp, sp), the signal frame) */
    uintptr_t regs[HK_OS_THREAD_NREGS];
    uintptr_t stack_lo; /* lowest address of the stack sp lies in, or 0 (see hk_os_stack_alloc_lo) */
} hk_os_thread_state;
typedef void (*hk_os_world_fn)(const hk_os_thread_state *threads, int n, void *user);

/* Stops every other thread of the process (a signal each: each records
 * its stack pointer and registers and waits), calls fn with the stopped
 * threads' states, then resumes them. A thread that does not answer within
 * half a second (it blocks the signal, or exited meanwhile) is left out
 * and keeps running. fn must not allocate or take locks other threads may
 * hold. Returns the number of threads stopped, -1 when threads cannot be
 * stopped (fn not called). One stop at a time (callers wait). A system
 * call interrupted in a stopped thread is restarted where the kernel can
 * (sleeps may end early). */
HK__HIDDEN int hk_os_stop_world(hk_os_world_fn fn, void *user);

/* ------------------------------------------------------------------------ */
/* Stack capture                                                             */
/* ------------------------------------------------------------------------ */

#define HK_OS_STACK_EXACT 1u /* unwind with the DWARF unwinder every time */

/* Captures the calling thread's stack into frames: [a pc in the caller,
 * its return address, ...], the first `skip` of those dropped, at most max
 * kept. Returns the number stored. By default a walker that reads return
 * addresses off the stack using frame sizes learned per return address from
 * earlier exact unwinds; a site never seen, a frame size seen to vary
 * (alloca, VLAs, signal frames) or a frame outside the part of the thread's
 * stack already unwound falls back to the exact unwinder, which learns.
 * HK_OS_STACK_EXACT unwinds exactly every time. Async-signal-safe once
 * hk_os_stack_init ran (the unwinder's first use may load libgcc_s, which
 * allocates). */
HK__HIDDEN int hk_os_stack_capture(void **frames, int max, int skip, unsigned flags);
HK__HIDDEN void hk_os_stack_init(void);

/* The lowest address of the stack allocation holding sp, for hosts that
 * show one stack as several regions (Windows: VirtualQuery reports its
 * committed pages as separate regions; the allocation base bounds them
 * all), so that a leak scan can skip every region of dead stack below a
 * stack pointer, not only the part of the one holding it. POSIX: 0 (a
 * thread's stack is one mapping; the caller cuts the mapping holding sp).
 * O(1), async-signal-safe, never faults. */
HK__HIDDEN uintptr_t hk_os_stack_alloc_lo(uintptr_t sp);

/* For the fault handler: when the calling thread is inside a capture's
 * exact unwind (which faulted on a damaged stack), ends that capture with
 * the frames it has (does not return); else returns at once. Lets a
 * capture survive a smashed stack without ever faulting the program. */
HK__HIDDEN void hk_os_stack_fault_escape(void);

/* ------------------------------------------------------------------------ */
/* Symbolization                                                             */
/* ------------------------------------------------------------------------ */

typedef struct hk_os_symbol {
    uintptr_t pc;        /* in: the code address */
    int return_address;  /* in: pc is a return address (the call is at pc - 1) */
    const char *module;  /* out: path of the module holding pc, or NULL */
    uintptr_t base;      /* out: the module's load address */
    const char *name;    /* out: nearest exported symbol, or NULL */
    uintptr_t name_addr; /* out: its address */
    char func[160];      /* out: function (addr2line), "" when unknown */
    char loc[224];       /* out: "file:line" (addr2line), "" when unknown */
} hk_os_symbol;

#define HK_OS_SYMBOLIZE_LINES 1u /* run addr2line (once per module) for func and loc */

/* Fills the out fields of n entries: module and nearest symbol (dladdr),
 * and with HK_OS_SYMBOLIZE_LINES function and file:line: on POSIX from
 * libdw.so.1 in process when it loads, else from one `addr2line` per
 * module (when hk_os_symbolize_init found it on PATH), started with
 * fork/execve at the module's first lookup and kept until the process
 * ends (a grandchild, never the caller's child); so this may be called
 * after a fault. Not reentrant (static buffers): callers serialize. */
HK__HIDDEN void hk_os_symbolize(hk_os_symbol *syms, int n, unsigned flags);

/* 1 when a symbolization with HK_OS_SYMBOLIZE_LINES has found no way to
 * name lines (POSIX: libdw.so.1 did not load and hk_os_symbolize_init found
 * no addr2line on PATH), so that a report can say why its frames have no
 * file:line; else 0 (also before any such symbolization). */
HK__HIDDEN int hk_os_symbolize_lines_missing(void);
/* 1 when lines are named by addr2line processes because libdw.so.1 did not
 * load (HEAPKIT_NO_LIBDW unset), so that a report can say once that the
 * run-time library (Debian: libdw1) makes reports faster; else 0. */
HK__HIDDEN int hk_os_symbolize_lines_slow(void);

/* Keeps PATH (and the HEAPKIT_NO_LIBDW setting) for the symbolizer, whose
 * `addr2line` is looked up there at the first symbolization that needs it
 * (once; later calls are free). Call it early, from code that may still
 * read the environment. */
HK__HIDDEN void hk_os_symbolize_init(void);

/* The address of the function `name` exported by any module already loaded
 * into the process (a preloaded profiler's entry points), or NULL. POSIX:
 * dlsym(RTLD_DEFAULT); Windows: NULL (no such tool is probed there).
 * Thread-safe; no allocation of its own. */
HK__HIDDEN void *hk_os_find_function(const char *name);

/* Load address of the module holding addr (0 when none), and of the main
 * program. */
HK__HIDDEN uintptr_t hk_os_module_base(const void *addr);
HK__HIDDEN uintptr_t hk_os_main_base(void);

/* ------------------------------------------------------------------------ */
/* Faults                                                                    */
/* ------------------------------------------------------------------------ */

#define HK_OS_ACCESS_UNKNOWN 0
#define HK_OS_ACCESS_READ    1
#define HK_OS_ACCESS_WRITE   2
#define HK_OS_FAULT_NREGS    16
#define HK_OS_FAULT_FRAMES   56

/* What the handler knows about one SIGSEGV/SIGBUS. */
typedef struct hk_os_fault {
    void *addr; /* the faulting address */
    void *pc;   /* the faulting instruction, or NULL */
    int signo;
    const char *signame; /* "SIGSEGV", "SIGBUS" */
    int code;            /* si_code */
    int access;          /* HK_OS_ACCESS_* (x86-64 page faults; else unknown) */
    int access_size;     /* bytes of the faulting access (decoded instruction), 0 when unknown */
    int nregs;
    uintptr_t regs[HK_OS_FAULT_NREGS];
    const char *regnames[HK_OS_FAULT_NREGS];
    void *frames[HK_OS_FAULT_FRAMES]; /* the stack at the fault, faulting frame first */
    int nframes;
} hk_os_fault;

/* A fault callback returns when the fault is none of its business; it may
 * also report and abort. Runs in the signal handler, on an alternate
 * stack. */
typedef void (*hk_os_fault_fn)(const hk_os_fault *f, void *user);

/* Installs the process-wide SIGSEGV/SIGBUS handler (once; an alternate
 * signal stack for the calling thread) and adds fn to the callbacks it
 * runs, in registration order, on every fault; when all return, the
 * default action follows (a core dump at the fault). Registering the same
 * fn and user twice adds it once. Up to 8 callbacks. Returns HK_OK,
 * HK_ERR_NOMEM (table full) or HK_ERR_UNSUPPORTED (sigaction failed). */
HK__HIDDEN hk_result hk_os_fault_register(hk_os_fault_fn fn, void *user);
/* Windows: a vectored exception handler (first in line) takes access
 * violations and in-page errors (signo is the exception code, signame
 * "access violation" or "in-page error"); when the callbacks return, or
 * one ends them with hk_os_abort, it passes the exception on
 * (EXCEPTION_CONTINUE_SEARCH): an attached debugger stops at the faulting
 * instruction, else the program's handlers, else the previously installed
 * top-level filter (crash reporter); when none takes a fault a callback
 * reported, heapkit's filter ends the process with its code (0xC0000005).
 * No alternate stack: the handler
 * runs on the faulting thread's stack (hk_os_fault_thread_init keeps room
 * for it with SetThreadStackGuarantee). */

/* Runs fn(arg); if it faults (SIGSEGV/SIGBUS) in this thread, returns -1
 * instead of crashing, else 0. Protects only once the handler is installed
 * (hk_os_fault_register). Per thread; calls may nest. */
HK__HIDDEN int hk_os_protected_call(void (*fn)(void *arg), void *arg);

/* Gives the calling thread an alternate signal stack for the fault handler
 * (once per thread; released at the thread's exit) unless it has one, so a
 * fault on an exhausted or damaged stack can still be reported. Cheap after
 * the first call. */
HK__HIDDEN void hk_os_fault_thread_init(void);

/* For the fault handlers (os_common.c): the operand size in bytes of the
 * memory access of the x86-64 instruction at pc (readable, 16 bytes), for
 * the common integer and SSE moves, ALU and string instructions; 0 when not
 * decoded (VEX/EVEX, x87, anything unusual). */
HK__HIDDEN int hk_os_x86_access_size(const unsigned char *pc);

/* For the fault handlers: walks the saved frame-pointer chain from bp,
 * accepting only frames above sp, below sp + 64 MiB, in ascending order
 * and readable (the host's hk_os_readable, passed in); stores up to max
 * return addresses. Returns their number. */
HK__HIDDEN int hk_os_fp_walk(uintptr_t bp, uintptr_t sp, void **out, int max,
                             int (*readable)(const void *p, size_t n));

/* The fault callbacks' registry, one for both hosts (os_common.c): adds
 * (fn, user) unless already there (at most 8 pairs: HK_ERR_NOMEM), and the
 * first time calls the host's `install` (nonzero: HK_ERR_UNSUPPORTED, for
 * this and every later registration). HK_ERR_INVALID for a NULL fn. A spin
 * lock; registration is rare. hk_os_fault_register is this with the host's
 * handler installer. */
HK__HIDDEN hk_result hk_os_fault_cb_add(hk_os_fault_fn fn, void *user, int (*install)(void));
/* Hands fault f to every registered callback in registration order (a
 * callback returns when the fault is not its own, or ends the process).
 * Async-signal-safe: reads the table with atomic loads. */
HK__HIDDEN void hk_os_fault_cb_run(const hk_os_fault *f);

#ifdef _WIN32
/* Windows, for hk_os_abort: inside a fault callback on this thread, ends
 * the callbacks (does not return) and the exception goes on; else returns
 * at once. */
HK__HIDDEN void hk_os_fault_abort_escape(void);

/* Windows under Wine: true when alloc_base starts the "kernel stack" of
 * the calling thread (caller_top: hk_os_wine_caller_top(), the end of its
 * stack allocation, 0 off Wine) or of a thread stopped by
 * hk_os_stop_world (Wine puts it in user space, right above the thread's
 * stack; it holds stale system-call arguments). Always false on Windows
 * itself. For hk_os_writable_ranges, which leaves such allocations out. */
HK__HIDDEN uintptr_t hk_os_wine_caller_top(void);
HK__HIDDEN bool hk_os_wine_kernel_stack(const void *alloc_base, uintptr_t caller_top);

/* Windows, for the fault handler: the stack of the thread whose registers
 * are in context (a CONTEXT *), from its pc on, by RtlVirtualUnwind, not
 * leaving the thread's stack. Returns the number of frames stored. */
HK__HIDDEN int hk_os_stack_from_context(const void *context, void **frames, int max);
#endif

#endif /* HEAPKIT_OS_H */
