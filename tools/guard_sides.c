/*
 * tools/guard_sides.c - both sides of every block: `heapkit guard -- prog
 * args...` (the default when standard input is not a terminal) and
 * `heapkit guard --sides both`. The program runs twice on the guard heap,
 * once with the guard page after each block (overflows and over-reads
 * fault), once before it (underflows and under-reads fault), with the same
 * arguments, environment and standard input (a file: each run opens it
 * again; a pipe: the tool copies it to both as it comes, keeping what the
 * slower has not read), and the union of the two runs' reports is
 * printed, each report once.
 *
 * The two runs go side by side when the second can be isolated: it runs in
 * a mount namespace of its own (a user namespace too when not root) where
 * the working directory and /tmp are overlays whose upper layers are on
 * /dev/shm, so its writes there never reach the first run or the user,
 * every other mount is read-only, descriptors past 2 it would inherit are
 * closed, and a seccomp filter keeps it off the network (sides_no_network).
 * When that cannot be set up (no namespaces, no overlayfs, no read-only
 * remount, no filter, no /dev/shm, or HEAPKIT_GUARD_ISOLATE=0), the
 * default runs the program once and says so in one line; --sides both
 * then runs the second after the first has ended, unisolated, and says so.
 *
 * Invariants: each run's reports go to a log file of its own
 * (HEAPKIT_GUARD_LOG), never mixed with the program's output, on /dev/shm
 * (outside the overlays); the first run's output is the program's, the
 * union goes where the user's HEAPKIT_GUARD_LOG (--log) says, else to
 * standard error; the second run's standard output is discarded, and so
 * is its standard error by default (kept with --sides both: the program
 * may say why it died); the second run does no leak check and keeps no
 * quarantine (the first does both, on the same program: uses after free
 * and leaks are the first's to report; reusing a freed block's pages at
 * once saves the second run page faults: a quarter of python3's time); two
 * reports are the same when their headline kind and their stacks
 * (function and file:line of every frame, addresses left out) are; the
 * status is non-zero when either run reported (the first non-zero status
 * of the runs, else 23) or the first run failed on its own; a second run
 * still going 10 s (or twice the first run's time, if longer) after the
 * first ended is stopped, and that is said.
 */
#define _GNU_SOURCE 1
#include "guard_sides.h"
#include "options.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <ftw.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SIDES_MAX_REPORTS 256

static int sides_write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* Mounts an overlay over dir whose upper layer is stage/<name>; 0 on success. */
static int sides_overlay(const char *dir, const char *stage, const char *name) {
    char up[PATH_MAX], work[PATH_MAX], opts[3 * PATH_MAX + 64];
    snprintf(up, sizeof up, "%s/%s-u", stage, name);
    snprintf(work, sizeof work, "%s/%s-w", stage, name);
    if (mkdir(up, 0755) != 0 || mkdir(work, 0755) != 0) return -1;
    if (snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s", dir, up, work) >= (int)sizeof opts)
        return -1;
    return mount("overlay", dir, "overlay", 0, opts);
}

/* The second run's network: a seccomp filter makes socket() of the
 * internet and packet families, connect(), bind(), sendto() with an address
 * and io_uring fail with EACCES (ENOSYS for io_uring), so the run reaches
 * no server, binds no port or abstract name the first run needs and talks
 * to no local daemon; socketpairs and connected descriptors it inherits
 * work. 0 when installed. (A network namespace did the same with loopback
 * kept, at about 0.6 ms of CPU time per run here and a kernel worker's
 * teardown after it: see docs/guard.md.) */
static int sides_no_network(void) {
#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
    const uint32_t arch = AUDIT_ARCH_X86_64;
#else
    const uint32_t arch = AUDIT_ARCH_AARCH64;
#endif
#define SIDES_NR      offsetof(struct seccomp_data, nr)
#define SIDES_ARCH    offsetof(struct seccomp_data, arch)
#define SIDES_ARG(k)  offsetof(struct seccomp_data, args[k])
#define SIDES_DENY(e) BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (e))
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SIDES_ARCH),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
        SIDES_DENY(EACCES), /* another ABI: nothing passes */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SIDES_NR),
#if defined(__x86_64__)
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1), /* x32 */
        SIDES_DENY(EACCES),
#endif
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_connect, 0, 1),
        SIDES_DENY(EACCES),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_bind, 0, 1),
        SIDES_DENY(EACCES),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_setup, 0, 1),
        SIDES_DENY(ENOSYS),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sendto, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SIDES_ARG(4)), /* the address, low and high words */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SIDES_ARG(4) + 4),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 6, 5), /* NULL: allow; else deny */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SIDES_ARG(0)), /* the family */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_PACKET, 0, 1),
        SIDES_DENY(EACCES),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
#undef SIDES_NR
#undef SIDES_ARCH
#undef SIDES_ARG
#undef SIDES_DENY
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
#else
    return -1; /* no filter written for this architecture: not isolated */
#endif
}

/* Marks every descriptor from `from` on close-on-exec. */
static void sides_close_from(int from) {
#if defined(SYS_close_range) && defined(CLOSE_RANGE_CLOEXEC)
    if (syscall(SYS_close_range, (unsigned)from, ~0u, CLOSE_RANGE_CLOEXEC) == 0) return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536) max = 65536;
    for (int fd = from; fd < (int)max; fd++) (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* mount_setattr(2) (Linux 5.12+): attributes of a mount, or of a tree. */
static int sides_setattr(const char *path, unsigned flags, uint64_t set, uint64_t clr) {
#if defined(SYS_mount_setattr) && defined(MOUNT_ATTR_RDONLY)
    struct mount_attr a;
    memset(&a, 0, sizeof a);
    a.attr_set = set;
    a.attr_clr = clr;
    return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &a, sizeof a);
#else
    (void)path, (void)flags, (void)set, (void)clr;
    errno = ENOSYS;
    return -1;
#endif
}

/* In the second run's child: a mount namespace (and a user namespace when
 * not root) where the working directory and /tmp are overlays whose upper
 * layers are in `stage` (on /dev/shm: a tmpfs outside both), every other
 * mount is read-only (writes fail with EROFS instead of happening twice)
 * but `dir` (the logs, a bind mount of its own), and no network
 * (sides_no_network). Returns 'i' when isolated, else why not: 'd'
 * disabled (HEAPKIT_GUARD_ISOLATE=0), 'n' no namespaces, 'o' no overlay,
 * 'r' no read-only remount, 'f' no seccomp filter (nothing to undo: the
 * namespaces are the child's own, and the child is not run). */
static char sides_isolate(const char *dir, const char *stage) {
    if (!hk_opt_bool(HK_OPT_GUARD_ISOLATE)) return 'd';
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWNS) != 0) {
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return 'n';
        char map[64];
        sides_write_file("/proc/self/setgroups", "deny");
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
        if (sides_write_file("/proc/self/uid_map", map) != 0) return 'n';
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
        if (sides_write_file("/proc/self/gid_map", map) != 0) return 'n';
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) return 'n';
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return 'o';
    if (mount(dir, dir, NULL, MS_BIND, NULL) != 0) return 'o';
    /* the working directory, unless /tmp holds it (the /tmp overlay covers
     * it) or it holds /tmp (the root: left read-only) */
    int cwd_in_tmp = strcmp(cwd, "/tmp") == 0 || strncmp(cwd, "/tmp/", 5) == 0;
    int cwd_ovl = !cwd_in_tmp && strcmp(cwd, "/") != 0;
    if (cwd_ovl && sides_overlay(cwd, stage, "cwd") != 0) return 'o';
    if (sides_overlay("/tmp", stage, "tmp") != 0) return 'o';
    if (sides_setattr("/", AT_RECURSIVE, MOUNT_ATTR_RDONLY, 0) != 0) return 'r';
    if ((cwd_ovl && sides_setattr(cwd, 0, 0, MOUNT_ATTR_RDONLY) != 0) ||
        sides_setattr("/tmp", 0, 0, MOUNT_ATTR_RDONLY) != 0 ||
        sides_setattr(dir, 0, 0, MOUNT_ATTR_RDONLY) != 0)
        return 'r';
    if (chdir(cwd) != 0) return 'o'; /* through the overlay from now on */
    return sides_no_network() == 0 ? 'i' : 'f';
}

/* Why the second run could not be isolated, for the note. */
static const char *sides_why(char c) {
    switch (c) {
    case 'd': return "HEAPKIT_GUARD_ISOLATE=0";
    case 'n': return "no mount namespace";
    case 'o': return "no overlay filesystem";
    case 'r': return "no read-only remount";
    case 'f': return "no seccomp filter";
    default: return "no /dev/shm";
    }
}

static int sides_rm_one(const char *path, const struct stat *st, int flag, struct FTW *f) {
    (void)st;
    (void)f;
    (void)(flag == FTW_DP ? rmdir(path) : unlink(path)); /* best effort */
    return 0;
}

static int sides_open_up(const char *path, const struct stat *st, int flag, struct FTW *f) {
    (void)f;
    if (flag == FTW_D || flag == FTW_DNR) chmod(path, (st->st_mode & 07777) | 0700);
    return 0;
}

/* Removes a directory tree (the second run's overlay layers; overlayfs
 * leaves a work directory of mode 0 in them). */
static void sides_rm_tree(const char *dir) {
    nftw(dir, sides_open_up, 16, FTW_PHYS);
    nftw(dir, sides_rm_one, 16, FTW_PHYS | FTW_DEPTH);
}

typedef struct sides_run_spec {
    const char *side; /* "end" or "start" */
    const char *log;
    int in;          /* standard input: an fd to reopen (a file), to dup (a pipe), -1 (inherited) or
                        -2 (/dev/null) */
    int in_pipe;     /* in is the read end of a pipe the tool feeds: dup2 it as it is */
    int quiet_out;   /* standard output to /dev/null */
    int quiet_err;   /* standard error to /dev/null */
    int second;      /* the second run: no leak check, no quarantine */
    const char *dir; /* isolate in the mount namespace: stage dir/stage, logs in dir (NULL: not) */
    int ready;       /* write end: one byte, 'i' isolated or 's' not (-1: none) */
    int go;          /* read end: wait for EOF before running (-1: run at once) */
    int other[4];    /* the parent's ends of those pipes, closed in the child (-1: none) */
    int detach;      /* a session of its own (no controlling terminal: it cannot open /dev/tty and
                        take the user's keys) and killed if the tool dies */
} sides_run_spec;

static sigset_t sides_program_mask; /* the signal mask the programs get (the tool's own) */

/* Starts argv with the preload set by the caller as spec says; returns the
 * pid, or -1. No descriptor of ours is left open in the program. */
static pid_t sides_start(char **argv, const sides_run_spec *sp) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) return pid;
    sigprocmask(SIG_SETMASK, &sides_program_mask, NULL);
    setenv("HEAPKIT_GUARD_SIDE", sp->side, 1);
    setenv("HEAPKIT_GUARD_LOG", sp->log, 1);
    if (sp->second) {
        setenv("HEAPKIT_GUARD_LEAKS", "0", 1);
        setenv("HEAPKIT_GUARD_QUARANTINE", "0", 1);
        setenv("HEAPKIT_GUARD_FAST_REUSE", "1", 1);
        /* no display, no session bus or sound server: a graphical program's
         * second run ends at start-up instead of opening a second window */
        unsetenv("DISPLAY");
        unsetenv("WAYLAND_DISPLAY");
        unsetenv("XDG_RUNTIME_DIR");
        unsetenv("DBUS_SESSION_BUS_ADDRESS");
    }
    if (sp->in == -2) {
        int nul0 = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (nul0 >= 0) dup2(nul0, 0);
    } else if (sp->in >= 0 && sp->in_pipe) {
        dup2(sp->in, 0);
    } else if (sp->in >= 0) { /* a description of its own: the runs' read offsets must not mix */
        off_t at = lseek(sp->in, 0, SEEK_CUR);
        char self[64];
        snprintf(self, sizeof self, "/proc/self/fd/%d", sp->in);
        int fd = open(self, O_RDONLY | O_CLOEXEC);
        if (fd < 0) fd = sp->in;
        if (at > 0) lseek(fd, at, SEEK_SET);
        if (fd != 0) dup2(fd, 0);
    }
    int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (sp->quiet_out && nul >= 0) dup2(nul, 1);
    if (sp->quiet_err && nul >= 0) dup2(nul, 2);
    signal(SIGPIPE, SIG_DFL);
    if (sp->detach) {
        pid_t parent = getppid();
        setsid();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(125); /* the tool is gone already */
    }
    for (int k = 0; k < 4; k++)
        if (sp->other[k] >= 0) close(sp->other[k]);
    if (sp->ready >= 0) {
        char stage[PATH_MAX];
        snprintf(stage, sizeof stage, "%s/stage", sp->dir);
        char c = sp->dir ? sides_isolate(sp->dir, stage) : 's';
        /* inherited descriptors past the standard three (a log the caller
         * opened, say) are not the second run's to write to */
        if (c == 'i') sides_close_from(3);
        if (write(sp->ready, &c, 1) != 1) _exit(125);
        close(sp->ready);
    }
    if (sp->go >= 0) {
        char c;
        while (read(sp->go, &c, 1) < 0 && errno == EINTR) {
        }
        close(sp->go);
    }
    execvp(argv[0], argv);
    fprintf(stderr, "heapkit guard: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

static int sides_wait(pid_t pid) {
    int st = 0;
    if (pid < 0) return -1;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return st;
}

static double sides_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Waits for pid at most limit seconds; then kills it. *killed says so.
 * SIGCHLD is blocked by the caller, so sigtimedwait wakes at the child's
 * exit, not at a polling tick. */
static int sides_wait_limited(pid_t pid, double limit, int *killed) {
    *killed = 0;
    if (pid < 0) return -1;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    double end = sides_now() + limit;
    for (;;) {
        int st = 0;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) return st;
        if (r < 0 && errno != EINTR) return -1;
        double left = end - sides_now();
        if (left <= 0) {
            kill(pid, SIGKILL);
            *killed = 1;
            return sides_wait(pid);
        }
        struct timespec d = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        sigtimedwait(&chld, NULL, &d);
    }
}

static char *sides_slurp(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap + 1);
    while (b) {
        size_t r = fread(b + len, 1, cap - len, f);
        len += r;
        if (len < cap) break;
        char *nb = realloc(b, cap * 2 + 1);
        if (!nb) break;
        b = nb;
        cap *= 2;
    }
    fclose(f);
    if (b) b[len] = 0;
    *n = len;
    return b;
}

typedef struct sides_report {
    const char *text; /* from "==pid== heapkit guard:" to the next one */
    size_t len;
    char key[2048];   /* kind + frames, addresses left out */
    char kind[64];    /* the headline's first words: "heap overflow", "use after free", ... */
    char alloc[1024]; /* the frames under "allocated at:" (functions and lines) */
    int run;          /* 0: guard page after each block, 1: before */
    int late;         /* found at free, by check or at exit (not at the access) */
    int dropped;      /* the same bug as a report kept */
} sides_report;

/* kind, alloc and late of a report (see sides_report). */
static void sides_describe(sides_report *x) {
    const char *t = x->text, *end = t + x->len;
    const char *h = strstr(t, "heapkit guard: ");
    size_t k = 0;
    if (h && h < end)
        for (h += 15; h < end && *h != '(' && *h != ':' && *h != '\n' && k + 1 < sizeof x->kind; h++)
            x->kind[k++] = *h;
    while (k && x->kind[k - 1] == ' ') k--;
    x->kind[k] = 0;
    const char *nl = memchr(t, '\n', x->len);
    x->late = nl && memmem(t, (size_t)(nl - t), "found at ", 9) != NULL;
    k = 0;
    const char *a = memmem(t, x->len, "allocated at:\n", 14);
    for (const char *l = a ? a + 14 : end; l < end && l + 5 < end && memcmp(l, "    #", 5) == 0;) {
        const char *e = memchr(l, '\n', (size_t)(end - l));
        if (!e) e = end;
        const char *in = memmem(l, (size_t)(e - l), " in ", 4);
        for (const char *q = in ? in : e; q < e && k + 2 < sizeof x->alloc; q++) x->alloc[k++] = *q;
        if (k + 1 < sizeof x->alloc) x->alloc[k++] = '|';
        l = e + 1;
    }
    x->alloc[k] = 0;
}

/* The key of a report: the headline up to its first ": " after the
 * prefix (the kind), then each frame line's part from " in " on. */
static void sides_key(const char *t, size_t n, char *key, size_t cap) {
    size_t k = 0;
    const char *end = t + n;
    const char *h = strstr(t, "heapkit guard: ");
    if (h && h < end) {
        h += strlen("heapkit guard: ");
        const char *e = h;
        while (e < end && *e != '\n' && !(e[0] == ':' && e[1] == ' ') && strncmp(e, " at 0x", 6) != 0) e++;
        /* leak headlines carry their counts: keep the whole line */
        if (strncmp(h, "leak", 4) == 0)
            while (e < end && *e != '\n') e++;
        for (; h < e && k + 1 < cap; h++) key[k++] = *h;
    }
    for (const char *l = t; l < end;) {
        const char *nl = memchr(l, '\n', (size_t)(end - l));
        if (!nl) nl = end;
        const char *in = NULL;
        if (l + 5 < nl && memcmp(l, "    #", 5) == 0) {
            for (const char *q = l; q + 4 <= nl; q++)
                if (memcmp(q, " in ", 4) == 0) {
                    in = q;
                    break;
                }
            if (!in) /* no symbol: "(module+0x...)" */
                for (const char *q = l; q < nl; q++)
                    if (*q == '(') {
                        in = q;
                        break;
                    }
        } else if (l + 2 < nl && l[0] == ' ' && l[1] == ' ' && l[2] != ' ') {
            in = l; /* a label: "  freed at:", "  block ... allocated at:" */
            const char *b = strstr(l, ") allocated at:");
            if (b && b < nl) in = b;
        }
        if (in)
            for (const char *q = in; q < nl && k + 2 < cap; q++) key[k++] = *q;
        if (k + 1 < cap) key[k++] = '|';
        l = nl + 1;
    }
    key[k] = 0;
}

/* Splits a log into reports; returns how many were added to r[*nr...]. */
static int sides_split(const char *log, size_t n, int run, sides_report *r, int *nr) {
    int added = 0;
    const char *p = log, *end = log + n;
    while (p < end && *nr < SIDES_MAX_REPORTS) {
        const char *s = strstr(p, "== heapkit guard: ");
        if (!s) break;
        while (s > p && s[-1] != '\n') s--; /* the line's start: "==pid==" */
        const char *eol = strchr(s, '\n');
        const char *next = eol ? strstr(eol, "== heapkit guard: ") : NULL;
        while (next && next > eol && next[-1] != '\n') next--;
        const char *e = next ? next : end;
        /* "aborting" lines belong to no report of their own */
        const char *h = strstr(s, "heapkit guard: ");
        if (h && strncmp(h + 15, "aborting", 8) != 0) {
            sides_report *x = &r[(*nr)++];
            x->text = s;
            x->len = (size_t)(e - s);
            sides_key(s, x->len, x->key, sizeof x->key);
            x->run = run;
            x->dropped = 0;
            sides_describe(x);
            added++;
        }
        p = e;
    }
    return added;
}

static int sides_status(int st) {
    if (st < 0) return 125;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 125;
}

/* Prints the log's notes (lines "heapkit guard: ..." outside any report,
 * such as the address-space limit) not already in `seen` (the first log's
 * text, or NULL). */
static void sides_notes(FILE *out, const char *log, const char *seen) {
    for (const char *l = log; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l + 1) : strlen(l);
        if (strncmp(l, "heapkit guard: ", 15) == 0) {
            int dup = 0;
            for (const char *q = seen; q && !dup && (q = strstr(q, "heapkit guard: ")) != NULL; q++)
                dup = (q == seen || q[-1] == '\n') && strncmp(q, l, n) == 0;
            if (!dup) fwrite(l, 1, n, out);
        }
        l += n;
    }
}

/* ---- standard input for two runs side by side -------------------------------------- */

typedef struct sides_feed {
    int fd; /* write end of a run's standard input (-1: closed) */
    char *buf;
    size_t off, len, cap;
} sides_feed;

static void sides_feed_close(sides_feed *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    free(f->buf);
    f->buf = NULL;
    f->off = f->len = f->cap = 0;
}

static void sides_feed_push(sides_feed *f, const char *d, size_t n) {
    if (f->fd < 0) return;
    if (f->off == f->len) f->off = f->len = 0;
    if (f->len + n > f->cap) {
        size_t cap = f->cap ? f->cap : 65536;
        while (cap < f->len + n) cap *= 2;
        char *b = realloc(f->buf, cap);
        if (!b) { /* out of memory: this run loses its input */
            sides_feed_close(f);
            return;
        }
        f->buf = b;
        f->cap = cap;
    }
    memcpy(f->buf + f->len, d, n);
    f->len += n;
}

/* The tool's loop while the runs start: copies standard input (a pipe or a
 * socket: not read to its end first, so a producer that never ends or
 * waits for the program's answers works) into each run's pipe as it
 * comes, buffering for the slower one; takes the second run's word on its
 * isolation into *reply ('i': let it run now; else, with `skip` 0, let it
 * run when the first run has ended, whose status goes to *st0, and with
 * `skip` set, stop it). Returns when standard input has ended (or no run
 * reads any more) and every pipe is drained and closed. */
static void sides_pump(sides_feed *f, int ready, int go, pid_t p1, int *st0, int *p1_done, pid_t p2, int skip,
                       char *reply) {
    int eof = 0, waiting = 0;
    char buf[65536];
    for (;;) {
        struct pollfd pf[4];
        int n = 0, i_in = -1, i_f[2] = {-1, -1}, i_ready = -1;
        int open_feeds = (f[0].fd >= 0) + (f[1].fd >= 0);
        if (!eof && open_feeds) {
            i_in = n;
            pf[n++] = (struct pollfd){0, POLLIN, 0};
        }
        for (int k = 0; k < 2; k++)
            if (f[k].fd >= 0) {
                i_f[k] = n;
                pf[n++] = (struct pollfd){f[k].fd, (short)(f[k].len > f[k].off ? POLLOUT : 0), 0};
            }
        if (ready >= 0) {
            i_ready = n;
            pf[n++] = (struct pollfd){ready, POLLIN, 0};
        }
        if (!n && !waiting) break;
        int r = poll(pf, (nfds_t)n, waiting ? 5 : -1);
        if (r < 0 && errno != EINTR) break;
        if (waiting) {
            pid_t w = waitpid(p1, st0, WNOHANG);
            if (w == p1 || (w < 0 && errno != EINTR)) {
                *p1_done = 1;
                waiting = 0;
                close(go); /* not isolated: the second run starts now */
            }
        }
        if (r <= 0) continue;
        if (i_ready >= 0 && pf[i_ready].revents) {
            char c = 's';
            if (read(ready, &c, 1) != 1) c = 's';
            close(ready);
            ready = -1;
            *reply = c;
            if (c == 'i') {
                close(go);     /* isolated: it runs now */
            } else if (skip) { /* not isolated, by default: no second run */
                kill(p2, SIGKILL);
                close(go);
            } else {
                waiting = 1;
            }
        }
        if (i_in >= 0 && pf[i_in].revents) {
            ssize_t got = read(0, buf, sizeof buf);
            if (got > 0)
                for (int k = 0; k < 2; k++) sides_feed_push(&f[k], buf, (size_t)got);
            else if (got == 0 || errno != EINTR)
                eof = 1;
        }
        for (int k = 0; k < 2; k++) {
            if (i_f[k] < 0 || f[k].fd < 0) continue;
            short ev = pf[i_f[k]].revents;
            if (ev & (POLLERR | POLLHUP)) { /* the run closed its standard input or ended */
                sides_feed_close(&f[k]);
                continue;
            }
            if ((ev & POLLOUT) && f[k].len > f[k].off) {
                ssize_t w = write(f[k].fd, f[k].buf + f[k].off, f[k].len - f[k].off);
                if (w > 0)
                    f[k].off += (size_t)w;
                else if (w < 0 && errno != EINTR && errno != EAGAIN)
                    sides_feed_close(&f[k]);
            }
        }
        for (int k = 0; k < 2; k++)
            if (eof && f[k].fd >= 0 && f[k].len == f[k].off) sides_feed_close(&f[k]); /* end of input */
    }
}

/* Where the union goes: the user's HEAPKIT_GUARD_LOG (%p: this process's
 * id), appended to, else standard error. */
static FILE *sides_out(void) {
    const char *user = getenv("HEAPKIT_GUARD_LOG");
    if (!user || !*user) return stderr;
    char path[PATH_MAX];
    size_t o = 0;
    for (const char *c = user; *c && o + 24 < sizeof path; c++) {
        if (c[0] == '%' && c[1] == 'p') {
            o += (size_t)snprintf(path + o, sizeof path - o, "%ld", (long)getpid());
            c++;
        } else {
            path[o++] = *c;
        }
    }
    path[o] = 0;
    FILE *f = fopen(path, "a");
    return f ? f : stderr;
}

int hk_guard_sides_both(char **argv, int by_default) {
    /* the logs and the second run's overlay layers on /dev/shm when it can
     * be had (outside the overlays); else in /tmp, and the runs one after
     * the other */
    char dir[] = "/dev/shm/heapkit-guard-XXXXXX";
    int on_shm = mkdtemp(dir) != NULL;
    if (!on_shm) {
        memcpy(dir, "/tmp/", 5);
        memcpy(dir + 5, "heapkit-guard-XXXXXX", sizeof "heapkit-guard-XXXXXX");
        if (!mkdtemp(dir)) {
            fprintf(stderr, "heapkit guard: cannot make a temporary directory: %s\n", strerror(errno));
            return 125;
        }
    }
    char log[2][sizeof dir + 16], stage[sizeof dir + 16];
    snprintf(log[0], sizeof log[0], "%s/trailing.log", dir);
    snprintf(log[1], sizeof log[1], "%s/leading.log", dir);
    snprintf(stage, sizeof stage, "%s/stage", dir);
    mkdir(stage, 0700);
    /* standard input: a file (or /dev/null) each run opens again; a pipe
     * or socket the tool copies to both as it comes (keeping what the
     * second run has not read yet); a terminal: by default the first run
     * has it and the second (only when isolated) reads /dev/null; with
     * --sides both the runs share it, one after the other */
    struct stat in_st;
    int in_tty = isatty(0),
        in_file = !in_tty && fstat(0, &in_st) == 0 && !S_ISFIFO(in_st.st_mode) && !S_ISSOCK(in_st.st_mode);
    int st[2] = {-1, -1};
    int ready[2] = {-1, -1}, go[2] = {-1, -1}, in1[2] = {-1, -1}, in2[2] = {-1, -1};
    /* "side by side" is the loop below: the second run goes at once when
     * it is isolated, else when the first has ended (or not at all, with
     * the terminal the first run's) */
    int tty_solo = in_tty && by_default; /* the first run keeps the terminal; the second reads /dev/null */
    int side_by_side = (!in_tty || tty_solo) && pipe2(ready, O_CLOEXEC) == 0 && pipe2(go, O_CLOEXEC) == 0;
    int pumped =
        side_by_side && !in_tty && !in_file && pipe2(in1, O_CLOEXEC) == 0 && pipe2(in2, O_CLOEXEC) == 0;
    if (side_by_side && !in_tty && !in_file && !pumped) side_by_side = 0;
    if (pumped) { /* the tool's ends: a write never waits for a run that does not read */
        fcntl(in1[1], F_SETFL, O_NONBLOCK);
        fcntl(in2[1], F_SETFL, O_NONBLOCK);
    }
    int in = in_file ? 0 : -1;
    sides_run_spec lead = {"start", log[1], in, 0, 1, by_default, 1, NULL, -1, -1, {-1, -1, -1, -1}, 0};
    sides_run_spec trail = {"end", log[0], in, 0, 0, 0, 0, NULL, -1, -1, {-1, -1, -1, -1}, 0};
    if (side_by_side) {
        lead.dir = on_shm ? dir : NULL; /* NULL: not isolated */
        lead.ready = ready[1];
        lead.go = go[0];
        int other[4] = {ready[0], go[1], in1[1], in2[1]};
        memcpy(lead.other, other, sizeof other);
        memcpy(trail.other, other, sizeof other);
        if (pumped) {
            lead.in = in2[0];
            trail.in = in1[0];
            lead.in_pipe = trail.in_pipe = 1;
        }
        if (tty_solo) lead.in = -2;
        lead.detach = 1;
    }
    int killed = 0, skipped = 0;
    char reply = 's'; /* the second run's word on its isolation (sides_isolate) */
    sigset_t chld, old_mask;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old_mask);
    sides_program_mask = old_mask;
    if (side_by_side) {
        /* the second run sets its namespaces up (some milliseconds) while
         * the first runs */
        pid_t p2 = sides_start(argv, &lead);
        double t0 = sides_now();
        pid_t p1 = sides_start(argv, &trail);
        close(ready[1]);
        close(go[0]);
        if (pumped) {
            close(in1[0]);
            close(in2[0]);
        }
        sides_feed f[2] = {{pumped ? in1[1] : -1, NULL, 0, 0, 0}, {pumped ? in2[1] : -1, NULL, 0, 0, 0}};
        struct sigaction ign = {0}, old_pipe;
        ign.sa_handler = SIG_IGN;
        sigaction(SIGPIPE, &ign, &old_pipe);
        int p1_done = 0;
        sides_pump(f, ready[0], go[1], p1, &st[0], &p1_done, p2, by_default, &reply);
        sigaction(SIGPIPE, &old_pipe, NULL);
        if (!p1_done) st[0] = sides_wait(p1);
        double took = sides_now() - t0;
        skipped = by_default && reply != 'i';
        st[1] = skipped ? sides_wait(p2) : sides_wait_limited(p2, took * 2 > 10 ? took * 2 : 10, &killed);
    } else {
        for (int k = 0; k < 2; k++) {
            if (ready[k] >= 0) close(ready[k]);
            if (go[k] >= 0) close(go[k]);
        }
        st[0] = sides_wait(sides_start(argv, &trail));
        skipped = by_default; /* by default, never twice without isolation */
        if (!skipped) st[1] = sides_wait(sides_start(argv, &lead));
    }
    sigprocmask(SIG_SETMASK, &old_mask, NULL);

    static sides_report reps[SIDES_MAX_REPORTS];
    int nr = 0, got[2] = {0, 0};
    char *text[2];
    for (int k = 0; k < 2; k++) {
        size_t n;
        text[k] = sides_slurp(log[k], &n);
        if (text[k]) got[k] = sides_split(text[k], n, k, reps, &nr);
        unlink(log[k]);
    }
    sides_rm_tree(dir);
    FILE *out = sides_out();
    sides_notes(out, text[0], NULL);
    sides_notes(out, text[1], text[0]);
    /* One bug seen by both runs (the same kind on a block from the same
     * allocation stack) is shown once: the report made at the access
     * rather than one found later at free, else the first run's. */
    for (int i = 0; i < nr; i++) {
        sides_report *b = &reps[i];
        for (int j = 0; j < nr && b->run == 1 && !b->dropped; j++) {
            sides_report *a = &reps[j];
            if (a->run != 0 || a->dropped || !b->alloc[0] || strcmp(a->kind, b->kind) != 0 ||
                strcmp(a->alloc, b->alloc) != 0)
                continue;
            if (a->late && !b->late)
                a->dropped = 1;
            else
                b->dropped = 1;
        }
    }
    int shown = 0;
    for (int i = 0; i < nr; i++) {
        int dup = reps[i].dropped;
        for (int j = 0; j < i && !dup; j++) dup = !reps[j].dropped && strcmp(reps[i].key, reps[j].key) == 0;
        if (dup) continue;
        fwrite(reps[i].text, 1, reps[i].len, out);
        shown++;
    }
    if (skipped)
        fprintf(out,
                "heapkit guard: under-reads not checked: the second run (guard page before each block) "
                "could not be isolated (%s) and was not run; --sides both runs it anyway, its writes "
                "then happening twice (--sides trailing: one run, no note)\n",
                sides_why(reply));
    else if (!by_default && reply != 'i')
        fprintf(out,
                "heapkit guard: --sides both: the second run was not isolated (%s): its writes happened "
                "twice\n",
                sides_why(reply));
    if (!skipped && !killed && by_default && st[0] == 0 && st[1] != 0 && !got[0] && !got[1])
        fprintf(out,
                "heapkit guard: the second run (guard page before each block) ended early (status %d) "
                "without a report: under-reads past that point are not checked (it cannot write outside "
                "the working directory and /tmp, nor use the network; --sides both shows its output)\n",
                sides_status(st[1]));
    if (killed)
        fprintf(out, "heapkit guard: the run with the guard page before each block did not end in time: "
                     "stopped (--sides trailing runs the program once)\n");
    if (!by_default)
        fprintf(out,
                "heapkit guard: --sides both: %d report%s (trailing guard: %d, leading guard: %d, each shown "
                "once)\n",
                shown, shown == 1 ? "" : "s", got[0], got[1]);
    if (out != stderr) fclose(out);
    free(text[0]);
    free(text[1]);
    int rc0 = sides_status(st[0]), rc1 = killed || skipped ? 0 : sides_status(st[1]);
    if (got[0] || got[1]) return rc0 ? rc0 : rc1 ? rc1 : 23;
    return rc0;
}
